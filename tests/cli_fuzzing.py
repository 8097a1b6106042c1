"""Fuzzers of the command line's surfaces (issue 26), shared by the suite (tests/test_fuzz_surfaces.py, fixed
seeds) and ``scripts/fuzz.py`` (fresh seeds, for as long as it is given).

Each ``*_case(rng, work)`` draws one run and returns an ``Outcome`` (tests/fuzzing.py): ``ok`` (exit 0 and the
outputs are right), ``error`` (exit 2, exactly one line ``tinycc-ml: error: ...``, nothing written, inputs
untouched) or ``crash`` (anything else: a traceback, two lines, a half-written folder, an overwritten input,
a torn .h/.c pair, files whose names or include guards clash, C that does not build):

- ``names_case``: ``compile`` with drawn names (keywords, standard headers, the project's own file names,
  case twins, '', long, odd characters), output paths (spaces, '#', '$', UTF-8, nested, an existing file, the
  model itself), targets, ``--project``/``--arduino``, ``--precision``, ``--calibration`` and ``--examples``
  files (NaN, Inf, 1e300, tiny, wrong widths, odd labels), ``--depfile``/``--manifest`` anywhere (an input, an
  output, each other, a folder); sometimes into a folder already holding another model;
- ``fit_case``: ``fit`` with drawn data (label kinds, one class, NaN, 1e300) and options (byte limits such as
  0.4/16K/1e400, families, sizes, budgets, seeds) on the host target;
- ``edgeml_case``: EdgeML ProtoNN and Bonsai folders whose files are mutated or replaced by a folder, a FIFO,
  a link to /dev/zero, a broken link, an empty file, garbage, an object array;
- ``concurrent_case``: 3-6 processes compiling into one folder at once (one name, case twins, or several
  names; new or existing folder): every process succeeds or refuses cleanly and every header ends beside the
  .c of the same compile;
- ``interrupt_case``: Ctrl-C at a random moment of a ``compile`` process: one line or a complete result.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from tests.fuzzing import Outcome, missing_compiler, seed_files, seed_models

REPO = Path(__file__).resolve().parent.parent
GCC = shutil.which("gcc")
CROSS = {"avr": (shutil.which("avr-gcc"), ["-mmcu=atmega328p"]),
         "cortex-m0": (shutil.which("arm-none-eabi-gcc"), ["-mcpu=cortex-m0", "-mthumb"]),
         "host": (GCC, [])}

NAMES = ["m", "kws", "KWS", "Kws", "model", "", "int", "for", "stdint", "Math", "STDIO", "Board", "board",
         "Examples", "examples", "main", "Main", "startup", "Makefile", "makefile", "GNUmakefile", "README", "nrf51",
         "a" * 40, "a" * 41, "_x", "_", "9a", "a-b", "x y", "caf\u00e9", "m_input", "kws_input", "m.h", "../m",
         "CMakeLists", "library", "kws_demo", "x\ty", "N", "n"]
DIRS = ["out", "out dir", "o#ut", "o$ut", "\u00fcber", "a/b/c", ".", "exists.txt", "model.npz", "out/"]
SIDE = [None, None, "side/dep.d", "out.d", "{out}/{name}.d", "model.npz", "{out}/{name}.h", "{out}/{name}.C",
        "cal.npy", "same", "{out}", "missing/x.d", "exists.txt", "d\u00e9p #1.d"]
LIMITS = ["0.4", "16K", "1e400", "0", "-1", "100", "64KiB", "abc", "2048", "16.5K", "nan", "1e6", " 8K "]
FAMILY_PICKS = ["linear", "knn", "nearest-prototype", "naive-bayes", "linear,knn", "nonsense", "", "linear,linear",
                "random-forest", "protonn"]


def run_cli_inprocess(argv: list[str]) -> tuple[int, str, str]:
    """(status, stdout, stderr) of ``tinycc-ml argv`` in this process (much faster than a new one)."""
    from tinycc_ml.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main([str(a) for a in argv])
        except SystemExit as exc:  # argparse
            status = exc.code if isinstance(exc.code, int) else 2
    return status, out.getvalue(), err.getvalue()


def snapshot(root: Path) -> dict[str, bytes | str]:
    """Every entry under ``root``: file bytes, or the kind of anything else (never opened)."""
    shot = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        if path.is_symlink():
            shot[rel] = f"link:{os.readlink(path)}"
        elif path.is_dir():
            shot[rel] = "dir"
        elif path.is_file():
            shot[rel] = path.read_bytes()
        else:
            shot[rel] = "special"
    return shot


def _one_error_line(status: int, err: str) -> str | None:
    lines = err.splitlines()
    if status == 2 and len(lines) == 1 and lines[0].startswith("tinycc-ml") and ": error: " in lines[0]:
        return lines[0]
    return None


GUARD = re.compile(r"^#ifndef ([A-Za-z_]\w*)\n#define \1\b", re.M)


def check_folder(out: Path) -> str:
    """'' when no two entries of ``out`` (recursively) differ only in case and no two headers share a guard."""
    seen, guards = {}, {}
    for path in sorted(p for p in out.rglob("*")):
        key = str(path.relative_to(out)).lower()
        if key in seen:
            return f"{seen[key]} and {path} differ only in case"
        seen[key] = path
        if path.suffix == ".h" and path.is_file():
            for guard in GUARD.findall(path.read_text(errors="replace")):
                if guard in guards:
                    return f"{guards[guard]} and {path} share the include guard {guard}"
                guards[guard] = path
    return ""


def written(stdout: str) -> list[Path]:
    """The files a successful compile listed ("wrote X" / "unchanged X")."""
    return [Path(line.split(" ", 1)[1]) for line in stdout.splitlines()
            if line.startswith(("wrote ", "unchanged ")) and " " in line]


def c_builds(out: Path, target: str, files: list[Path] | None = None) -> str:
    """'' when every .c under ``out`` (or of ``files``) passes the target's compiler with -Wall -Wextra -Werror
    (syntax and front-end warnings: a NaN literal in examples.h, a comparison that is always false), else the
    words."""
    cc, flags = CROSS.get(target, (None, []))
    sources = sorted(str(p) for p in (files if files is not None else out.rglob("*.c")) if str(p).endswith(".c"))
    if not sources:
        return ""
    if cc is None:
        return missing_compiler(f"the {target} C compiler")
    includes = sorted({f"-I{p.parent}" for p in out.rglob("*.h")})
    run = subprocess.run([cc, *flags, "-std=c99", "-Wall", "-Wextra", "-Werror", "-fsyntax-only", *includes,
                          *sources], capture_output=True, text=True, timeout=120)
    return run.stderr[-500:] if run.returncode else ""


# ---------------------------------------------------------------- names, paths, options


def _rows(rng, D: int, kind: str) -> np.ndarray:
    X = rng.normal(size=(int(rng.integers(16, 40) if rng.random() < 0.9 else rng.integers(1, 16)), D))
    if kind == "nan":
        X[0, 0] = np.nan
    elif kind == "inf":
        X[min(2, len(X) - 1), -1] = np.inf  # among the first 8 rows: the ones --examples stores
    elif kind == "huge":
        X[0] = 1e300
    elif kind == "tiny":
        X *= 1e-12
    elif kind == "wide":
        X = rng.normal(size=(4, D + 1))
    elif kind == "big":
        X *= 3e19
    return X


def _write_data(path: Path, rng, D: int, n_classes: int, examples: bool = False) -> None:
    if examples and rng.random() < 0.4:  # the values --examples writes into the firmware as literals
        kind = str(rng.choice(["nan", "inf", "huge", "big"]))
    else:
        kind = str(rng.choice(["plain"] * 8 + ["nan", "inf", "huge", "tiny", "tiny", "wide", "big", "big"]))
    X = _rows(rng, D, kind)
    how = str(rng.choice(["npy", "npz", "npz_labels", "npz_labels", "npz_strings", "npz_badlabels"]
                         if not examples or rng.random() < 0.3 else ["npy", "npz", "npz_labels"]))
    if how == "npy":
        with path.with_suffix(".npy").open("wb") as handle:
            np.save(handle, X)
        path.with_suffix(".npy").rename(path)
        return
    arrays = {"X": X}
    if how == "npz_labels":
        arrays["y"] = rng.integers(0, n_classes, len(X))
    elif how == "npz_strings":
        arrays["y"] = np.array(["a", "b\u00e9", 'q"'])[rng.integers(0, 3, len(X))]
    elif how == "npz_badlabels":
        arrays["y"] = rng.normal(size=len(X) + int(rng.integers(0, 2)))
    with path.open("wb") as handle:
        np.savez(handle, **arrays)


def names_case(rng, work: Path) -> Outcome:
    k = int(rng.integers(0, len(seed_files())))
    model = work / "model.npz"
    model.write_bytes(seed_files()[k])
    D = seed_models()[k].input_dim
    (work / "exists.txt").write_text("not a folder\n")
    name = str(rng.choice(NAMES)) if rng.random() < 0.6 else f"m{int(rng.integers(0, 99))}"
    out_rel = str(rng.choice(DIRS)) if rng.random() < 0.5 else "out"
    out = work / out_rel
    layout = str(rng.choice(["files", "files", "files", "project", "project", "project", "arduino"]))
    target = {"files": str(rng.choice(["host", "host", "avr", "cortex-m0"])),
              "project": str(rng.choice(["avr", "cortex-m0"])), "arduino": "avr"}[layout]
    if rng.random() < 0.05:
        target = str(rng.choice(["host", "avr", "cortex-m0", "nonsense"]))
    argv = ["compile", model, "-o", out, "--target", target]
    if rng.random() < 0.9:
        argv += ["--name", name]
    if layout != "files":
        argv.append(f"--{layout}")
    precision = str(rng.choice(["float", "int16", "int8", "default"]))
    if precision != "default":
        argv += ["--precision", precision]
    if precision in ("int16", "int8") and rng.random() < 0.95 or precision != "float" and rng.random() < 0.6:
        _write_data(work / "cal.npy", rng, D, 3)
        argv += ["--calibration", work / "cal.npy"]
    if layout != "files" and rng.random() < 0.7 or rng.random() < 0.03:
        _write_data(work / "examples.npz", rng, D, seed_models()[k].n_classes, examples=True)
        argv += ["--examples", work / "examples.npz"]
    sides = {}
    for option in ("--depfile", "--manifest"):
        pick = rng.choice(SIDE) if rng.random() < 0.5 else None
        if pick is None:
            continue
        if pick == "same":
            pick = sides.get("--depfile", "same.d")
        text = str(pick).format(out=out_rel.rstrip("/"), name=name or "x")
        sides[option] = text
        (work / "side").mkdir(exist_ok=True)
        argv += [option, work / text]
    if rng.random() < 0.25:  # a folder already holding another model (its case twin, or its input helper)
        other = str(rng.choice(["kws", "KWS", "m", "M", "m_input"]))
        status, _, _ = run_cli_inprocess(["compile", model, "-o", work / "out", "--name", other])
    before = snapshot(work)
    status, stdout, stderr = run_cli_inprocess(argv)
    after = snapshot(work)
    inputs = ["model.npz", "cal.npy", "examples.npz"]
    for rel in inputs:
        if rel in before and after.get(rel) != before[rel]:
            return Outcome("crash", f"{rel} (an input) was changed by {argv}")
    if _one_error_line(status, stderr):
        if after != before:
            changed = sorted(set(after) ^ set(before)) or [k for k in after if after[k] != before.get(k)]
            return Outcome("crash", f"exit 2 but {changed[:4]} changed: {argv}; {stderr.strip()}")
        return Outcome("error", stderr.strip())
    if status != 0:
        return Outcome("crash", f"exit {status}: {argv}: {stderr[-600:]}")
    if [p for p in after if Path(p).name.startswith(".") and Path(p).name.endswith(".tmp")]:
        return Outcome("crash", f"staging files left: {argv}")
    folder = out if out.is_dir() else None
    if folder is None:
        return Outcome("crash", f"exit 0 but {out} is not a folder: {argv}")
    problem = check_folder(folder)
    if problem:
        return Outcome("crash", f"exit 0 with clashing outputs ({problem}): {argv}")
    for option, text in sides.items():
        path = work / text
        if not path.is_file():
            return Outcome("crash", f"exit 0 but {option} {path} was not written: {argv}")
        if option == "--manifest":
            try:
                json.loads(path.read_text())
            except ValueError:
                return Outcome("crash", f"the manifest is not JSON: {argv}")
    problem = c_builds(folder, target, written(stdout))
    if problem:
        return Outcome("crash", f"exit 0 but the C does not build ({target}): {argv}: {problem}")
    return Outcome("ok")


# ---------------------------------------------------------------- fit


def fit_case(rng, work: Path) -> Outcome:
    n, D = int(rng.integers(12, 40)), int(rng.integers(1, 5))
    X = rng.normal(size=(n, D))
    kind = str(rng.choice(["int", "int", "str", "negative", "big", "one", "nan", "huge", "bool", "float"]))
    y = rng.integers(0, 3, n)
    y[:3] = [0, 1, 2]
    if kind == "str":
        y = np.array(["a", "b b", "c\u00e9"])[y]
    elif kind == "negative":
        y = y - 5
    elif kind == "big":
        y = y.astype(np.int64) + 2**40
    elif kind == "one":
        y = np.zeros(n, dtype=int)
    elif kind == "nan":
        X[1, 0] = np.nan
    elif kind == "huge":
        X[2] *= 1e300
    elif kind == "bool":
        y = y > 0
    elif kind == "float":
        y = y + 0.5
    data = work / "data.npz"
    np.savez(data, X_train=X, y_train=y)
    out = work / "out"
    odd = rng.random() < 0.3  # one odd option (or more) in a third of the cases
    argv = ["fit", data, "-o", out, "--target", "host", "--time-budget",
            str(rng.choice(["4", "3", "0", "-1", "nan"]) if odd and rng.random() < 0.3 else "3"),
            "--sizes", str(rng.choice([1, 2, 0, -1]) if odd and rng.random() < 0.3 else 1),
            "--families", str(rng.choice(FAMILY_PICKS) if odd or rng.random() < 0.3 else rng.choice(FAMILY_PICKS[:4])),
            "--precision", str(rng.choice(["auto", "float", "int16", "int8"]))]
    for option in ("--max-flash", "--max-ram"):
        if rng.random() < 0.5:
            argv += [option, str(rng.choice(LIMITS) if odd else rng.choice(["16K", "2048", "100000", "64KiB"]))]
    if rng.random() < 0.3:
        argv += ["--random-state", str(rng.choice([0, 1, -1, 2**32, 2**32 - 1]))]
    if rng.random() < 0.2:
        argv += ["--name", str(rng.choice(NAMES))]
    before = snapshot(work)
    status, stdout, stderr = run_cli_inprocess(argv)
    after = snapshot(work)
    if after.get("data.npz") != before["data.npz"]:
        return Outcome("crash", f"the data file was changed: {argv}")
    if _one_error_line(status, stderr):
        if after != before:
            return Outcome("crash", f"exit 2 but files changed: {argv}; {stderr.strip()}")
        return Outcome("error", stderr.strip())
    if status != 0:
        return Outcome("crash", f"exit {status}: {argv}: {stderr[-600:]}")
    if not out.is_dir() or not list(out.glob("*.c")):
        return Outcome("crash", f"exit 0 but no C in {out}: {argv}: {stdout[-300:]}")
    problem = c_builds(out, "host")
    return Outcome("crash", f"fit's C does not build: {argv}: {problem}") if problem else Outcome("ok")


# ---------------------------------------------------------------- EdgeML folders


def _edgeml_folder(rng, folder: Path) -> list[str]:
    folder.mkdir()
    if rng.random() < 0.5:
        protonn = seed_models()[0]
        parts = {"W": protonn.W.T, "B": protonn.B, "Z": protonn.Z, "gamma": np.array(protonn.gamma)}
        if rng.random() < 0.5:
            parts.update(mean=protonn.mean, std=protonn.std)
        for name, value in parts.items():
            np.save(folder / f"{name}.npy", value)
        return sorted(f"{n}.npy" for n in parts)
    from tinycc_ml.models.bonsai import tree_sizes

    D, d, L, depth = 4, 2, int(rng.choice([1, 3])), int(rng.integers(0, 3))
    n_nodes, n_int = tree_sizes(depth)
    parts = {"Z": rng.normal(size=(d, D + 1)), "W": rng.normal(size=(L * n_nodes, d)),
             "V": rng.normal(size=(L * n_nodes, d)), "T": rng.normal(size=(max(n_int, 1), d)),
             "mean": np.append(rng.normal(size=D), 0.0), "std": np.append(rng.uniform(0.5, 2, D), 1.0)}
    for name, value in parts.items():
        np.save(folder / f"{name}.npy", value)
    hp = {"dataDim": D + 1, "projDim": d, "numClasses": L, "depth": depth, "sigma": 1.5}
    np.save(folder / "hyperParam.npy", hp, allow_pickle=True)
    return sorted([*(f"{n}.npy" for n in parts), "hyperParam.npy"])


def edgeml_case(rng, work: Path) -> Outcome:
    folder = work / "edgeml"
    names = _edgeml_folder(rng, folder)
    victim = folder / str(rng.choice(names))
    how = str(rng.choice(["none", "none", "none", "folder", "fifo", "zero", "broken", "empty", "garbage", "objects",
                          "delete", "nan", "shape", "header", "hyper"]))
    if how != "none":
        victim.unlink()
    if how == "folder":
        victim.mkdir()
    elif how == "fifo":
        os.mkfifo(victim)
    elif how == "zero":
        victim.symlink_to("/dev/zero")
    elif how == "broken":
        victim.symlink_to(work / "nowhere")
    elif how == "empty":
        victim.write_bytes(b"")
    elif how == "garbage":
        victim.write_bytes(bytes(rng.integers(0, 256, int(rng.integers(1, 200)), dtype=np.uint8)))
    elif how == "objects":
        np.save(victim, np.array([{"a": 1}, None], dtype=object), allow_pickle=True)
    elif how == "nan":
        np.save(victim, np.full((2, 3), np.nan))
    elif how == "shape":
        np.save(victim, rng.normal(size=tuple(int(s) for s in rng.integers(0, 5, int(rng.integers(0, 4))))))
    elif how == "header":
        np.save(victim, rng.normal(size=(3, 3)))
        raw = bytearray(victim.read_bytes())
        raw[int(rng.integers(8, min(len(raw), 90)))] = int(rng.integers(0, 256))
        victim.write_bytes(bytes(raw))
    elif how == "hyper":
        np.save(victim, {"dataDim": 5, "projDim": int(rng.choice([0, -1, 2, 10**9])), "numClasses": 2,
                         "depth": int(rng.choice([0, 1, 40])), "sigma": float(rng.choice([1.0, 0.0, np.inf]))},
                allow_pickle=True)
    out = work / "out"
    argv = ["compile", folder, "-o", out, "--name", "edge"]
    if rng.random() < 0.3:
        argv += ["--depfile", work / "edge.d"]
    status, stdout, stderr = run_cli_inprocess(argv)
    line = _one_error_line(status, stderr)
    if line:
        if out.exists():
            return Outcome("crash", f"exit 2 but {out} was written ({how} {victim.name})")
        if "no such file" in line and (victim.exists() or victim.is_symlink()) and victim.name in line:
            return Outcome("crash", f"{victim.name} ({how}) reported as missing: {line}")
        return Outcome("error", line)
    if status != 0:
        return Outcome("crash", f"exit {status} ({how} {victim.name}): {stderr[-600:]}")
    problem = c_builds(out, "host")
    return Outcome("crash", f"the C does not build ({how} {victim.name}): {problem}") if problem else Outcome("ok")


# ---------------------------------------------------------------- concurrent compiles


def _child(argv, barrier, results, index) -> None:
    barrier.wait()
    results[index] = run_cli_inprocess(argv)[::2]  # (status, stderr)


def concurrent_case(rng, work: Path) -> Outcome:
    import multiprocessing

    import tinycc_ml

    n = int(rng.integers(3, 7))
    mode = str(rng.choice(["one name", "one name", "case twins", "names"]))
    names = {"one name": ["m"] * n, "case twins": [str(rng.choice(["kws", "KWS", "Kws"])) for _ in range(n)],
             "names": [f"m{i}" for i in range(n)]}[mode]
    out = work / "out"
    if rng.random() < 0.5:
        out.mkdir()
    models = []
    for i in range(n):
        k = int(rng.integers(0, len(seed_files())))
        path = work / f"model{i}.npz"
        path.write_bytes(seed_files()[k])
        models.append(path)
    expected = {}  # name -> list of (h, c) pairs its writers may leave
    for path, name in zip(models, names):
        files = tinycc_ml.compile(path, name=name).files
        expected.setdefault(name, []).append((files[f"{name}.h"], files[f"{name}.c"]))
    ctx = multiprocessing.get_context("fork")
    with ctx.Manager() as manager:
        barrier, results = manager.Barrier(n), manager.dict()
        procs = [ctx.Process(target=_child, args=(["compile", models[i], "-o", out, "--name", names[i]], barrier,
                                                  results, i)) for i in range(n)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(120)
        if any(p.exitcode != 0 for p in procs):
            return Outcome("crash", f"a compiling process died: {[p.exitcode for p in procs]}")
        outcomes = dict(results)
    failures = []
    for i in range(n):
        status, stderr = outcomes.get(i, (None, ""))
        if status == 0:
            continue
        if not _one_error_line(status, stderr):
            return Outcome("crash", f"process {i} ({names[i]}, {mode}): exit {status}: {stderr[-400:]}")
        if mode != "case twins":
            return Outcome("crash", f"process {i} ({names[i]}, {mode}) refused: {stderr.strip()}")
        failures.append(stderr.strip())
    for name, pairs in expected.items():
        h, c = out / f"{name}.h", out / f"{name}.c"
        if not h.exists() and not c.exists():
            continue  # every writer of this case twin was refused
        try:
            pair = (h.read_text(), c.read_text())
        except OSError as exc:
            return Outcome("crash", f"{name}: {exc} ({mode}, {n} writers)")
        if pair not in pairs:
            return Outcome("crash", f"{name}.h and {name}.c come from different compiles ({mode}, {n} writers)")
    problem = check_folder(out)
    if problem:
        return Outcome("crash", f"{problem} ({mode}, {n} writers)")
    if [p for p in work.iterdir() if p.name.startswith(".")]:
        return Outcome("crash", f"staging left beside the output folder ({mode})")
    return Outcome("error" if failures else "ok", "; ".join(failures)[:300])


# ---------------------------------------------------------------- Ctrl-C


def python_start_seconds() -> float:
    """How long a bare interpreter takes to start here (site, path finders): Ctrl-C before that is Python's."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    return time.perf_counter() - start


