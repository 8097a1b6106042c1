"""Every model family the compiler has, trained, compiled at int16 and int8, and run on the
simulated ATmega328P, Cortex-M0 and Cortex-M4: predictions and scores equal the fixed-point interpreter on
64 inputs, batch and (where the graph allows it) streaming."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_digits
from sklearn.naive_bayes import GaussianNB
from sklearn.neural_network import MLPClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC

from tests.backends.test_mcu import build, check_exact
from tests.conftest import require_target
from tinycc_ml.codegen.mcu import stream_plan
from tinycc_ml.errors import CompileError
from tinycc_ml.models.bonsai_trainer import BonsaiClassifier
from tinycc_ml.models.knn import KNNClassifier
from tinycc_ml.models.npc import NearestPrototypeClassifier
from tinycc_ml.models.protonn_trainer import ProtoNNClassifier
from tinycc_ml.models.regressors import BonsaiRegressor, ProtoNNRegressor
from tinycc_ml.models.snc import SNCClassifier


class _SklearnModel:
    """A fitted scikit-learn estimator as the FAMILIES entries return them (``to_model()``)."""

    def __init__(self, estimator):
        self.estimator = estimator

    def to_model(self):
        from tinycc_ml.importers.sklearn import from_sklearn

        return from_sklearn(self.estimator)


def _sklearn(make):
    return lambda X, y: _SklearnModel(make().fit(X, y))


def _forest():
    from sklearn.ensemble import RandomForestClassifier

    return RandomForestClassifier(n_estimators=4, max_depth=6, random_state=0)  # the table walk


def _small_tree():
    from sklearn.tree import DecisionTreeClassifier

    return DecisionTreeClassifier(max_depth=3, random_state=0)  # straight-line code


def _boosting():
    from sklearn.ensemble import GradientBoostingClassifier

    return GradientBoostingClassifier(n_estimators=3, max_depth=3, random_state=0)

N_ROWS = 64


class _Fitted:
    """A fitted scikit-learn object, as FAMILIES' entries give them (``to_model()``)."""

    def __init__(self, estimator):
        self.estimator = estimator

    def to_model(self):
        from tinycc_ml.api import as_model

        return as_model(self.estimator)


def _sklearn(make):
    def fit(X, y):
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # convergence: a few iterations are enough here
            return _Fitted(make().fit(X, y))
    return fit


FAMILIES = {
    "protonn": lambda X, y: ProtoNNClassifier(budget_bytes=4096, n_iter=10, random_state=0, verbose=0).fit(X, y),
    "bonsai": lambda X, y: BonsaiClassifier(budget_bytes=4096, epochs=10, random_state=0).fit(X, y),
    "bonsai_binary": lambda X, y: BonsaiClassifier(budget_bytes=2048, epochs=10, random_state=0).fit(X, y >= 5),
    "npc": lambda X, y: NearestPrototypeClassifier(prototypes_per_class=2, n_restarts=1, max_stages=3,
                                                   random_state=0).fit(X, y),
    "snc": lambda X, y: SNCClassifier(compression=0.03, max_iter=5, random_state=0).fit(X, y),
    "knn3": lambda X, y: KNNClassifier(k=3).fit(X[:120], y[:120]),  # small enough for 32 KB of flash
    "forest": _sklearn(_forest),
    "tree": _sklearn(_small_tree),
    "boosting": _sklearn(_boosting),
    # regression (the digit's value as a number): the compiled value is the single score
    "protonn_regression": lambda X, y: ProtoNNRegressor(budget_bytes=4096, n_iter=10, random_state=0).fit(X, y * 1.5),
    "bonsai_regression": lambda X, y: BonsaiRegressor(budget_bytes=4096, epochs=10, reg_z=1e-2, reg_tree=1e-2,
                                                      random_state=0).fit(X, y * 1.5),
    # scikit-learn's networks: 8-bit or 16-bit weights with 16-bit activations on the mat-vec kernels
    "mlp_relu": _sklearn(lambda: MLPClassifier((16,), max_iter=60, random_state=0)),
    # three classes: one distance chain per class (a quick scale search); default var_smoothing: pixels
    # constant within a class, handled apart (segment_min, sub, scale)
    "gaussian_nb": lambda X, y: _sklearn(GaussianNB)(X[y < 3], y[y < 3]),
    # support vectors of 80 rows: quick, and small enough for 32 KB of flash
    "svc_rbf": lambda X, y: _sklearn(lambda: make_pipeline(StandardScaler(), SVC()))(X[:80], y[:80]),
}


@pytest.fixture(scope="module")
def digits():
    X, y = load_digits(return_X_y=True)
    rows = X[600:600 + N_ROWS].copy()
    rows[::4, ::3] = np.nan  # missing values: the quantiser's missing code reaches every family's C
    return X[:600], y[:600], rows


@pytest.fixture(scope="module", params=sorted(FAMILIES))
def model(request, digits):
    X, y, _ = digits
    return request.param, FAMILIES[request.param](X, y).to_model()


# the Cortex-M4 at int16 for the families on its own kernels (SMLAD mat-vecs, distances); the others run the
# Cortex-M0's C there (its int8 kernels: test_mcu's SPECS; every family's random models at every precision:
# the conformance suite on the Cortex-M33, which runs the same code: tests/backends/test_m4.py)
M4_FAMILIES = {"protonn", "bonsai", "npc", "snc", "knn3", "mlp_relu", "gaussian_nb", "svc_rbf"}


@pytest.mark.parametrize("target, precision", [("avr", "int16"), ("avr", "int8"), ("cortex-m0", "int16"),
                                               ("cortex-m0", "int8")])
def test_bit_exact_on_the_simulated_target(model, digits, target, precision, tmp_path):
    check_family_on(target, precision, model, digits, tmp_path)


@pytest.mark.parametrize("model", sorted(M4_FAMILIES), indirect=True)
def test_bit_exact_on_the_cortex_m4(model, digits, tmp_path):
    check_family_on("cortex-m4", "int16", model, digits, tmp_path)


def check_family_on(target, precision, model, digits, tmp_path):
    require_target(target)
    name, m = model
    X, _, rows = digits
    result, out = build(m, precision, X, tmp_path, name=name, target=target)
    run = check_exact(result, out, rows, target=target)
    assert run.stack_bytes > 0 and (run.cycles if target == "avr" else run.instructions).min() > 0
    try:
        stream_plan(result.graph)
    except CompileError:
        return  # this graph has no streaming entry point (the header says why)
    check_exact(result, out, rows, target=target, stream=True)
