"""Bonsai through the compiler: the tree walk in C matches the model (float) and the fixed-point
interpreter (integer), binary and multiclass, and EdgeML directories compile from the CLI."""

import subprocess
import sys

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_digits

import tinycc_ml
from tinycc_ml.ir.fixed import quantise, run_fixed
from tinycc_ml.ir.interp import run_float
from tinycc_ml.ir.text import parse_graph, print_graph
from tinycc_ml.models.bonsai import BonsaiModel
from tinycc_ml.models.bonsai_trainer import BonsaiClassifier
from tinycc_ml.target_report import count_macs


@pytest.fixture(scope="module", params=["digits", "breast_cancer"])
def trained(request):
    X, y = (load_digits if request.param == "digits" else load_breast_cancer)(return_X_y=True)
    n = int(0.7 * len(X))
    clf = BonsaiClassifier(random_state=0, epochs=20).fit(X[:n], y[:n])
    return clf.to_model(), X[:n], X[n:], y[n:]


def random_bonsai(rng, D=7, d=4, L=3, depth=2):
    n_nodes, n_int = 2 ** (depth + 1) - 1, 2**depth - 1
    return BonsaiModel(rng.normal(size=(d, D)), rng.normal(size=(n_nodes * L, d)), rng.normal(size=(n_nodes * L, d)),
                       rng.normal(size=(n_int, d)), 0.7, depth, z_bias=rng.normal(size=d),
                       mean=rng.normal(size=D), std=rng.uniform(0.5, 2, D))


@pytest.mark.parametrize("depth,L", [(0, 2), (1, 1), (3, 4)])
def test_ir_walk_equals_the_numpy_model(depth, L):
    rng = np.random.default_rng(depth)
    model = random_bonsai(rng, L=L, depth=depth)
    X = rng.normal(size=(200, 7))
    out = run_float(model.lower(), X)
    np.testing.assert_allclose(out["scores"], model.scores(X), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(out["prediction"], model.predict(X))


@pytest.mark.parametrize("depth,L", [(0, 2), (2, 3)])
def test_a_projection_that_does_not_reduce_the_dimension_is_folded_into_the_nodes(depth, L):
    """d̂ >= D (or few node rows): W Z, V Z and T Z read the raw input (mean/std folded too), x̂'s bias becomes
    each node row's bias; same function, fewer multiply-accumulates, the IR text keeps the biases."""

    rng = np.random.default_rng(5 + depth)
    folded, kept = random_bonsai(rng, D=4, d=6, L=L, depth=depth), random_bonsai(rng, D=7, d=4, L=3, depth=2)
    X = rng.normal(size=(300, 4))
    g = folded.lower()
    assert "matvec" not in [n.op for n in g.nodes()]
    assert all("bias" in n.attrs for n in g.nodes() if n.op == "matvec_at")
    out = run_float(g, X)
    np.testing.assert_allclose(out["scores"], folded.scores(X), rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(out["prediction"], folded.predict(X))
    again = parse_graph(print_graph(g))
    np.testing.assert_array_equal(run_float(again, X)["scores"], out["scores"])
    unfolded_macs = 6 * 4 + (2 * L * (depth + 1) + depth) * 6
    assert count_macs(g) == (2 * L * (depth + 1) + depth) * 4 < unfolded_macs
    # int16: each feature's scale absorbed once by every node stack reading it (W and V serve every level)
    res = tinycc_ml.compile(folded, precision="int16", calibration=X, name="fold")
    fixed_pred = run_fixed(res.graph, quantise(X, res.output.input_scale, 16).astype(np.int16))["prediction"]
    assert np.mean(fixed_pred == folded.predict(X)) >= 0.98
    # 20 node rows of 4 values each after a 4x7 Z: folding would take 20 x 7 = 140 MACs instead of 108
    assert kept.projection_folded() is None and "matvec" in [n.op for n in kept.lower().nodes()]


def test_only_the_path_is_evaluated():
    model = random_bonsai(np.random.default_rng(0), depth=3)
    ops = [n.op for n in model.lower().nodes()]
    # one W, V product per level and one theta per internal level: 4 + 4 + 3, not 15 + 15 + 7
    assert ops.count("matvec_at") == 11 and ops.count("branch") == 3


def test_host_float_matches_the_model(trained):
    model, _, X_test, _ = trained
    predictor = tinycc_ml.compile(model).load()
    ref = model.scores(X_test)
    np.testing.assert_allclose(predictor.scores(X_test), ref, rtol=1e-5, atol=1e-5 * np.abs(ref).max())
    np.testing.assert_array_equal(predictor.predict(X_test), model.predict(X_test))


@pytest.mark.parametrize("precision,max_loss", [("int16", 0.5), ("int8", 1.5)])
def test_host_fixed_is_bit_exact_and_accurate(trained, precision, max_loss):
    model, X_cal, X_test, y_test = trained
    result = tinycc_ml.compile(model, precision=precision, calibration=X_cal)
    predictor = result.load()
    Xq = quantise(X_test, result.output.input_scale, 16)
    expected = run_fixed(result.graph, Xq)
    scores, predictions = predictor.run_raw(Xq)
    np.testing.assert_array_equal(scores, expected["scores"])
    np.testing.assert_array_equal(predictions, expected["prediction"])
    loss = 100 * (np.mean(model.predict(X_test) == y_test) - np.mean(predictions == y_test))
    assert loss <= max_loss


def test_edgeml_directory_compiles_from_the_cli(tmp_path):
    rng = np.random.default_rng(5)
    D, d, L, depth = 6, 3, 2, 1
    n_nodes, n_int = 3, 1
    directory = tmp_path / "bonsai_dir"
    directory.mkdir()
    arrays = {"W": rng.normal(size=(n_nodes * L, d)), "V": rng.normal(size=(n_nodes * L, d)),
              "T": rng.normal(size=(n_int, d)), "Z": rng.normal(size=(d, D + 1)),
              "mean": np.append(rng.normal(size=D), 0.0), "std": np.append(rng.uniform(0.5, 2, D), 1.0)}
    for name, value in arrays.items():
        np.save(directory / f"{name}.npy", value)
    np.save(directory / "hyperParam.npy", {"dataDim": D + 1, "projDim": d, "numClasses": L, "depth": depth,
                                           "sigma": 1.0}, allow_pickle=True)
    model = tinycc_ml.load_model(directory)
    out = tmp_path / "c"
    proc = subprocess.run([sys.executable, "-m", "tinycc_ml", "compile", str(directory), "-o", str(out),
                           "--name", "tree"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    subprocess.run(["gcc", "-std=c99", "-Wall", "-Wextra", "-Werror", "-c", str(out / "tree.c"), "-o",
                    str(tmp_path / "tree.o")], check=True)
    X = rng.normal(size=(100, D))
    predictor = tinycc_ml.compile(model).load()
    np.testing.assert_array_equal(predictor.predict(X), model.predict(X))
