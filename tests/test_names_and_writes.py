"""Issue 26, item 3: the last name and write races.

- one compile's outputs are replaced together (no torn .h/.c pairs under concurrent writers of one name);
- names that collide with the generated files, their include guards, or another model's files in the folder
  (also case-insensitively) are refused; so are empty names;
- --depfile/--manifest never overwrite an input or an output, and are written with the outputs, all or nothing;
- NUL in a string label is refused; --max-ram 0.4 is refused by a line saying why;
- Ctrl-C during start-up is one line; report's label-kind mismatch is named; an EdgeML W.npy that is a folder,
  a FIFO or a link to /dev/zero is reported as what it is.
Most run the command line in-process (``cli.main``); the few that need a process say why.
"""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tinycc_ml
from tinycc_ml.cli import main as cli_main
from tinycc_ml.errors import CompileError, DataError, ModelFileError, TinyccError
from tinycc_ml.files import write_tree
from tinycc_ml.models.linear import LinearModel

REPO = Path(__file__).resolve().parent.parent


def run_cli(capsys, *args) -> tuple[int, list[str]]:
    try:
        status = cli_main([str(a) for a in args])
    except SystemExit as exc:  # argparse's usage errors
        status = exc.code
    err = capsys.readouterr().err
    return status, err.splitlines()


def one_error(capsys, *args, words=()) -> str:
    status, lines = run_cli(capsys, *args)
    assert status == 2, lines
    assert len(lines) == 1 and lines[0].startswith("tinycc-ml") and ": error: " in lines[0], lines
    for word in words:
        assert word in lines[0], (word, lines[0])
    return lines[0]


@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
    rng = np.random.default_rng(0)
    path = tmp_path_factory.mktemp("model") / "m.npz"
    LinearModel(rng.normal(size=(3, 4)), rng.normal(size=3)).save(path)
    calibration = path.parent / "cal.npy"
    np.save(calibration, rng.normal(size=(16, 4)))
    return path, calibration


# ---------------------------------------------------------------- torn pairs


def _writer(args):
    out, k, barrier = args
    files = {"m.h": f"#define M_INPUT_DIM {k}\n" + "h" * (1000 * k), "m.c": f"/* {k} */\n" + "c" * (1000 * k)}
    barrier.wait()
    write_tree(out, files)


def test_concurrent_writers_of_one_name_leave_a_whole_pair(tmp_path):
    """6 processes write m.h/m.c of different contents into one folder at once, 12 rounds (the first into a
    folder that does not exist yet): every round ends with the .h and the .c of one writer. Before the
    folder lock, about half such rounds ended with one writer's .h beside another's .c."""
    ctx = multiprocessing.get_context("fork")
    with ctx.Manager() as manager:
        for round_ in range(12):
            out = tmp_path / ("new" if round_ == 0 else "out")
            barrier = manager.Barrier(6)
            procs = [ctx.Process(target=_writer, args=((out, k, barrier),)) for k in range(1, 7)]
            for p in procs:
                p.start()
            for p in procs:
                p.join(60)
                assert p.exitcode == 0
            h, c = (out / "m.h").read_text(), (out / "m.c").read_text()
            k = int(h.split()[2])
            assert c.startswith(f"/* {k} */") and len(c) == len(f"/* {k} */\n") + 1000 * k, (round_, k, c[:12])
            assert sorted(p.name for p in out.iterdir()) == ["m.c", "m.h"]
            assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging left


# ---------------------------------------------------------------- names


@pytest.mark.parametrize("name, words", [("Board", ["board.h", "Board.h", "case"]),
                                         ("Examples", ["examples.h", "Examples.h"]),
                                         ("Main", ["main.c", "Main.c"]),
                                         ("board", ["board"]),
                                         ("Makefile", ["Makefile", "make"]),
                                         ("GNUmakefile", ["make"]),
                                         ("", ["''", "not a valid C identifier"])])
def test_names_colliding_with_the_project_or_make_are_refused(capsys, model_file, tmp_path, name, words):
    model, calibration = model_file
    out = tmp_path / "proj"
    one_error(capsys, "compile", model, "-o", out, "--target", "avr", "--project", "--calibration", calibration,
              "--name", name, words=words)
    assert not out.exists()


