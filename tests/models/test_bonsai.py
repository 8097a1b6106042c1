"""Bonsai: model container, EdgeML import, trainer (small data, a few seconds in all)."""

import logging
import pickle

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.datasets import load_breast_cancer, load_digits
from sklearn.exceptions import NotFittedError
from sklearn.model_selection import train_test_split

from tinycc_ml.errors import DataError, ModelFileError
from tinycc_ml.importers.edgeml import load_edgeml_bonsai, read_pickled_dict
from tinycc_ml.models.base import MODEL_FAMILIES
from tinycc_ml.models.bonsai import BonsaiModel, tree_sizes
from tinycc_ml.models.bonsai_trainer import BonsaiClassifier
from tinycc_ml.models.saved import read_model_file


def _split(loader):
    X, y = loader(return_X_y=True)
    return train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)


@pytest.fixture(scope="module")
def digits():
    return _split(load_digits)


@pytest.fixture(scope="module")
def cancer():
    return _split(load_breast_cancer)


@pytest.fixture(scope="module")
def digits_fit(digits):
    Xtr, Xte, ytr, yte = digits
    return BonsaiClassifier(random_state=0).fit(Xtr, ytr)


@pytest.fixture(scope="module")
def cancer_fit(cancer):
    Xtr, Xte, ytr, yte = cancer
    return BonsaiClassifier(budget_bytes=1024, random_state=0).fit(Xtr, ytr)


def walk(model: BonsaiModel, x):
    """Brute-force reference: one sample, plain loops, straight from the paper's definition."""
    xs = x if model.mean is None else (x - model.mean) / model.std
    xh = model.Z @ xs + model.z_bias
    L = model.n_scores
    y = np.zeros(L)
    k = 0
    for level in range(model.depth + 1):
        for c in range(L):
            w, v = model.W[k * L + c], model.V[k * L + c]
            y[c] += (w @ xh) * np.tanh(model.sigma * (v @ xh))
        if level < model.depth:
            k = 2 * k + 1 if model.T[k] @ xh > 0 else 2 * k + 2
    return y


def random_model(rng, D=7, d=4, L=3, depth=2, with_norm=True):
    n_nodes, n_int = tree_sizes(depth)
    return BonsaiModel(rng.normal(size=(d, D)), rng.normal(size=(n_nodes * L, d)),
                       rng.normal(size=(n_nodes * L, d)), rng.normal(size=(n_int, d)), 0.8, depth,
                       z_bias=rng.normal(size=d), mean=rng.normal(size=D) if with_norm else None,
                       std=rng.uniform(0.5, 2, D) if with_norm else None)


# --- trainer accuracy and consistency ---

def test_digits_accuracy_and_scores_match(digits, digits_fit):
    Xtr, Xte, ytr, yte = digits
    clf = digits_fit
    assert clf.score(Xte, yte) >= 0.93
    model = clf.to_model()
    assert model.n_outputs == 10 and model.input_dim == 64
    np.testing.assert_allclose(model.scores(Xte), clf.decision_function(Xte), rtol=1e-9, atol=1e-9)
    np.testing.assert_array_equal(model.predict(Xte), clf.predict(Xte))


def test_binary_budget_accuracy_and_sign_prediction(cancer, cancer_fit):
    Xtr, Xte, ytr, yte = cancer
    clf = cancer_fit
    assert clf.score(Xte, yte) >= 0.92
    assert clf.model_bytes <= 1024
    model = clf.to_model()
    assert model.binary and model.n_outputs == 1
    s = clf.decision_function(Xte)
    assert s.shape == (len(Xte),)
    np.testing.assert_allclose(model.scores(Xte)[:, 0], s, rtol=1e-9, atol=1e-9)
    np.testing.assert_array_equal(model.predict(Xte), (s > 0).astype(int))
    np.testing.assert_array_equal(clf.predict(Xte), model.predict(Xte))
    assert set(np.unique(model.predict(Xte))) <= {0, 1}


def test_hard_path_equals_brute_force_walk(digits, digits_fit, cancer, cancer_fit):
    for clf, X in ((digits_fit, digits[1][:60]), (cancer_fit, cancer[1][:60])):
        model = clf.to_model()
        ref = np.array([walk(model, x) for x in X])
        np.testing.assert_allclose(model.scores(X), ref, rtol=1e-9, atol=1e-9)
    rng = np.random.default_rng(1)
    model = random_model(rng)
    X = rng.normal(size=(40, 7))
    np.testing.assert_allclose(model.scores(X), np.array([walk(model, x) for x in X]), rtol=1e-12)
    assert set(model.leaves(X)) <= set(range(3, 7))  # leaves of a depth-2 tree


