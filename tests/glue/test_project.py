"""`compile --project`: standalone firmware projects built with their own Makefile (no tinycc-ml on the
path) and run with `make run` in simavr (ATmega328P) and QEMU -M microbit (nRF51822), mps2-an386
(Cortex-M4F) and mps2-an505 (Cortex-M33); the printed
classes equal the host build's on the same stored rows, the expected classes are the given labels."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import numpy as np
import pytest
from sklearn.datasets import load_digits

import tinycc_ml
from tests.conftest import require_target, require_tools
from tinycc_ml.ir.fixed import quantise
from tinycc_ml.models.protonn import init_protonn

SIMULATOR = {"avr": "simavr", "cortex-m0": "qemu-system-arm", "cortex-m4": "qemu-system-arm",
             "cortex-m33": "qemu-system-arm"}
ANSI = re.compile(r"\x1b\[[0-9;]*m")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("project")
    X, y = load_digits(return_X_y=True)
    init_protonn(X[:600], y[:600], projection_dim=8, prototypes_per_class=2).save(tmp / "m.npz")
    np.savez(tmp / "cal.npz", X_train=X[:600], y_train=y[:600])
    np.savez(tmp / "test.npz", X_test=X[1200:1210], y_test=y[1200:1210])
    return tmp


def make(folder, *args, timeout=120):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the project needs no tinycc-ml
    run = subprocess.run(["make", "-s", *args], cwd=folder, env=env, capture_output=True, text=True,
                         timeout=timeout)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    return ANSI.sub("", run.stdout + run.stderr)  # simavr prints the UART on stderr


@pytest.mark.parametrize("target", ["avr", "cortex-m0", "cortex-m4", "cortex-m33"])
@pytest.mark.parametrize("precision", ["int16", "float"])
def test_project_builds_and_prints_the_host_predictions(data, tmp_path, target, precision):
    require_target(target)
    require_tools("make", SIMULATOR[target])
    out = tmp_path / "fw"
    args = ["compile", data / "m.npz", "--target", target, "--examples", data / "test.npz", "--name", "digits",
            "--project", "-o", out]
    if precision != "float":
        args += ["--calibration", data / "cal.npz"]
    run = subprocess.run([sys.executable, "-m", "tinycc_ml", *map(str, args)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    test = np.load(data / "test.npz")
    rows, labels = test["X_test"][:8].astype(np.float32), test["y_test"][:8]
    if precision == "float":
        host = tinycc_ml.compile(data / "m.npz", name="digits").load()
        want = [host.predict(rows).tolist()]
    else:
        host = tinycc_ml.compile(data / "m.npz", name="digits", precision="int16",
                                 calibration=np.load(data / "cal.npz")["X_train"]).load()
        shifts = np.array([int(v) for v in re.search(r"DIGITS_INPUT_SHIFTS \{([^}]*)\}",
                                                     (out / "digits.h").read_text()).group(1).split(",")])
        want = [host.run_raw(quantise(rows, shifts, 16))[1].tolist()]
    variants = [()] if precision == "float" else [(), ("FLOAT_INPUT=1",)]
    for variant in variants:
        make(out, "clean")
        make(out, *variant)
        text = make(out, "run", *variant)
        got = re.findall(r"row (\d+): predicted (\d+), expected (\d+), (\d+) us", text)
        assert [int(r) for r, *_ in got] == list(range(8)), text
        assert [int(p) for _, p, _, _ in got] in want, (variant, text)
        assert [int(e) for _, _, e, _ in got] == labels.tolist()
        correct = sum(int(p) == int(e) for _, p, e, _ in got)
        assert f"correct {correct}/8" in text


def test_project_refuses_the_host_target_and_clashing_names(data, tmp_path):
    for extra, word in ((["--target", "host"], "--project"), (["--target", "avr", "--name", "main"], "main")):
        run = subprocess.run([sys.executable, "-m", "tinycc_ml", "compile", str(data / "m.npz"), "--project",
                              "--calibration", str(data / "cal.npz"), *extra, "-o", str(tmp_path / "p")],
                             capture_output=True, text=True)
        assert run.returncode == 2 and word in run.stderr and run.stderr.count("\n") == 1
        assert not (tmp_path / "p").exists()
    # a float build has no calibration rows to store: the examples must be given
    run = subprocess.run([sys.executable, "-m", "tinycc_ml", "compile", str(data / "m.npz"), "--project",
                          "--target", "avr", "-o", str(tmp_path / "p")], capture_output=True, text=True)
    assert run.returncode == 2 and "--examples" in run.stderr and not (tmp_path / "p").exists()
    run = subprocess.run([sys.executable, "-m", "tinycc_ml", "compile", str(data / "m.npz"), "--examples",
                          str(data / "test.npz"), "-o", str(tmp_path / "p")], capture_output=True, text=True)
    assert run.returncode == 2 and "--examples" in run.stderr and not (tmp_path / "p").exists()


def test_project_prints_the_header_label_table_when_there_is_one(data, tmp_path):
    """A header with a label table (<NAME>_LABEL_NAMES) makes the demo print labels as well."""
    require_target("cortex-m0")
    require_tools("make", "qemu-system-arm")
    out = tmp_path / "fw"
    run = subprocess.run([sys.executable, "-m", "tinycc_ml", "compile", str(data / "m.npz"), "--target",
                          "cortex-m0", "--calibration", str(data / "cal.npz"), "--examples", str(data / "test.npz"),
                          "--name", "digits", "--project", "-o", str(out)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    names = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
    header = (out / "digits.h").read_text()  # stand in for a model saved with string class labels
    header = re.sub(r"#define DIGITS_LABELS .*\n", "", header)
    table = "#define DIGITS_LABEL_NAMES { " + ", ".join(f'"{n}"' for n in names) + " }"
    header = re.sub(r"#define DIGITS_LABEL_NAMES .*", table, header) if "DIGITS_LABEL_NAMES" in header else (
        header.replace("#define DIGITS_N_SCORES", table + "\n#define DIGITS_N_SCORES"))
    (out / "digits.h").write_text(header)
    text = make(out, "run")
    got = re.findall(r"predicted (\d+), expected (\d+), \d+ us \(label (\w+), expected label (\w+)\)", text)
    assert len(got) == 8, text
    for predicted, expected, label, expected_label in got:
        assert (label, expected_label) == (names[int(predicted)], names[int(expected)])
