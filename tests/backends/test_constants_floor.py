"""The early refusal of a model whose constants alone overflow the chip (before any calibration) uses a
true lower bound: on every family and precision the floor never exceeds what the emitted build stores,
and a model just over the chip's flash is refused at once with its sizes."""

import numpy as np
import pytest
from sklearn.datasets import load_digits
from sklearn.decomposition import PCA
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

import tinycc_ml
from tinycc_ml.api import as_model
from tinycc_ml.codegen.mcu import constant_bytes_floor
from tinycc_ml.errors import FitError
from tinycc_ml.models.knn import KNNClassifier
from tinycc_ml.models.protonn import ProtoNNModel
from tinycc_ml.passes import PassContext, run_passes
from tinycc_ml.passes.manager import PassOptions


@pytest.fixture(scope="module")
def models():
    X, y = load_digits(return_X_y=True)
    rng = np.random.default_rng(0)
    W = rng.normal(size=(10, 64)) * (rng.random((10, 64)) < 0.2)  # stored sparse
    return X[:200], {
        "protonn-sparse": ProtoNNModel(W, rng.normal(size=(10, 20)), rng.normal(size=(10, 20)), 0.3,
                                       X.mean(axis=0), X.std(axis=0) + 1.0),
        # PCA folds into the logistic weights: the folded matrix is smaller than the PCA one
        "pca-logistic": make_pipeline(StandardScaler(), PCA(30, random_state=0),
                                      LogisticRegression(max_iter=300)).fit(X[:500], y[:500]),
        # digits' pixels are integers 0-16: prototypes of 8 significant bits, stored in a byte at int16 too
        "knn-small-ints": KNNClassifier(k=3).fit(X[:80], y[:80]),
        "forest": RandomForestClassifier(n_estimators=4, max_depth=5, random_state=0).fit(X[:500], y[:500]),
    }


def folded(model, precision):
    graph = as_model(model).lower()
    options = PassOptions(precision=precision, fold_mean=precision != "float")
    return run_passes(graph, ["fold_input_affine", "constant_fold", "cse", "dce"], PassContext(options=options))


@pytest.mark.parametrize("precision", ["float", "int16", "int8"])
@pytest.mark.parametrize("family", ["protonn-sparse", "pca-logistic", "knn-small-ints", "forest"])
def test_the_floor_is_never_above_what_the_build_stores(models, family, precision):
    X, cases = models
    model = cases[family]
    result = tinycc_ml.compile(model, target="avr", precision=precision,
                               calibration=None if precision == "float" else X)
    floor = constant_bytes_floor(folded(model, precision), precision)
    # the AVR's forest in assembly holds its thresholds and leaf values in its instructions
    in_code = sum(k["flash_bytes"] for k in result.report["kernels"] if k.get("kernel") == "trees-asm")
    assert 0 < floor <= result.output.const_bytes + in_code


def test_a_model_over_the_flash_is_refused_before_calibration(monkeypatch):
    import tinycc_ml.api

    rng = np.random.default_rng(1)
    D, d = 600, 20
    model = ProtoNNModel(rng.normal(size=(d, D)), rng.normal(size=(d, 900)), rng.normal(size=(3, 900)), 0.1)
    calls = []
    monkeypatch.setattr(tinycc_ml.api, "check_calibration", lambda *a, **k: calls.append(1))
    with pytest.raises(FitError, match=r"does not fit the ATmega328P: its constants alone need at least (\d+) bytes"):
        tinycc_ml.compile(model, target="avr", precision="int16", calibration=np.zeros((64, D)))
    assert not calls  # the calibration rows were never looked at
    floor = constant_bytes_floor(folded(model, "int16"), "int16")
    assert floor == 2 * (d * D + 3 * 900) + d * 900 > 32768  # prototypes: a byte each (8-bit kernels)


def test_a_forest_over_the_flash_is_refused_before_calibration(monkeypatch):
    """A tree ensemble's decision nodes count in the floor (a threshold and a feature byte each): 300 trees
    are refused on the AVR before any calibration or scale search, at every precision."""
    import tinycc_ml.api

    X, y = load_digits(return_X_y=True)
    forest = RandomForestClassifier(n_estimators=300, max_depth=8, random_state=0).fit(X, y)
    calls = []
    monkeypatch.setattr(tinycc_ml.api, "check_calibration", lambda *a, **k: calls.append(1))
    for precision in ("int16", "int8", "float"):
        with pytest.raises(FitError, match="its constants alone need at least"):
            tinycc_ml.compile(forest, target="avr", precision=precision,
                              calibration=None if precision == "float" else X[:100])
    assert not calls
