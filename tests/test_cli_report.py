"""`tinycc-ml report`: one JSON object with the measured fields; bad data gets one error line."""

import json
import re
import subprocess
import sys

import numpy as np
import pytest
from sklearn.datasets import load_digits

from tests.conftest import require_target
from tinycc_ml.models.protonn import init_protonn

FIELDS = {"target", "precision", "rows", "float_accuracy", "target_accuracy", "agreement_with_float",
          "flash_bytes", "ram_bytes", "stack_bytes", "cycles_mean", "instructions_mean", "macs", "per_mac"}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("report")
    X, y = load_digits(return_X_y=True)
    np.savez(tmp / "data.npz", X_train=X[:900], X_test=X[900:1000], y_test=y[900:1000])
    init_protonn(X[:900], y[:900], projection_dim=6, prototypes_per_class=2).save(tmp / "model.npz")
    return tmp


def run(*args):
    return subprocess.run([sys.executable, "-m", "tinycc_ml", "report", *map(str, args)], capture_output=True,
                          text=True, timeout=600)


@pytest.mark.parametrize("target", ["host", "avr", "cortex-m0"])
def test_json_report(files, target):
    if target != "host":
        require_target(target)
    proc = run(files / "model.npz", "--target", target, "--data", files / "data.npz", "--rows", 60, "--json")
    assert proc.returncode == 0, proc.stderr
    (line,) = proc.stdout.strip().splitlines()
    report = json.loads(line)
    assert FIELDS <= set(report)
    assert report["rows"] == 60 and report["target"] == target
    assert 0.5 < report["target_accuracy"] <= 1 and report["agreement_with_float"] > 0.9
    if target == "avr":
        assert report["cycles_mean"] > report["macs"] and report["instructions_mean"] is None
        assert 0 < report["flash_bytes"] <= 32 * 1024 and report["stack_bytes"] > 0
    if target == "cortex-m0":
        assert report["instructions_mean"] > report["macs"] and report["cycles_mean"] is None
    if target == "host":
        assert "unavailable" in report["kernels"]
    else:  # the per-node kernel costs of a profile: the projection's mat-vec kernel the largest
        unit = "cycles" if target == "avr" else "instructions"
        rows = report["kernels"]["per_node"]
        assert len(rows) >= 3 and all(r[f"measured_{unit}"] > 0 and r["functions"] for r in rows)
        assert any("mac" in f for f in max(rows, key=lambda r: r[f"measured_{unit}"])["functions"])
        assert sum(r[f"measured_{unit}"] for r in rows) <= report["kernels"]["total"] <= 1.02 * report[f"{unit}_max"]


def test_text_report_lists_kernels(files):
    require_target("avr")
    proc = run(files / "model.npz", "--target", "avr", "--data", files / "data.npz", "--rows", 20)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "cycles_mean" in out and "kernels (cycles per inference" in out
    block = out.split("kernels (cycles per inference", 1)[1].split("(outside kernels)")[0].splitlines()[1:]
    # each step in words (no IR value names), in the order the code runs them: the projection first
    lines = [re.split(r"\s{2,}", ln.strip()) for ln in block if ln.strip()]
    assert len(lines) >= 3 and all(int(ln[1].replace(",", "")) > 0 for ln in lines)
    assert not any("%" in ln[0] for ln in lines), block
    assert lines[0][0] == "matrix product, 64 inputs -> 6 outputs", block
    assert any(ln[0].startswith("distances to ") for ln in lines), block
    assert any(f.startswith("mac") for ln in lines for f in ln[2].split())  # a mat-vec kernel, measured


