"""scikit-learn's MLPClassifier / MLPRegressor as the mlp family: the compiled float predictions
equal scikit-learn's, integer builds lose at most 0.5 points (R² 0.01), the model file round-trips,
bad networks and files are refused by name. (Bit-exact runs on the simulated chips:
tests/backends/test_families_on_targets.py.)"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_diabetes, load_digits, load_wine
from sklearn.decomposition import PCA
from sklearn.metrics import r2_score
from sklearn.model_selection import train_test_split
from sklearn.neural_network import MLPClassifier, MLPRegressor
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_limits

import tinycc_ml
from tests.conftest import require_target
from tinycc_ml.api import as_model, load_model
from tinycc_ml.errors import CompileError, ModelFileError
from tinycc_ml.ir.interp import run_float
from tinycc_ml.models.mlp import MLPModel
from tinycc_ml.models.saved import save_model_file

DATA = {"wine": load_wine, "breast_cancer": load_breast_cancer, "digits": load_digits}


@pytest.fixture(scope="module", autouse=True)
def one_blas_thread():
    with threadpool_limits(limits=1):
        yield


def fit_quietly(est, X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ConvergenceWarning: a short fit is enough for these tests
        return est.fit(X, y)


@pytest.fixture(scope="module")
def split():
    def get(name):
        X, y = DATA[name](return_X_y=True)
        return train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)
    return get


@pytest.mark.parametrize("data, activation, hidden", [
    ("wine", "tanh", (16,)), ("breast_cancer", "logistic", (8,)), ("digits", "relu", (32,)),
    ("digits", "identity", (16,)),
])
def test_compiled_network_predicts_as_scikit_learn(split, data, activation, hidden):
    require_target("host")
    Xtr, Xte, ytr, yte = split(data)
    est = fit_quietly(make_pipeline(StandardScaler(), MLPClassifier(hidden, activation=activation, max_iter=200,
                                                                    random_state=0)), Xtr, ytr)
    want = est.predict(Xte)
    model = as_model(est)
    assert model.family == "mlp" and model.activation == activation
    np.testing.assert_array_equal(model.predict(Xte), want)
    np.testing.assert_allclose(model.predict_proba(Xte), est.predict_proba(Xte), atol=1e-9)
    compiled = tinycc_ml.compile(est, name="net").load().predict(Xte)
    assert np.mean(compiled == want) >= 0.999
    int16 = tinycc_ml.compile(est, precision="int16", calibration=Xtr, name="net")
    assert np.mean(int16.load().predict(Xte) == yte) >= np.mean(want == yte) - 0.005
    if activation in ("tanh", "logistic"):  # the table's error is stated in the report
        tables = [line for line in int16.report["passes"] if line.startswith("tanh_approx")]
        assert tables and all("max abs error" in line for line in tables)


def test_float_graph_equals_the_reference_and_the_file_round_trips(tmp_path, split):
    Xtr, Xte, ytr, _ = split("wine")
    est = fit_quietly(MLPClassifier((8, 6), activation="tanh", max_iter=50, random_state=0), Xtr / 100, ytr)
    model = as_model(est)
    out = run_float(model.lower(), Xte / 100)
    np.testing.assert_allclose(out["scores"], model.scores(Xte / 100), rtol=1e-5, atol=1e-5)
    loaded = load_model(model.save(tmp_path / "m.npz"))
    assert isinstance(loaded, MLPModel) and loaded.hidden_sizes == [8, 6] and list(loaded.classes) == [0, 1, 2]
    np.testing.assert_array_equal(loaded.scores(Xte), model.scores(Xte))


def test_binary_and_multilabel_networks():
    require_target("host")
    X, y = load_breast_cancer(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    binary = fit_quietly(MLPClassifier((8,), max_iter=100, random_state=0), X[:400], np.where(y[:400], "yes", "no"))
    np.testing.assert_array_equal(tinycc_ml.compile(binary).load().predict(X[400:]), binary.predict(X[400:]))
    Y = np.stack([y, X[:, 0] > 0, X[:, 1] > 0], axis=1).astype(int)
    multi = fit_quietly(MLPClassifier((8,), max_iter=100, random_state=0), X[:400], Y[:400])
    model = as_model(multi)
    assert model.task == {"kind": "multilabel", "rule": "threshold", "threshold": 0.0}
    np.testing.assert_array_equal(tinycc_ml.compile(multi).load().predict(X[400:]), multi.predict(X[400:]))


def test_regressor_keeps_r2():
    require_target("host")
    X, y = load_diabetes(return_X_y=True)
    net = MLPRegressor(hidden_layer_sizes=(16,), max_iter=300, learning_rate_init=0.01, random_state=0)
    est = fit_quietly(make_pipeline(StandardScaler(), PCA(8), net), X[:300], y[:300])
    want = est.predict(X[300:])
    float_c = tinycc_ml.compile(est, name="reg").load().predict(X[300:])
    np.testing.assert_allclose(float_c, want, rtol=1e-4, atol=1e-3)
    int16 = tinycc_ml.compile(est, precision="int16", calibration=X[:300], name="reg").load().predict(X[300:])
    assert abs(r2_score(y[300:], int16) - r2_score(y[300:], want)) <= 0.01


def _fitted_net():
    return fit_quietly(MLPClassifier((4,), max_iter=5, random_state=0), np.eye(6), [0, 1, 2, 0, 1, 2])


def _with(attr, value):
    est = _fitted_net()
    setattr(est, attr, value)
    return est


def _nan_weights():
    est = _fitted_net()
    est.coefs_[1][2, 1] = np.inf
    return est


@pytest.mark.parametrize("make, error, message", [
    (lambda: MLPClassifier(), CompileError, "MLPClassifier is not fitted"),
    (lambda: _with("activation", "softplus"), CompileError, "activation='softplus' is not supported"),
    (lambda: _with("out_activation_", "softsign"), CompileError, "output activation 'softsign' is not supported"),
    (_nan_weights, ModelFileError, "MLPClassifier: W1 holds a non-finite value"),
    (lambda: fit_quietly(MLPRegressor(hidden_layer_sizes=(3,), max_iter=5), np.eye(4), np.eye(4)), CompileError,
     "fitted on 4 targets"),
])
def test_bad_networks_are_refused(make, error, message, tmp_path):
    with pytest.raises(error, match=message):
        tinycc_ml.compile(make(), out_dir=tmp_path / "out")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("arrays, meta, message", [
    ({"W0": np.ones((2, 3)), "b0": np.ones(2)}, {"activation": "gelu", "output": "softmax"},
     "hidden activation 'gelu' is not supported"),
    ({"W0": np.ones((2, 3)), "b0": np.ones(2), "W1": np.ones((2, 4)), "b1": np.ones(2)},
     {"activation": "relu", "output": "softmax"}, "W1 has shape"),
    ({"W0": np.ones((2, 3))}, {"activation": "relu", "output": "softmax"}, r"missing array\(s\) \['b0'\]"),
    ({"W0": np.ones((2, 3)), "b0": np.ones(2), "V": np.ones(1)}, {"activation": "relu", "output": "softmax"},
     "unexpected array"),
    ({"W0": np.ones((2, 3)), "b0": np.ones(2)}, {"output": "softmax"}, "metadata 'activation'"),
    # layers mixing activations: one list of names per layer
    ({"W0": np.ones((2, 3)), "b0": np.ones(2)}, {"activation": "mixed", "output": "softmax"},
     "metadata 'activations' is None, expected a list"),
    ({"W0": np.ones((2, 3)), "b0": np.ones(2)}, {"activation": "mixed", "activations": [["relu"], []],
                                                 "output": "softmax"}, r"one entry per layer \(1\)"),
    ({"W0": np.ones((2, 3)), "b0": np.ones(2)}, {"activation": "mixed", "activations": [["relu", "swish"]],
                                                 "output": "softmax"}, r"activation 'swish' \(layer 0\) is not"),
    ({"W0": np.ones((2, 3)), "b0": np.ones(2)}, {"activation": "mixed", "activations": [{"a": 1}],
                                                 "output": "softmax"}, "activations of layer 0 are"),
])
def test_bad_model_files_are_refused(tmp_path, arrays, meta, message):
    path = save_model_file(tmp_path / "bad.npz", "mlp", arrays, meta)
    with pytest.raises(ModelFileError, match=message):
        load_model(path)