def interrupt_case(rng, work: Path, start_seconds: float = 0.1) -> Outcome:
    model = work / "model.npz"
    model.write_bytes(seed_files()[int(rng.integers(0, len(seed_files())))])
    out = work / "out"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    argv = [sys.executable, "-m", "tinycc_ml", "compile", str(model), "-o", str(out)]
    if rng.random() < 0.5:
        argv += ["--precision", "int16", "--calibration", str(work / "cal.npy")]
        np.save(work / "cal.npy", rng.normal(size=(16, seed_models()[0].input_dim)))
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    time.sleep(start_seconds + float(rng.uniform(0.0, 3.0)))
    proc.send_signal(signal.SIGINT)
    try:
        stdout, stderr = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        return Outcome("crash", "hang: the process did not end within 60 s of Ctrl-C")
    text = stderr.decode(errors="replace")
    if proc.returncode == -signal.SIGINT and not text:  # killed before Python's handler is in, or after the end
        if not out.exists():
            return Outcome("error", "interrupted before Python had started (no output, nothing written)")
        if list(out.glob("*.c")) and list(out.glob("*.h")):
            return Outcome("ok", "interrupted while exiting, after the outputs were complete")
    if proc.returncode == 1 and "tinycc_ml" not in text and ("init_import_site" in text or "<frozen" in text) \
            and not out.exists():  # Python's own start-up (site, path finders): before any of the program ran
        return Outcome("error", "interrupted in Python's start-up (its own message, nothing written)")
    if proc.returncode == 130:
        if text != "tinycc-ml: error: interrupted\n":
            return Outcome("crash", f"Ctrl-C: exit 130 with {text[-500:]!r}")
        if out.exists() and not list(out.glob("*.c")):
            return Outcome("crash", "Ctrl-C left an output folder without its files")
        return Outcome("error", "interrupted")
    if proc.returncode == 0 and list(out.glob("*.c")) and list(out.glob("*.h")):
        return Outcome("ok")
    if proc.returncode == 2 and "no such file" in text:
        return Outcome("crash", f"exit 2: {text}")
    return Outcome("crash", f"Ctrl-C: exit {proc.returncode}: {text[-500:]!r}")


SURFACES = {"names": names_case, "fit": fit_case, "edgeml": edgeml_case, "concurrent": concurrent_case,
            "interrupt": interrupt_case}