@pytest.mark.parametrize("budget, floor", [(1024, 0.6), (2048, 0.75), (6000, 0.9)])
def test_budget_respected(digits, budget, floor):
    Xtr, Xte, ytr, yte = digits
    clf = BonsaiClassifier(budget_bytes=budget, random_state=0).fit(Xtr, ytr)
    model = clf.to_model()
    assert model.storage_bytes() == clf.model_bytes <= budget
    assert model.mean is None  # standardisation folded into Z, z_bias (nothing else to store)
    if clf.plan_["nnz_z"] is not None:
        assert np.count_nonzero(model.Z) <= clf.plan_["nnz_z"]
    assert clf.score(Xte, yte) >= floor


def test_sparse_budget_accuracy(digits):
    Xtr, Xte, ytr, yte = digits
    clf = BonsaiClassifier(budget_bytes=4096, random_state=0).fit(Xtr, ytr)
    assert clf.model_bytes <= 4096
    assert np.count_nonzero(clf.to_model().Z) < clf.to_model().Z.size  # Z really is sparse
    assert clf.score(Xte, yte) >= 0.85


def test_gradients_match_finite_differences():
    rng = np.random.default_rng(0)
    for L, loss in ((1, "hinge"), (4, "crossentropy"), (4, "hinge")):
        clf = BonsaiClassifier(sigma=0.7)
        clf.n_outputs_, clf._loss, clf._tree = L, loss, tree_sizes(2)
        X, yi = rng.normal(size=(9, 6)), rng.integers(0, max(L, 2), 9)
        P = {"Z": rng.normal(size=(4, 6)), "b": rng.normal(size=4), "W": rng.normal(size=(7, L, 4)),
             "V": rng.normal(size=(7, L, 4)), "T": rng.normal(size=(3, 4))}
        y, cache = clf._forward(X, P, 0.8)
        grads = clf._backward(X, P, cache, clf._loss_grad(y, yi)[1], 0.8)
        for name in P:
            for idx in [(0,) * P[name].ndim, tuple(s - 1 for s in P[name].shape)]:
                plus = {k: v.copy() for k, v in P.items()}
                minus = {k: v.copy() for k, v in P.items()}
                plus[name][idx] += 1e-6
                minus[name][idx] -= 1e-6
                num = (clf._loss_grad(clf._forward(X, plus, 0.8)[0], yi)[0]
                       - clf._loss_grad(clf._forward(X, minus, 0.8)[0], yi)[0]) / 2e-6
                assert abs(num - grads[name][idx]) < 1e-6 * max(1.0, abs(num))


def test_sklearn_protocol(cancer):
    clf = BonsaiClassifier(depth=1, epochs=3, random_state=3)
    assert clf.get_params()["depth"] == 1
    clf.set_params(epochs=2)
    twin = clone(clf)
    assert twin.get_params() == clf.get_params()
    Xtr, Xte, ytr, yte = cancer
    a = twin.fit(Xtr, ytr).decision_function(Xte)
    b = clone(clf).fit(Xtr, ytr).decision_function(Xte)
    np.testing.assert_array_equal(a, b)  # random_state makes fits repeatable


# --- saving ---

def test_save_load_round_trip(tmp_path, digits, digits_fit):
    path = digits_fit.save(tmp_path / "bonsai.npz")
    family, arrays, meta = read_model_file(path)
    assert family == "bonsai" and MODEL_FAMILIES["bonsai"] is BonsaiModel
    back = BonsaiModel.from_arrays(arrays, meta, str(path))
    X = digits[1]
    np.testing.assert_array_equal(back.scores(X), digits_fit.to_model().scores(X))
    for name, value in back.arrays().items():
        assert value.dtype == np.float64, name


def test_from_arrays_validation_names_source():
    rng = np.random.default_rng(2)
    arrays = random_model(rng).arrays()
    meta = {"sigma": 1.0, "depth": 2}
    bad = dict(arrays, T=arrays["T"][:2])
    with pytest.raises(ModelFileError, match=r"m\.npz: T has shape \(2, 4\)"):
        BonsaiModel.from_arrays(bad, meta, "m.npz")
    bad = dict(arrays, W=np.where(arrays["W"] > 1, np.nan, arrays["W"]))
    with pytest.raises(ModelFileError, match=r"m\.npz: W holds a non-finite"):
        BonsaiModel.from_arrays(bad, meta, "m.npz")
    with pytest.raises(ModelFileError, match="depth"):
        BonsaiModel.from_arrays(arrays, {"sigma": 1.0}, "m.npz")
    with pytest.raises(ModelFileError, match="W has 20 rows"):
        BonsaiModel.from_arrays(dict(arrays, W=np.zeros((20, 4))), meta, "m.npz")