@pytest.mark.parametrize("name", ["tcm", "TCM", "tcm_model"])
def test_names_in_the_measurement_harness_namespace_are_refused(capsys, model_file, tmp_path, name):
    # issue 36, item 9: a model named tcm redefined the harness's TCM_LABELS; its fit fell back to an estimate
    model, calibration = model_file
    out = tmp_path / "out"
    one_error(capsys, "compile", model, "-o", out, "--target", "avr", "--calibration", calibration,
              "--name", name, words=[repr(name), "reserved", "tcm_*"])
    assert not out.exists()


def test_names_beside_the_harness_namespace_are_measured(model_file, avr_target):
    result = tinycc_ml.compile(model_file[0], target=avr_target, name="tcmodel", precision="int16",
                               calibration=np.load(model_file[1]))
    assert not result.report["fit"]["how"].startswith("estimated")


def test_a_full_disk_names_the_file_it_could_not_write(capsys, model_file, tmp_path, monkeypatch):
    """Issue 36, item 10: write() raises ENOSPC without a file name; the line said only "No space left"."""
    import errno

    def full(self, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Path, "write_bytes", full)
    out = tmp_path / "out"
    one_error(capsys, "compile", model_file[0], "-o", out, "--name", "full",
              words=["No space left on device", str(out / "full.")])
    assert not out.exists()


def test_empty_name_is_refused_by_the_api(model_file):
    with pytest.raises(CompileError, match="not a valid C identifier"):
        tinycc_ml.compile(model_file[0], name="")


def test_names_differing_only_in_case_or_owning_another_models_files_are_refused(capsys, model_file, tmp_path):
    model, calibration = model_file
    out = tmp_path / "gen"
    assert run_cli(capsys, "compile", model, "-o", out, "--name", "kws")[0] == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    one_error(capsys, "compile", model, "-o", out, "--name", "KWS", words=["kws.h", "case"])
    # kws_input.h of an --project/--arduino build, or another header, owns the guard KWS_INPUT_H
    (out / "helper.h").write_text("#ifndef OTHER_H\n#define OTHER_H\n#endif\n")
    one_error(capsys, "compile", model, "-o", out, "--name", "other", words=["OTHER_H", "helper.h"])
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.name != "helper.h"} == before
    # a different model's generated file is never replaced by a name that happens to match it
    (out / "zz_input.h").write_text("/* zz_input.h: float input to the int16_t input of zz_predict(), on the "
                                    "device.\n */\n#ifndef ZZ_INPUT_H\n#define ZZ_INPUT_H\n#endif\n")
    one_error(capsys, "compile", model, "-o", out, "--name", "zz_input", words=["zz", "replace"])
    assert run_cli(capsys, "compile", model, "-o", out, "--name", "kws")[0] == 0  # its own files: fine


def test_nul_in_a_string_label_is_refused():
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(1)
    X = rng.normal(size=(30, 3))
    est = LogisticRegression().fit(X, np.where(X[:, 0] > 0, "a\x00b", "c"))
    with pytest.raises(TinyccError, match="NUL"):
        tinycc_ml.compile(est)
    with pytest.raises(ModelFileError, match="NUL"):
        LinearModel(rng.normal(size=(2, 3)), np.zeros(2)).set_classes(["x", "y\x00"])


# ---------------------------------------------------------------- depfile and manifest


def test_depfile_and_manifest_never_overwrite_inputs_or_outputs(capsys, model_file, tmp_path):
    model, calibration = model_file
    out = tmp_path / "gen"
    model_bytes, cal_bytes = model.read_bytes(), calibration.read_bytes()
    for option in ("--depfile", "--manifest"):
        one_error(capsys, "compile", model, "-o", out, option, model, words=[option, "input"])
        one_error(capsys, "compile", model, "-o", out, "--calibration", calibration, option, calibration,
                  words=["input"])
        one_error(capsys, "compile", model, "-o", out, "--name", "m", option, out / "m.h", words=["output", "m.h"])
        one_error(capsys, "compile", model, "-o", out, "--name", "m", option, out / "M.C", words=["output"])
        one_error(capsys, "compile", model, "-o", out, option, out, words=["folder"])
    one_error(capsys, "compile", model, "-o", out, "--depfile", tmp_path / "x", "--manifest", tmp_path / "x",
              words=["one file"])
    assert model.read_bytes() == model_bytes and calibration.read_bytes() == cal_bytes
    assert not out.exists()


