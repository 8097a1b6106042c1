"""`compile --depfile/--manifest`, unchanged outputs left alone, permissions from the umask, and a real
Make and Ninja build driven by the depfile."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import require_tools
from tinycc_ml import cli
from tinycc_ml.files import depfile_text, write_tree
from tinycc_ml.models.protonn import ProtoNNModel

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}


def small_model() -> ProtoNNModel:
    rng = np.random.default_rng(3)
    return ProtoNNModel(rng.normal(size=(3, 8)), rng.normal(size=(3, 5)), rng.normal(size=(3, 5)), 0.6)


@pytest.fixture
def model_and_rows(tmp_path):
    model = small_model().save(tmp_path / "model.npz")
    np.savez(tmp_path / "cal.npz", X_train=np.random.default_rng(0).normal(size=(40, 8)))
    return model, tmp_path / "cal.npz"


def parse_depfile(text: str) -> tuple[list[str], list[str]]:
    """The first rule of a depfile, unescaped the way Make reads it."""
    rule = text.split("\n\n")[0].replace("\\\n", " ")
    head, _, tail = rule.partition(": ")

    def split(words: str) -> list[str]:
        out, cur, i = [], "", 0
        while i < len(words):
            ch = words[i]
            if ch == "\\" and i + 1 < len(words) and words[i + 1] in " #":
                cur += words[i + 1]
                i += 2
                continue
            if ch == "$" and words[i + 1:i + 2] == "$":
                cur += "$"
                i += 2
                continue
            if ch == " ":
                if cur:
                    out.append(cur)
                cur = ""
            else:
                cur += ch
            i += 1
        return out + ([cur] if cur else [])

    return split(head), split(tail)


def test_depfile_names_outputs_and_every_input(model_and_rows, tmp_path, capsys):
    model, cal = model_and_rows
    out = tmp_path / "out"
    assert cli.main(["compile", str(model), "-o", str(out), "--name", "m", "--calibration", str(cal),
                     "--depfile", str(tmp_path / "m.d"), "--manifest", str(tmp_path / "m.json")]) == 0
    targets, deps = parse_depfile((tmp_path / "m.d").read_text())
    assert targets == [str(tmp_path / "m.json"), str(out / "m.h"), str(out / "m.c")]
    assert deps == [str(model), str(cal)]
    manifest = json.loads((tmp_path / "m.json").read_text())
    assert manifest["outputs"] == [str(out / "m.h"), str(out / "m.c")]
    assert manifest["headers"] == [str(out / "m.h")] and manifest["sources"] == [str(out / "m.c")]
    assert manifest["inputs"] == [str(model), str(cal)] and manifest["precision"] == "int16"


def test_edgeml_directory_lists_every_file(tmp_path, capsys):
    m = small_model()
    folder = tmp_path / "edge model"  # a space, escaped in the depfile
    folder.mkdir()
    for name, value in {"W": m.W.T, "B": m.B, "Z": m.Z, "gamma": np.array(m.gamma)}.items():
        np.save(folder / f"{name}.npy", value)
    assert cli.main(["compile", str(folder), "-o", str(tmp_path / "o"), "--depfile", str(tmp_path / "e.d")]) == 0
    text = (tmp_path / "e.d").read_text()
    assert "edge\\ model/W.npy" in text
    _, deps = parse_depfile(text)
    assert deps == [str(folder / f"{n}.npy") for n in ("B", "W", "Z", "gamma")]


def test_depfile_escapes_make_specials():
    text = depfile_text(["out dir/a.h"], ["x y.npz", "cost$1.npz", "a#b.npz"])
    assert text.splitlines()[0] == "out\\ dir/a.h: \\"
    assert parse_depfile(text) == (["out dir/a.h"], ["x y.npz", "cost$1.npz", "a#b.npz"])


def test_depfile_in_a_missing_folder_is_an_error_before_anything_is_written(model_and_rows, tmp_path, capsys):
    model, _ = model_and_rows
    code = cli.main(["compile", str(model), "-o", str(tmp_path / "o"), "--depfile", str(tmp_path / "no" / "m.d")])
    assert code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--depfile" in err and "does not exist" in err
    assert not (tmp_path / "o").exists()


def test_unchanged_outputs_keep_their_mtime_and_the_manifest_is_a_stamp(model_and_rows, tmp_path, capsys):
    model, _ = model_and_rows
    out, manifest = tmp_path / "o", tmp_path / "m.json"
    argv = ["compile", str(model), "-o", str(out), "--name", "m", "--manifest", str(manifest)]
    assert cli.main(argv) == 0
    old = 1_000_000_000
    for path in (out / "m.c", out / "m.h", manifest):
        os.utime(path, (old, old))
    capsys.readouterr()
    assert cli.main(argv) == 0
    printed = capsys.readouterr().out
    assert f"unchanged {out / 'm.c'}" in printed
    assert (out / "m.c").stat().st_mtime == old and (out / "m.h").stat().st_mtime == old
    assert manifest.stat().st_mtime > old
    # a different model rewrites the source
    small_model().__class__(*(np.asarray(a) * 2 for a in (small_model().W, small_model().B, small_model().Z)),
                            0.6).save(model)
    assert cli.main(argv) == 0
    assert (out / "m.c").stat().st_mtime > old


def test_write_tree_is_all_or_nothing(tmp_path):
    out = tmp_path / "o"
    write_tree(out, {"a.h": "one", "b.c": "two"})
    with pytest.raises(Exception):  # noqa: B017 - a name escaping the folder: refused before writing
        write_tree(out, {"a.h": "changed", "../evil.c": "x"})
    assert (out / "a.h").read_text() == "one" and not (tmp_path / "evil.c").exists()


def test_permissions_follow_the_umask(tmp_path):
    code = (
        "import os, sys, numpy as np\n"
        "os.umask(0o027)\n"
        "from tinycc_ml import cli\n"
        "from tinycc_ml.models.protonn import ProtoNNModel\n"
        "r = np.random.default_rng(0)\n"
        f"p = ProtoNNModel(r.normal(size=(2, 4)), r.normal(size=(2, 3)), r.normal(size=(2, 3)), 1.0)"
        f".save({str(tmp_path / 'new' / 'model.npz')!r})\n"
        f"sys.exit(cli.main(['compile', str(p), '-o', {str(tmp_path / 'out' / 'deep')!r},"
        f" '--manifest', {str(tmp_path / 'm.json')!r}]))\n")
    run = subprocess.run([sys.executable, "-c", code], env=ENV, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr

    def mode(path):
        return stat.S_IMODE(path.stat().st_mode)

    assert mode(tmp_path / "new" / "model.npz") == 0o640
    assert mode(tmp_path / "new") == 0o750
    assert mode(tmp_path / "out" / "deep") == 0o750 and mode(tmp_path / "out") == 0o750
    assert mode(tmp_path / "out" / "deep" / "protonn.c") == 0o640
    assert mode(tmp_path / "m.json") == 0o640


def _compile_step_ran(output: str) -> bool:
    return "compiled protonn" in output


MAKEFILE = """\
TCM := {python} -m tinycc_ml
out/m.json:
\t$(TCM) compile model.npz --calibration cal.npz --name m -o out --depfile m.d --manifest out/m.json
app: main.c out/m.json
\t$(CC) -Iout -o app main.c out/m.c
-include m.d
"""

MAIN_C = """#include <stdio.h>
#include "m.h"
int main(void) { int16_t x[M_INPUT_DIM] = {0}; printf("%d\\n", m_predict(x)); return 0; }
"""


def test_make_rebuilds_exactly_when_model_or_calibration_changes(model_and_rows, tmp_path):
    require_tools("make", "gcc")
    (tmp_path / "Makefile").write_text(MAKEFILE.format(python=sys.executable))
    (tmp_path / "main.c").write_text(MAIN_C)

    def make():
        run = subprocess.run(["make", "app"], cwd=tmp_path, env=ENV, capture_output=True, text=True)
        assert run.returncode == 0, run.stdout + run.stderr
        return run.stdout

    assert _compile_step_ran(make())
    assert subprocess.run([str(tmp_path / "app")], capture_output=True).returncode == 0
    assert not _compile_step_ran(make())
    for changed in ("cal.npz", "model.npz"):
        touch_after(tmp_path / changed, tmp_path / "out" / "m.json")
        assert _compile_step_ran(make()), changed
        assert not _compile_step_ran(make()), changed


def touch_after(path, stamp):
    """A real edit of ``path``: now, after ``stamp`` was written. (A time stamp in the future would
    stay newer than the outputs of a step that finishes before it, which would then run again.)"""
    while time.time() <= stamp.stat().st_mtime + 0.01:
        time.sleep(0.05)
    os.utime(path, None)


NINJA = """\
rule tcm
  command = {python} -m tinycc_ml -q compile model.npz --calibration cal.npz --name m -o out $
            --depfile m.d --manifest out/m.json
  depfile = m.d
  deps = gcc
  restat = 1