def test_folded_is_the_same_function():
    rng = np.random.default_rng(3)
    model = random_model(rng)
    X = rng.normal(size=(30, 7))
    folded = model.folded()
    assert folded.mean is None
    np.testing.assert_allclose(folded.scores(X), model.scores(X), rtol=1e-9, atol=1e-9)


# --- EdgeML import ---

def edgeml_reference(Z, W, V, T, mean, std, sigma, depth, L, x):
    """EdgeML's prediction, literally: x̂ = Z·(([x,1]-mean)/std)/d̂, then the hard path."""
    xh = Z @ ((np.append(x, 1.0) - mean) / std) / Z.shape[0]
    y = np.zeros(L)
    k = 0
    for level in range(depth + 1):
        y += (W[k * L:(k + 1) * L] @ xh) * np.tanh(sigma * (V[k * L:(k + 1) * L] @ xh))
        if level < depth:
            k = 2 * k + 1 if T[k] @ xh > 0 else 2 * k + 2
    return y


def write_edgeml(directory, rng, D=6, d=3, L=2, depth=2, sigma=1.5, hyper=True):
    n_nodes, n_int = tree_sizes(depth)
    parts = {"Z": rng.normal(size=(d, D + 1)), "W": rng.normal(size=(L * n_nodes, d)),
             "V": rng.normal(size=(L * n_nodes, d)), "T": rng.normal(size=(n_int, d)),
             "mean": np.append(rng.normal(size=D), 0.0), "std": np.append(rng.uniform(0.5, 2, D), 1.0)}
    directory.mkdir(exist_ok=True)
    for name, value in parts.items():
        np.save(directory / f"{name}.npy", value)
    if hyper:  # EdgeML's own way: np.save of a dict, i.e. a pickled 0-d object array
        hp = {"dataDim": D + 1, "projDim": np.int64(d), "numClasses": L, "depth": depth,
              "sigma": np.float64(sigma)}
        np.save(directory / "hyperParam.npy", hp, allow_pickle=True)
    return parts


@pytest.mark.parametrize("L", [1, 3])
def test_edgeml_import_matches_edgeml_formula(tmp_path, L):
    rng = np.random.default_rng(L)
    p = write_edgeml(tmp_path / "bonsai", rng, L=L)
    model = load_edgeml_bonsai(tmp_path / "bonsai")
    assert model.input_dim == 6 and model.n_outputs == L and model.depth == 2 and model.sigma == 1.5
    X = rng.normal(size=(50, 6))
    ref = np.array([edgeml_reference(p["Z"], p["W"], p["V"], p["T"], p["mean"], p["std"], 1.5, 2, L, x)
                    for x in X])
    np.testing.assert_allclose(model.scores(X), ref, rtol=1e-9, atol=1e-12)
    if L == 1:
        np.testing.assert_array_equal(model.predict(X), (ref[:, 0] > 0).astype(int))
    np.testing.assert_allclose(model.folded().scores(X), ref, rtol=1e-9, atol=1e-12)


def test_edgeml_hyperparams_argument_replaces_pickle(tmp_path):
    rng = np.random.default_rng(5)
    write_edgeml(tmp_path / "b", rng, hyper=False)
    with pytest.raises(ModelFileError, match=r"hyperParam\.npy: no such file"):
        load_edgeml_bonsai(tmp_path / "b")
    model = load_edgeml_bonsai(tmp_path / "b", {"projDim": 3, "numClasses": 2, "depth": 2, "sigma": 1.5})
    assert model.n_outputs == 2


def test_malicious_pickle_is_not_executed(tmp_path):
    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    rng = np.random.default_rng(6)
    write_edgeml(tmp_path / "b", rng, hyper=False)
    np.save(tmp_path / "b" / "hyperParam.npy", {"projDim": 3, "x": Evil()}, allow_pickle=True)
    with pytest.raises(ModelFileError, match=r"hyperParam\.npy: cannot be read safely: refused global"):
        load_edgeml_bonsai(tmp_path / "b")
    (tmp_path / "raw.pkl").write_bytes(pickle.dumps({"depth": Evil()}))
    with pytest.raises(ModelFileError, match="refused global"):
        read_pickled_dict(tmp_path / "raw.pkl")
    assert not marker.exists()
    (tmp_path / "ok.pkl").write_bytes(pickle.dumps({"depth": 2, "sigma": 1.0}))
    assert read_pickled_dict(tmp_path / "ok.pkl") == {"depth": 2, "sigma": 1.0}