def test_a_depfile_that_cannot_be_written_leaves_no_outputs(capsys, model_file, tmp_path):
    model, _ = model_file
    out = tmp_path / "gen"
    too_long = tmp_path / ("d" * 300 + ".d")  # beyond NAME_MAX: staging it fails before any output moves in
    status, lines = run_cli(capsys, "compile", model, "-o", out, "--depfile", too_long)
    assert status == 2 and len(lines) == 1, lines
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    # a depfile and manifest inside the output folder that does not exist yet: written with the outputs
    status, _ = run_cli(capsys, "compile", model, "-o", out, "--name", "m", "--depfile", out / "m.d",
                        "--manifest", out / "m.json")
    assert status == 0
    assert sorted(p.name for p in out.iterdir()) == ["m.c", "m.d", "m.h", "m.json"]
    assert (out / "m.d").read_text().startswith(f"{out / 'm.json'} {out / 'm.h'} {out / 'm.c'}:")


# ---------------------------------------------------------------- limits, interrupts, report, EdgeML


def test_a_fractional_byte_limit_is_refused_saying_why(capsys, tmp_path):
    data = tmp_path / "d.npz"
    np.savez(data, X_train=np.zeros((4, 2)), y_train=np.array([0, 1, 0, 1]))
    for value in ("0.4", "1e400", "-1", "nan"):
        line = one_error(capsys, "fit", data, "-o", tmp_path / "o", "--max-ram", value,
                         words=["--max-ram", repr(value), "whole number of bytes"])
        assert "is 0" not in line
    with pytest.raises(DataError, match="0.4"):
        tinycc_ml.fit(np.zeros((4, 2)), [0, 1, 0, 1], target="host", max_ram=0.4)


INTERRUPT_DURING_IMPORT = """
import builtins, runpy, sys
real = builtins.__import__
def interrupted(name, *args, **kwargs):
    if name == {module!r}:
        raise KeyboardInterrupt
    return real(name, *args, **kwargs)
builtins.__import__ = interrupted
sys.argv = ["tinycc-ml", "targets"]
runpy.run_module("tinycc_ml", run_name="__main__", alter_sys=True)
"""


@pytest.mark.parametrize("module", ["tinycc_ml.files", "argparse"])
def test_ctrl_c_during_start_up_is_one_line(module):
    """Ctrl-C while the command line's modules are still being imported (simulated: the import raises
    KeyboardInterrupt, as the signal would): one line and status 130, no traceback. A process is needed:
    the start-up is what is tested."""
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    run = subprocess.run([sys.executable, "-c", INTERRUPT_DURING_IMPORT.format(module=module)], capture_output=True,
                         text=True, env=env, timeout=60)
    assert run.returncode == 130, run.stderr
    assert run.stderr == "tinycc-ml: error: interrupted\n"


def test_report_names_a_label_kind_mismatch():
    from tinycc_ml.target_report import check_targets

    model = LinearModel(np.ones((2, 3)), np.zeros(2)).set_classes(["cat", "dog"])
    with pytest.raises(DataError, match=r"y holds integers .*classes are strings \('cat', 'dog'\)"):
        check_targets(np.array([0, 1, 1]), 3, model)
    numeric = LinearModel(np.ones((2, 3)), np.zeros(2)).set_classes([3, 7])
    with pytest.raises(DataError, match=r"y holds strings .*classes are integers \(3, 7\)"):
        check_targets(np.array(["3", "7", "3"]), 3, numeric)
    with pytest.raises(DataError, match="0.5"):
        check_targets(np.array([3.0, 0.5, 7.0]), 3, numeric)
    assert check_targets(np.array([3.0, 7.0, 3.0]), 3, numeric).tolist() == [3.0, 7.0, 3.0]


@pytest.mark.parametrize("kind, words", [("folder", ["is a folder"]), ("fifo", ["named pipe"]),
                                         ("zero", ["character device", "/dev/zero"]),
                                         ("broken", ["broken symbolic link"])])