build out/m.json out/m.h out/m.c: tcm
"""


def test_ninja_reads_the_depfile(model_and_rows, tmp_path):
    require_tools("ninja")
    (tmp_path / "build.ninja").write_text(NINJA.format(python=sys.executable))

    def ninja():
        run = subprocess.run(["ninja", "-d", "explain"], cwd=tmp_path, env=ENV, capture_output=True, text=True)
        assert run.returncode == 0, run.stdout + run.stderr
        return run.stdout

    assert "tcm" in ninja() or (tmp_path / "out" / "m.c").exists()
    assert "no work to do" in ninja()
    deps = subprocess.run(["ninja", "-t", "deps"], cwd=tmp_path, capture_output=True, text=True).stdout
    assert "model.npz" in deps and "cal.npz" in deps  # ninja took the inputs from the depfile
    touch_after(tmp_path / "cal.npz", tmp_path / "out" / "m.json")
    assert "no work to do" not in ninja()
    assert "no work to do" in ninja()


file_names = st.sampled_from(["a.h", "b.c", "sub/c.h", "sub/deep/d.c", "e.json"])
contents = st.text(alphabet="xy\n", max_size=6)


@settings(max_examples=40, deadline=None)
@given(rounds=st.lists(st.dictionaries(file_names, contents, min_size=1, max_size=4), min_size=1, max_size=4))
def test_write_tree_keeps_what_did_not_change(tmp_path_factory, rounds):
    out = tmp_path_factory.mktemp("tree") / "out"
    expected: dict[str, str] = {}
    for files in rounds:
        for name in expected:  # an old time stamp makes any rewrite visible
            os.utime(out / name, ns=(10**9, 10**9))
        written = write_tree(out, files)
        assert sorted(written) == sorted(out / n for n, text in files.items() if expected.get(n) != text)
        for name, text in files.items():
            if expected.get(name) == text:
                assert (out / name).stat().st_mtime_ns == 10**9, name
        expected.update(files)
        assert {n: (out / n).read_text() for n in expected} == expected