def test_edgeml_bad_files(tmp_path):
    rng = np.random.default_rng(7)
    d = tmp_path / "b"
    p = write_edgeml(d, rng)
    (d / "V.npy").unlink()
    with pytest.raises(ModelFileError, match=r"V\.npy: no such file"):
        load_edgeml_bonsai(d)
    np.save(d / "V.npy", p["V"][:, :2])
    with pytest.raises(ModelFileError, match=r"V\.npy: V\.npy has shape \(14, 2\), expected \(14, 3\)"):
        load_edgeml_bonsai(d)
    np.save(d / "V.npy", p["V"])
    W = p["W"].copy()
    W[1, 1] = np.inf
    np.save(d / "W.npy", W)
    with pytest.raises(ModelFileError, match=r"W\.npy: W\.npy holds a non-finite value \(inf\)"):
        load_edgeml_bonsai(d)
    np.save(d / "W.npy", np.array([object()] * 3), allow_pickle=True)
    with pytest.raises(ModelFileError, match=r"W\.npy: holds an object"):
        load_edgeml_bonsai(d)
    np.save(d / "W.npy", p["W"])
    np.save(d / "hyperParam.npy", np.zeros(3))
    with pytest.raises(ModelFileError, match=r"hyperParam\.npy: holds a float64 array"):
        load_edgeml_bonsai(d)
    np.save(d / "hyperParam.npy", {"projDim": 3, "numClasses": 2, "depth": 2}, allow_pickle=True)
    with pytest.raises(ModelFileError, match="'sigma' is missing"):
        load_edgeml_bonsai(d)
    np.save(d / "hyperParam.npy", {"projDim": 3, "numClasses": 2, "depth": 2, "sigma": 1.0, "dataDim": 99},
            allow_pickle=True)
    with pytest.raises(ModelFileError, match="dataDim = 99"):
        load_edgeml_bonsai(d)
    with pytest.raises(ModelFileError, match="no such directory"):
        load_edgeml_bonsai(tmp_path / "nowhere")


# --- bad input ---

@pytest.mark.parametrize("y, message", [
    (np.where(np.arange(40) % 2, 0.5, 1.25), "Unknown label type: continuous"),
    (np.zeros(40, dtype=int), "single class"),
    (np.array(["a"] * 40), "single class"),
])
def test_bad_labels(y, message):
    X = np.random.default_rng(0).normal(size=(40, 5))
    with pytest.raises(DataError, match=message):
        BonsaiClassifier().fit(X, y)


def test_bad_X_and_budget():
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(40, 5)), np.arange(40) % 3
    Xn = X.copy()
    Xn[3, 2] = np.nan
    with pytest.raises(DataError, match="non-finite value .* row 3, column 2"):
        BonsaiClassifier().fit(Xn, y)
    with pytest.raises(DataError, match="budget_bytes=40 is too small"):
        BonsaiClassifier(budget_bytes=40).fit(X, y)
    with pytest.raises(DataError, match="inconsistent numbers of samples"):
        BonsaiClassifier().fit(X, y[:-1])
    with pytest.raises(NotFittedError):
        BonsaiClassifier().predict(X)
    clf = BonsaiClassifier(epochs=1).fit(X, y)
    with pytest.raises(DataError, match="X has 4 features, but BonsaiClassifier is expecting 5"):
        clf.predict(X[:, :4])


def test_verbose_progress_is_logged(cancer, caplog):
    Xtr, Xte, ytr, yte = cancer
    caplog.set_level(logging.INFO, logger="tinycc_ml")
    BonsaiClassifier(epochs=3, verbose=1, random_state=0).fit(Xtr, ytr)
    assert "epoch 3/3 (sparse-retrain)" in caplog.text and "BonsaiClassifier" in caplog.text
    caplog.clear()
    BonsaiClassifier(epochs=3, verbose=0, random_state=0).fit(Xtr, ytr)
    assert caplog.text == ""  # verbose=0 logs at DEBUG only


def test_edgeml_binary_saved_with_two_classes(tmp_path):
    rng = np.random.default_rng(8)
    write_edgeml(tmp_path / "b", rng, L=1, hyper=False)
    model = load_edgeml_bonsai(tmp_path / "b", {"projDim": 3, "numClasses": 2, "depth": 2, "sigma": 1.5})
    assert model.binary