def test_edgeml_w_that_is_not_a_file_is_named(tmp_path, kind, words):
    folder = tmp_path / "protonn"
    folder.mkdir()
    for name, shape in (("B", (3, 4)), ("Z", (2, 4))):
        np.save(folder / f"{name}.npy", np.ones(shape))
    np.save(folder / "gamma.npy", np.array(1.0))
    w = folder / "W.npy"
    {"folder": lambda: w.mkdir(), "fifo": lambda: os.mkfifo(w), "zero": lambda: w.symlink_to("/dev/zero"),
     "broken": lambda: w.symlink_to(tmp_path / "nowhere")}[kind]()
    with pytest.raises(ModelFileError) as info:
        tinycc_ml.load_model(folder)
    assert str(w) in str(info.value) and "no such file" not in str(info.value)
    for word in words:
        assert word in str(info.value)


def test_warnings_logged_before_an_error_are_not_printed(capsys, tmp_path):
    """Found by the names fuzzer: a poor-agreement warning was logged, then the compile failed: two lines.
    Warnings are held until the command succeeds; a failing one prints its one error line alone."""
    from tests.fuzzing import seed_models

    seed_models()[3].save(tmp_path / "m.npz")
    X = np.random.default_rng(0).normal(size=(20, 5))
    X[0] = 1e300
    np.save(tmp_path / "cal.npy", X)
    one_error(capsys, "compile", tmp_path / "m.npz", "-o", tmp_path / "o", "--precision", "int8", "--calibration",
              tmp_path / "cal.npy", words=["2^1939"])
    X[0] = 40.0  # a warning (poor agreement) and success: the warning follows the output
    np.save(tmp_path / "cal.npy", X)
    status, lines = run_cli(capsys, "compile", tmp_path / "m.npz", "-o", tmp_path / "o", "--precision", "int8",
                            "--calibration", tmp_path / "cal.npy")
    assert status == 0


def test_edgeml_bonsai_mean_that_is_a_broken_link_is_named(tmp_path):
    """Found by the EdgeML fuzzer: a Bonsai folder whose mean.npy is a broken link was 'no such file'."""
    from tests.models.test_bonsai import write_edgeml

    write_edgeml(tmp_path / "b", np.random.default_rng(0))
    (tmp_path / "b" / "mean.npy").unlink()
    (tmp_path / "b" / "mean.npy").symlink_to(tmp_path / "gone.npy")
    with pytest.raises(ModelFileError, match="mean.npy: a broken symbolic link"):
        tinycc_ml.load_model(tmp_path / "b")


def test_an_interrupted_main_leaves_the_callers_sigint_handler(monkeypatch, capsys):
    """main() called in a process (a test, a notebook) and interrupted: one line, 130, and SIGINT handled as
    before (it was left ignored, so every later child process ignored Ctrl-C too)."""
    import signal

    from tinycc_ml import cli

    def interrupted(argv):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "_main", interrupted)
    before = signal.getsignal(signal.SIGINT)
    assert cli.main(["targets"]) == 130
    assert signal.getsignal(signal.SIGINT) is before
    assert capsys.readouterr().err == "tinycc-ml: error: interrupted\n"


@pytest.mark.parametrize("file_name, prefix", [("iris-xgb.json", "iris_xgb"), ("3 classes.json", "m_3_classes"),
                                               ("stdio.json", "trees"), ("int.json", "trees")])
def test_an_imported_files_stem_is_its_default_name(tmp_path, file_name, prefix, capsys):
    """A booster file compiles under its own stem (made an identifier), not the family's ``trees``; a stem
    compile would refuse as a name (a C keyword, a standard header's) falls back to the family."""
    xgboost = pytest.importorskip("xgboost")
    from sklearn.datasets import load_iris

    X, y = load_iris(return_X_y=True)
    path = tmp_path / file_name
    xgboost.XGBClassifier(n_estimators=3, max_depth=2).fit(X, y).save_model(path)
    assert tinycc_ml.compile(path).prefix == prefix
    out = tmp_path / "out"
    assert cli_main(["compile", str(path), "-o", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == [f"{prefix}.c", f"{prefix}.h"]
