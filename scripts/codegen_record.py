"""Record the hash of every file of generated code the test suite produces, to prove a refactoring left
the generated C byte-identical.

    python scripts/codegen_record.py record OUT.txt [pytest arguments]   # run the tests, write the hashes
    python scripts/codegen_record.py compare BEFORE.txt AFTER.txt [BEFORE_AGAIN.txt]   # exit 1 when they differ

BEFORE_AGAIN.txt, a second record of the code BEFORE.txt recorded, names the tests whose generated files
change from run to run (time-budgeted searches, hypothesis' example counts): they are left out.

Every ``BuildOutput`` a test makes (host, AVR, Cortex-M0/M4/M33, RISC-V; every precision; labels and
probabilities added in place included) and every file written through ``tinycc_ml.files.write_tree``
(firmware projects, Arduino libraries, CMake outputs) is hashed at the end of the test that made it. The
comparison is over the set of hashes, so test order and xdist's scheduling do not matter; temporary
folder names inside generated build files are replaced by a placeholder first.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
from pathlib import Path

ENV = "TINYCC_ML_CODEGEN_RECORD"
ROOT = Path(__file__).resolve().parents[1]
TEMP_PATH = re.compile(r"/tmp/[^\s\"';:)]*")
GENERATED = (".c", ".h", ".S", ".s", ".ino", ".cmake", ".txt", ".properties", "Makefile", ".ld", ".json", ".md")


def _digest(name: str, content) -> str | None:
    if not name.endswith(GENERATED):
        return None
    data = content.encode() if isinstance(content, str) else bytes(content)
    text = TEMP_PATH.sub("<tmp>", data.decode(errors="replace"))
    return f"{Path(name).suffix or Path(name).name} {hashlib.sha256(text.encode()).hexdigest()[:24]}"


# -- the pytest plugin (loaded with -p codegen_record) ------------------------------------------------
_pending: list = []
_written: list[str] = []


def pytest_configure(config):
    if not os.environ.get(ENV):
        return
    import tinycc_ml.files
    import tinycc_ml.target

    original_init = tinycc_ml.target.BuildOutput.__init__

    def init(self, *args, **kwargs):
        original_init(self, *args, **kwargs)
        _pending.append(self)

    tinycc_ml.target.BuildOutput.__init__ = init
    original_write = tinycc_ml.files.write_tree

    def write_tree(out_dir, files, *args, **kwargs):
        for name, content in files.items():
            line = _digest(name, content)
            if line:
                _written.append("tree " + line)
        return original_write(out_dir, files, *args, **kwargs)

    write_tree.original = original_write
    config._codegen_write_tree = write_tree
    tinycc_ml.files.write_tree = write_tree
    _patch_importers(config)


def _patch_importers(config):
    patched = getattr(config, "_codegen_write_tree", None)
    if patched is None:
        return
    for name, module in list(sys.modules.items()):
        if name.startswith("tinycc_ml") and getattr(module, "write_tree", None) is patched.original:
            module.write_tree = patched


def pytest_runtest_setup(item):
    _patch_importers(item.config)


def pytest_runtest_teardown(item):
    if not os.environ.get(ENV):
        return
    lines = list(_written)
    for output in _pending:
        for name, content in output.files.items():
            line = _digest(name, content)
            if line:
                lines.append("build " + line)
    _pending.clear()
    _written.clear()
    if lines:
        with open(f"{os.environ[ENV]}.{os.getpid()}", "a") as out:
            out.write("".join(f"{line}\t{item.nodeid}\n" for line in lines))


# -- the command line ----------------------------------------------------------------------------------
def record(out: Path, pytest_args: list[str]) -> int:
    stem = out.resolve()
    for old in stem.parent.glob(stem.name + ".*"):
        old.unlink()
    env = dict(os.environ, **{ENV: str(stem)})
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "scripts"), env.get("PYTHONPATH")]))
    status = subprocess.call([sys.executable, "-m", "pytest", "-p", "codegen_record", *pytest_args], cwd=ROOT,
                             env=env)
    lines = set()
    for part in stem.parent.glob(stem.name + ".*"):
        lines.update(line for line in part.read_text().splitlines() if line)
        part.unlink()
    out.write_text("\n".join(sorted(lines)) + "\n")
    print(f"{len({line.partition(chr(9))[0] for line in lines})} distinct generated files recorded in {out} "
          f"(pytest exit {status})")
    return status


def read_record(path: Path) -> dict[str, set[str]]:
    """hash line -> the tests that made it"""
    out: dict[str, set[str]] = {}
    for line in path.read_text().splitlines():
        if line:
            digest, _, test = line.partition("\t")
            out.setdefault(digest, set()).add(test)
    return out


def compare(before: Path, after: Path, noise: Path | None = None) -> int:
    """Exit 1 when a generated file of ``before`` is missing from ``after`` or the other way round. With
    ``noise`` (a second record of the same code as ``before``), the tests whose files differ between the two
    records (time budgets, hypothesis' example counts) are reported as noisy and left out."""
    old, new = read_record(before), read_record(after)
    noisy: set[str] = set()
    if noise is not None:
        again = read_record(noise)
        for digest in old.keys() ^ again.keys():
            noisy |= old.get(digest, set()) | again.get(digest, set())
        noisy.discard("")
    print(f"before: {len(old)} distinct generated files, after: {len(new)}, in both: {len(old.keys() & new.keys())}")
    if noisy:
        print(f"noisy tests (their files differ between two records of the same code), left out: {len(noisy)}")
        for test in sorted(noisy):
            print(f"  {test}")
    differ = 0
    for side, first, second in (("only before", old, new), ("only after ", new, old)):
        for line in sorted(first.keys() - second.keys()):
            if first[line] <= noisy:
                continue
            differ += 1
            print(f"  {side}: {line}  ({'; '.join(sorted(first[line]))})")
    print(f"{differ} generated files differ")
    return 0 if differ == 0 else 1


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "record":
        sys.exit(record(Path(sys.argv[2]), sys.argv[3:]))
    if len(sys.argv) in (4, 5) and sys.argv[1] == "compare":
        sys.exit(compare(*map(Path, sys.argv[2:])))
    sys.exit(__doc__)
