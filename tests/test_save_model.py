"""tinycc_ml.save_model turns anything compile accepts into a .npz model file the command line
takes; the command line refuses pickles by name, without opening them."""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import pytest
from sklearn.datasets import load_wine
from sklearn.decomposition import PCA
from sklearn.ensemble import AdaBoostClassifier
from sklearn.neural_network import MLPClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

import tinycc_ml
from tests.conftest import require_target
from tinycc_ml import cli
from tinycc_ml.errors import CompileError, ModelFileError
from tinycc_ml.models.linear import LinearModel


class _Planted:
    """Unpickling this writes a file: proof that a pickle was (not) opened."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


@pytest.fixture(scope="module")
def wine_pipeline():
    X, y = load_wine(return_X_y=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = make_pipeline(StandardScaler(), PCA(8), MLPClassifier((8,), max_iter=100, random_state=0)).fit(X, y)
    return est, X


def test_saved_estimator_compiles_from_the_command_line(wine_pipeline, tmp_path, capsys):
    require_target("host")
    est, X = wine_pipeline
    path = tinycc_ml.save_model(est, tmp_path / "wine.npz")
    assert path == tmp_path / "wine.npz"
    model = tinycc_ml.load_model(path)
    assert model.family == "mlp"
    np.testing.assert_array_equal(model.predict(X), est.predict(X))
    assert cli.main(["compile", str(path), "-o", str(tmp_path / "out"), "--name", "wine"]) == 0
    assert (tmp_path / "out" / "wine.c").read_text() == tinycc_ml.compile(est, name="wine").files["wine.c"]
    assert np.mean(tinycc_ml.compile(path).load().predict(X) == est.predict(X)) >= 0.999


@pytest.mark.parametrize("suffix", [".pkl", ".joblib", ".pickle"])
def test_pickles_are_refused_unopened(tmp_path, capsys, suffix):
    marker = tmp_path / "unpickled"
    path = tmp_path / f"model{suffix}"
    path.write_bytes(pickle.dumps(_Planted(marker)))
    assert cli.main(["compile", str(path), "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "save_model" in err and str(path) in err
    assert not marker.exists() and not (tmp_path / "out").exists()
    with pytest.raises(ModelFileError, match="pickled objects are not read"):
        tinycc_ml.load_model(path)


def test_save_model_refuses_what_compile_refuses(tmp_path):
    with pytest.raises(CompileError, match="cannot compile a AdaBoostClassifier"):
        tinycc_ml.save_model(AdaBoostClassifier(n_estimators=2).fit([[0], [1]], [0, 1]), tmp_path / "t.npz")
    with pytest.raises(CompileError, match="MLPClassifier is not fitted"):
        tinycc_ml.save_model(MLPClassifier(), tmp_path / "t.npz")
    with pytest.raises(ModelFileError, match="model files end in .npz"):
        tinycc_ml.save_model(LinearModel(np.eye(2)), tmp_path / "t.pkl")
    assert list(tmp_path.iterdir()) == []