def test_cortex_m4_report_prints_model_cycles_beside_instructions(files):
    require_target("cortex-m4")
    text = run(files / "model.npz", "--target", "cortex-m4", "--data", files / "data.npz", "--rows", 4)
    assert text.returncode == 0, text.stderr
    line = next(ln for ln in text.stdout.splitlines() if ln.startswith("cycles (model)"))
    assert "TRM timings, 0 flash wait states" in line and "per instruction" in line
    proc = run(files / "model.npz", "--target", "cortex-m4", "--data", files / "data.npz", "--rows", 4, "--json",
               "--flash-wait-states", "3")
    report = json.loads(proc.stdout)
    model = report["cycle_model"]
    assert model["wait_states"] == 3 and model["rows"] == 4
    assert model["instructions_mean"] == report["instructions_mean"] < model["mean"]  # the same stream QEMU counted
    assert sum(model["per_function"].values()) == pytest.approx(model["mean"], rel=1e-6)


@pytest.mark.parametrize("states", ["-1", "x", "16"])
def test_bad_wait_states_are_one_line_exit_2(files, states):
    proc = run(files / "model.npz", "--data", files / "data.npz", "--flash-wait-states", states)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1 and "wait states" in proc.stderr


def test_bad_data_file_is_one_line_exit_2(files, tmp_path):
    np.savez(tmp_path / "wrong.npz", Z=np.zeros(3))
    for data in (tmp_path / "missing.npz", tmp_path / "wrong.npz"):
        proc = run(files / "model.npz", "--data", data)
        assert proc.returncode == 2
        assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
        assert str(data.name) in proc.stderr


def test_report_scores_string_labels_from_a_data_file(tmp_path):
    from sklearn.datasets import load_iris

    from tinycc_ml.models import ProtoNNClassifier

    X, y = load_iris(return_X_y=True)
    names = np.array(["setosa", "versicolor", "virginica"])[y]
    clf = ProtoNNClassifier(random_state=0).fit(X, names)
    clf.save(tmp_path / "m.npz")
    wrong = names.copy()
    wrong[:50] = "virginica"  # a third of the rows mislabelled: the accuracy must drop by that much
    np.savez(tmp_path / "data.npz", X_train=X, X_test=X, y_test=wrong)
    r = run(tmp_path / "m.npz", "--target", "host", "--data", tmp_path / "data.npz", "--precision", "float", "--json")
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    expected = float(np.mean(clf.predict(X) == wrong))
    assert report["float_accuracy"] == pytest.approx(expected) and expected < 0.7


def test_report_by_task_from_the_command_line(tmp_path):
    """Regression: R² and the value's error; multilabel (a 0/1 y_test matrix): precision@k."""
    from sklearn.datasets import load_diabetes, make_multilabel_classification

    from tinycc_ml.models.protonn_trainer import ProtoNNClassifier
    from tinycc_ml.models.regressors import BonsaiRegressor

    X, y = load_diabetes(return_X_y=True)
    BonsaiRegressor(budget_bytes=1024, epochs=5, random_state=0).fit(X[:300], y[:300]).save(tmp_path / "reg.npz")
    np.savez(tmp_path / "reg_data.npz", X_train=X[:300], X_test=X[300:], y_test=y[300:])
    r = run(tmp_path / "reg.npz", "--data", tmp_path / "reg_data.npz", "--json")
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["task"] == {"kind": "regression"} and report["float_accuracy"] is None
    assert report["regression"]["float_r2"] > 0.2 and abs(report["regression"]["target_r2"]
                                                          - report["regression"]["float_r2"]) < 0.02
    text = run(tmp_path / "reg.npz", "--data", tmp_path / "reg_data.npz")
    assert text.returncode == 0 and "regression.target_r2" in text.stdout and "max_abs_error" in text.stdout

    Xm, Y = make_multilabel_classification(n_samples=300, n_features=10, n_classes=6, random_state=0)
    ProtoNNClassifier(n_iter=5, multilabel_rule="top_k", multilabel_k=2, random_state=0).fit(
        Xm[:200], Y[:200]).save(tmp_path / "ml.npz")
    np.savez(tmp_path / "ml_data.npz", X_train=Xm[:200], X_test=Xm[200:], y_test=Y[200:])
    r = run(tmp_path / "ml.npz", "--data", tmp_path / "ml_data.npz", "--rows", 0)
    assert r.returncode == 0, r.stderr
    lines = dict(line.split(None, 1) for line in r.stdout.splitlines())
    assert lines["task"].startswith("kind multilabel") and float(lines["multilabel.float_precision_at_1"]) > 0.4
    assert "multilabel.ranking_agreement" in lines and "float_accuracy" not in lines


