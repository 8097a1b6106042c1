"""ProtoNN from an EdgeML directory through the command line to a C program, and every kind of
bad input turned away with one line and exit status 2."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer
from sklearn.model_selection import train_test_split

from tinycc_ml import load_model
from tinycc_ml.errors import ModelFileError
from tinycc_ml.importers.edgeml import load_edgeml_protonn, save_edgeml_protonn
from tinycc_ml.models.protonn import ProtoNNModel, init_protonn

REPO = Path(__file__).resolve().parents[2]
GCC = shutil.which("gcc")
STRICT = ["-std=c99", "-Wall", "-Wextra", "-Werror"]


def cli(*args, cwd=None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-m", "tinycc_ml", *map(str, args)], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=120)


@pytest.fixture(scope="module")
def cancer():
    X, y = load_breast_cancer(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)
    model = init_protonn(X_train, y_train, projection_dim=6, prototypes_per_class=4)
    return model, X_train, X_test, y_test


@pytest.fixture
def edgeml_dir(cancer, tmp_path) -> Path:
    directory = tmp_path / "edgeml"
    save_edgeml_protonn(cancer[0], directory)
    return directory


DRIVER = r"""
#include <stdio.h>
#include "%(name)s.h"
int main(void)
{
    float x[%(upper)s_INPUT_DIM];
    for (;;) {
        for (int i = 0; i < %(upper)s_INPUT_DIM; ++i)
            if (scanf("%%f", &x[i]) != 1) return 0;
        printf("%%d\n", %(name)s_predict(x));
    }
}
"""


def test_edgeml_directory_to_a_c_program_that_agrees_with_the_model(cancer, edgeml_dir, tmp_path):
    model, _, X_test, y_test = cancer
    assert (edgeml_dir / "W.npy").exists() and np.load(edgeml_dir / "W.npy").shape == (30, 6)  # D x d̂
    out = tmp_path / "build"
    run = cli("compile", edgeml_dir, "--target", "host", "-o", out, "--name", "cancer")
    assert run.returncode == 0, run.stderr
    assert sorted(p.name for p in out.iterdir()) == ["cancer.c", "cancer.h"]
    assert str(out / "cancer.c") in run.stdout
    (tmp_path / "driver.c").write_text(DRIVER % {"name": "cancer", "upper": "CANCER"})
    exe = tmp_path / "driver"
    subprocess.run([GCC, *STRICT, "-O2", "-I", str(out), str(tmp_path / "driver.c"), str(out / "cancer.c"), "-lm",
                    "-o", str(exe)], check=True, capture_output=True, text=True)
    rows = "\n".join(" ".join(repr(float(np.float32(v))) for v in row) for row in X_test)
    got = np.array(subprocess.run([str(exe)], input=rows, capture_output=True, text=True, check=True)
                   .stdout.split(), dtype=int)
    want = model.predict(X_test)
    assert len(got) == len(X_test)
    scores = model.scores(X_test)
    margin = np.abs(scores[:, 0] - scores[:, 1])
    near_tie = margin < 1e-4 * np.abs(scores).max(axis=1)
    np.testing.assert_array_equal(got[~near_tie], want[~near_tie])
    assert near_tie.sum() <= 1
    assert np.mean(got == y_test) > 0.85  # a sane model, not a constant predictor


def test_edgeml_layout_round_trip(cancer, edgeml_dir):
    model = cancer[0]
    back = load_edgeml_protonn(edgeml_dir)
    for name in ("W", "B", "Z", "mean", "std"):
        np.testing.assert_array_equal(getattr(back, name), getattr(model, name))
    assert back.gamma == model.gamma
    assert isinstance(load_model(edgeml_dir), ProtoNNModel)


def test_npz_round_trip(cancer, tmp_path):
    model, _, X_test, _ = cancer
    path = model.save(tmp_path / "model.npz")
    back = load_model(path)
    assert isinstance(back, ProtoNNModel)
    for name, value in model.arrays().items():
        np.testing.assert_array_equal(back.arrays()[name], value)
    np.testing.assert_array_equal(back.scores(X_test), model.scores(X_test))
    with np.load(path, allow_pickle=False) as archive:  # plain numpy can read it, nothing pickled
        assert {"W", "B", "Z", "gamma"} <= set(archive.files)
    no_norm = ProtoNNModel(model.W, model.B, model.Z, model.gamma)
    back = load_model(no_norm.save(tmp_path / "plain.npz"))
    assert back.mean is None and back.std is None


# ---------------------------------------------------------------- bad inputs


def expect_clean_failure(run: subprocess.CompletedProcess, out: Path, *words: str) -> str:
    assert run.returncode == 2, (run.returncode, run.stdout, run.stderr)
    assert "Traceback" not in run.stderr
    lines = run.stderr.splitlines()
    assert len(lines) == 1, run.stderr
    assert lines[0].startswith("tinycc-ml: error: ")
    for word in words:
        assert word in lines[0], (word, lines[0])
    assert not out.exists()
    assert not [p for p in out.parent.iterdir() if p.name.startswith(f".{out.name}")]  # no staging left
    return lines[0]


def edit(directory: Path, name: str, value) -> Path:
    np.save(directory / f"{name}.npy", value)
    return directory


BAD_DIRECTORIES = {
    "missing gamma.npy": (lambda d: (d / "gamma.npy").unlink(), ["gamma"]),
    "B of the wrong shape": (lambda d: edit(d, "B", np.zeros((7, 3))), ["B", "(7, 3)"]),
    "NaN in W": (lambda d: edit(d, "W", np.where(np.eye(30, 6) > 0, np.nan, np.load(d / "W.npy"))), ["W", "nan"]),
    "Inf in Z": (lambda d: edit(d, "Z", np.full(np.load(d / "Z.npy").shape, np.inf)), ["Z", "inf"]),
    "-Inf in std": (lambda d: edit(d, "std", -np.inf * np.ones(30)), ["std"]),
    "object array": (lambda d: np.save(d / "W.npy", np.array([{"a": 1}, None], dtype=object), allow_pickle=True),
                     ["W", "object"]),
    "mean of the wrong length": (lambda d: edit(d, "mean", np.zeros(29)), ["mean", "29"]),
    "gamma not positive": (lambda d: edit(d, "gamma", np.array(-1.0)), ["gamma"]),
    "W not a matrix": (lambda d: edit(d, "W", np.zeros(30)), ["W"]),
    "not a .npy file": (lambda d: (d / "Z.npy").write_text("hello"), ["Z.npy"]),
}


def run_cli_cases(cases) -> list[subprocess.CompletedProcess]:
    """Run command lines in this process, through ``cli.main`` as the script does (a new interpreter per
    case would cost more than the case: the whole process is tested by the cases that use ``cli``)."""
    from tests.cli_fuzzing import run_cli_inprocess

    runs = []
    for args in cases:
        status, out, err = run_cli_inprocess(list(args))
        runs.append(subprocess.CompletedProcess(args, status, out, err))
    return runs


def test_bad_edgeml_directories(cancer, tmp_path):
    cases = []
    for i, name in enumerate(sorted(BAD_DIRECTORIES)):
        directory = tmp_path / f"case{i}"
        save_edgeml_protonn(cancer[0], directory)
        BAD_DIRECTORIES[name][0](directory)
        cases.append(("compile", directory, "--target", "host", "-o", tmp_path / f"out{i}"))
    for i, (name, run) in enumerate(zip(sorted(BAD_DIRECTORIES), run_cli_cases(cases), strict=True)):
        try:
            expect_clean_failure(run, tmp_path / f"out{i}", *BAD_DIRECTORIES[name][1])
        except AssertionError as exc:
            raise AssertionError(f"{name}: {exc}") from None


def test_bad_files_and_options(cancer, tmp_path):
    model = cancer[0]
    good = model.save(tmp_path / "good.npz")
    out = tmp_path / "out"
    not_npz = tmp_path / "notes.npz"
    not_npz.write_text("this is not a zip archive\n")
    pickled = tmp_path / "pickled.npz"
    np.savez(pickled, W=np.array([object(), 1], dtype=object), __meta__=np.zeros(3, dtype=np.uint8))
    no_meta = tmp_path / "plain.npz"
    np.savez(no_meta, W=np.zeros((2, 2)))
    empty_dir = tmp_path / "empty"
    empty_dir.mkdir()
    cases = [
        (["compile", tmp_path / "missing.npz", "-o", out], ["missing.npz"]),
        (["compile", not_npz, "-o", out], ["notes.npz"]),
        (["compile", pickled, "-o", out], ["pickled.npz", "object"]),
        (["compile", no_meta, "-o", out], ["plain.npz"]),
        (["compile", empty_dir, "-o", out], ["empty"]),
        (["compile", good, "--target", "pdp11", "-o", out], ["pdp11", "host"]),
        (["compile", good, "--name", "9lives", "-o", out], ["9lives"]),
        (["compile", good, "--name", "my-model", "-o", out], ["my-model"]),
        (["compile", good, "--name", "int", "-o", out], ["int"]),
        (["compile", good, "--dump-ir-after", "no_such_pass", "-o", out], ["no_such_pass"]),
    ]
    for (_, words), run in zip(cases, run_cli_cases([args for args, _ in cases]), strict=True):
        expect_clean_failure(run, out, *words)


def test_bad_calibration_data(cancer, tmp_path):
    model, X_train, _, _ = cancer
    good = model.save(tmp_path / "good.npz")
    out = tmp_path / "out"
    wrong_width = tmp_path / "wide.npz"
    np.savez(wrong_width, X=np.zeros((40, 31)))
    with_nan = tmp_path / "nan.npy"
    bad = X_train.copy()
    bad[3, 2] = np.nan
    np.save(with_nan, bad)
    too_few = tmp_path / "few.npy"
    np.save(too_few, X_train[:2])
    pickled = tmp_path / "pickled.npy"
    np.save(pickled, np.array([None, 1], dtype=object), allow_pickle=True)
    text = tmp_path / "text.npy"
    text.write_text("1,2,3\n")
    cases = [(wrong_width, ["31"]), (with_nan, ["NaN"]), (too_few, ["2 rows"]), (pickled, ["object"]),
             (text, ["text.npy"]), (tmp_path / "absent.npz", ["absent.npz"])]
    runs = run_cli_cases([("compile", good, "--precision", "int16", "--calibration", path, "-o", out)
                          for path, _ in cases] + [("compile", good, "--precision", "int16", "-o", out)])
    for (_, words), run in zip(cases, runs, strict=False):
        expect_clean_failure(run, out, *words)
    expect_clean_failure(runs[-1], out, "calibration")  # no calibration at all


def test_errors_raised_in_python_are_tinycc_errors(edgeml_dir):
    (edgeml_dir / "gamma.npy").unlink()
    with pytest.raises(ModelFileError, match="gamma"):
        load_model(edgeml_dir)
