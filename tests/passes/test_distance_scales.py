"""Integer kNN on unnormalised features (breast_cancer: areas in the thousands beside values near
0.05), calibrated on its own reference set as users do: the int16 build must keep the float
model's decisions, and the code must stay bit-exact with the fixed-point interpreter."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer
from sklearn.model_selection import train_test_split

import tinycc_ml
from tests.backends.test_mcu import check_exact
from tests.conftest import require_target
from tinycc_ml.ir.fixed import quantise, run_fixed
from tinycc_ml.models.knn import KNNClassifier
from tinycc_ml.passes.fixed_pipeline import prepare_input, reference_rows
from tinycc_ml.passes.manager import PassContext, PassOptions

# one test row of 171 is 0.58 points: a build may lose at most one row's worth net, and may
# disagree with float on at most 1% of rows (near ties closer than a 16-bit distance step)
MAX_ACCURACY_LOSS = 1.0
MIN_AGREEMENT = 0.99


@pytest.fixture(scope="module")
def raw_breast_cancer():
    X, y = load_breast_cancer(return_X_y=True)
    return train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)


@pytest.mark.parametrize("k", [1, 3])
def test_int16_knn_on_raw_features_keeps_the_float_decisions(raw_breast_cancer, k, tmp_path):
    X_train, X_test, y_train, y_test = raw_breast_cancer
    clf = KNNClassifier(k=k).fit(X_train, y_train)
    want = clf.predict(X_test)
    result = tinycc_ml.compile(clf, precision="int16", calibration=X_train, name="bc", out_dir=tmp_path)
    got = result.load().predict(X_test)
    float_accuracy, int_accuracy = 100 * np.mean(want == y_test), 100 * np.mean(got == y_test)
    assert np.mean(got == want) >= MIN_AGREEMENT, f"agreement {np.mean(got == want):.4f}"
    assert int_accuracy >= float_accuracy - MAX_ACCURACY_LOSS, (int_accuracy, float_accuracy)
    # the host C is the interpreter's arithmetic
    Xq = quantise(X_test, result.output.input_scale, 16)
    np.testing.assert_array_equal(got, clf.classes_[run_fixed(result.graph, Xq)["prediction"]])


def test_reference_rows_are_the_calibration_rows_that_are_reference_points(raw_breast_cancer):
    X_train, _, y_train, _ = raw_breast_cancer
    model = KNNClassifier(k=1).fit(X_train[:50], y_train[:50]).to_model()
    ctx = PassContext(options=PassOptions.from_user("int16", {}))
    prep = prepare_input(model.lower(), X_train[:80], ctx)
    found = reference_rows(prep.graph, prep.calibration)
    assert found[:50].all() and not found[50:].any()
    nudged = prep.calibration[:50].copy()
    nudged[:, 0] += 1e-3 * (1 + np.abs(nudged[:, 0]))  # one feature off by a little: no longer a reference point
    assert not reference_rows(prep.graph, nudged).any()


@pytest.mark.parametrize("target", ["avr", "cortex-m0"])
def test_raw_feature_nearest_neighbour_bit_exact_on_the_simulated_target(raw_breast_cancer, target, tmp_path):
    require_target(target)
    X_train, X_test, y_train, _ = raw_breast_cancer
    refs = slice(0, 150)  # 150 x 30 int16 reference points fit 32 KB of flash
    clf = KNNClassifier(k=1).fit(X_train[refs], y_train[refs])
    result = tinycc_ml.compile(clf, target=target, precision="int16", calibration=X_train[refs], out_dir=tmp_path,
                               name="bc")
    check_exact(result, tmp_path, X_test[:100], target=target)