def test_report_of_a_tflite_file_compares_with_its_int8_network(tmp_path):
    """A .tflite int8 network has no float model and needs no calibration: the report compares with its
    interpreter (reference int8; no agreement_with_float), counts every layer's multiply-accumulates (KWS:
    2,656,768, not the fully connected layer's 768) and gives no warning of calibrating on the test rows; real-valued
    rows are quantised with the input tensor's scale and zero point, as the interpreter's predict does."""
    import os

    kws = os.path.join(os.path.dirname(__file__), "..", "data", "mlperf-tiny", "kws_ref_model.tflite")
    rows = np.random.default_rng(5).normal(size=(6, 490)) * 10
    np.savez(tmp_path / "rows.npz", X_test=rows, y_test=np.arange(6))
    proc = subprocess.run([sys.executable, "-m", "tinycc_ml", "report", kws, "--target", "host", "--data",
                           str(tmp_path / "rows.npz"), "--json"], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert proc.returncode == 0, proc.stderr
    assert "calibrat" not in proc.stderr
    report = json.loads(proc.stdout)
    assert report["macs"] == 2_656_768
    assert report["reference"] == "int8" and report["agreement_with_reference"] == 1.0
    assert report["agreement_with_float"] is None and report["float_accuracy"] is None
    assert report["calibration"] is None and report["reference_accuracy"] is not None


def test_cortex_m4_report_says_how_a_networks_weights_lie_in_flash(tmp_path):
    """One line names each layer's weight layout and why: int8 by default (optimize='size'), int16 with
    --optimize speed where a layer reads each weight more than once; the JSON holds it per layer."""
    import os

    from tests.tflite_builder import NetBuilder

    require_target("cortex-m4")
    n = NetBuilder(4)
    y = n.conv(n.input((6, 6, 4)), 8, (3, 3), activation="relu")
    (tmp_path / "net.tflite").write_bytes(n.finish(n.fc(n.flatten(n.depthwise(y, 1, (3, 3))), 3)))
    np.savez(tmp_path / "rows.npz", X_test=np.random.default_rng(1).normal(size=(2, 144)), y_test=np.arange(2))
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    args = [sys.executable, "-m", "tinycc_ml", "report", str(tmp_path / "net.tflite"), "--target", "cortex-m4",
            "--data", str(tmp_path / "rows.npz")]
    text = subprocess.run(args, capture_output=True, text=True, timeout=600, env=env)
    assert text.returncode == 0, text.stderr
    line = next(line for line in text.stdout.splitlines() if line.startswith("weights "))
    assert "int8 on 2 of 3 layers (optimize='size'" in line and "int8 on 1 of 3 layers (each weight read" in line
    proc = subprocess.run(args + ["--optimize", "speed", "--json"], capture_output=True, text=True, timeout=600,
                          env=env)
    assert proc.returncode == 0, proc.stderr
    weights = json.loads(proc.stdout)["weights"]
    # the convolutions widened, the fully connected layer of one row kept (it reads each weight once)
    assert weights["optimize"] == "speed" and sorted(weights["layers"].values()) == ["int16", "int16", "int8"]
    assert weights["layers"]["t10"] == "int8"  # the fully connected layer's output tensor
    bad = subprocess.run(args + ["--optimize", "fast"], capture_output=True, text=True, timeout=600, env=env)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr and "--optimize" in bad.stderr
