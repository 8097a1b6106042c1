"""Float builds answer no class for rows beyond the inputs they are proven to compute within float32 for
(issue 36): GaussianNB's squared distances and a polynomial kernel overflow float32 at features of 1e20 / 1e13
where scikit-learn's float64 does not; compiled with no calibration rows, such rows got another class than
scikit-learn's (256 and 191 of 300 rows near 1e30 on wine). Now the C returns -1 with NaN scores for them (on
every target, streaming included), the host predictor raises DataError naming the row, and every row within
the bound is scikit-learn's."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest
from sklearn.datasets import load_wine
from sklearn.linear_model import LogisticRegression
from sklearn.naive_bayes import GaussianNB
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC, LinearSVC

import tinycc_ml
from tests.conftest import require_target
from tinycc_ml.api import check_float_range
from tinycc_ml.codegen.backend import get_backend
from tinycc_ml.errors import CompileError, DataError
from tinycc_ml.runtime.simulate import run_on_target
from tinycc_ml.testing import STREAM_C, STREAM_H

ESTIMATORS = {
    "gaussian_nb": lambda: GaussianNB(),
    "cubic_svc": lambda: SVC(kernel="poly", degree=3),
    "logistic": lambda: make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000)),
    "linear_svc": lambda: LinearSVC(C=1e-4, max_iter=50_000),  # no scaler in front: its mat-vec streams
}


@pytest.fixture(scope="module")
def wine():
    return load_wine(return_X_y=True)


def hostile_rows(X: np.ndarray, bound: float, n: int = 60) -> np.ndarray:
    """Rows of X with one feature replaced: at, just beyond and far beyond the bound, NaN and infinities."""
    rng = np.random.default_rng(36)
    f32 = np.float32(bound)
    odd = [float(f32), -float(f32), float(np.nextafter(f32, np.float32(np.inf))), bound / 7, 1e30, -1e30, 3e38,
           np.inf, -np.inf, np.nan]
    rows = X[rng.integers(0, len(X), n)].copy()
    rows[np.arange(n), rng.integers(0, X.shape[1], n)] = np.resize(odd, n)
    return rows


def inside(rows: np.ndarray, bound: float) -> np.ndarray:
    with np.errstate(invalid="ignore", over="ignore"):
        return np.all(np.abs(rows.astype(np.float32)) <= np.float32(bound), axis=1)


@pytest.mark.parametrize("kind", ESTIMATORS)
def test_rows_beyond_the_bound_get_no_class_and_rows_within_it_get_scikit_learns(wine, kind):
    X, y = wine
    est = ESTIMATORS[kind]().fit(X, y)
    result = tinycc_ml.compile(est, precision="float", name="wb")  # no calibration rows: the case that was wrong
    bound = result.report["input_bound"]["bound"]
    rows = hostile_rows(X, bound)
    within = inside(rows, bound)
    assert 0 < within.sum() < len(rows)
    scores, predictions = result.load().run_raw(rows.astype(np.float32))
    assert np.all(predictions[~within] == -1) and np.all(np.isnan(scores[~within]))
    np.testing.assert_array_equal(predictions[within], est.predict(rows[within]))
    with pytest.raises(DataError, match=r"wb: row \d+, feature \d+ is .*beyond \+-"):
        result.load().predict(rows)


@pytest.mark.parametrize("kind", ["gaussian_nb", "cubic_svc"])
def test_the_bound_is_proven_and_a_step_wider_is_not(wine, kind):
    X, y = wine
    est = ESTIMATORS[kind]().fit(X, y)
    result = tinycc_ml.compile(est, precision="float")
    bound = result.report["input_bound"]["bound"]
    check_float_range(result.graph, -bound, bound, "the bound", kind)  # no value can leave float32 within it
    with pytest.raises(CompileError, match="beyond float32"):
        check_float_range(result.graph, -4 * bound, 4 * bound, "four times the bound", kind)


def test_trees_have_no_bound_and_integer_builds_none_either(wine):
    from sklearn.ensemble import RandomForestClassifier

    X, y = wine
    forest = RandomForestClassifier(5, random_state=0).fit(X, y)
    assert "input_bound" not in tinycc_ml.compile(forest, precision="float").report
    nb = GaussianNB().fit(X, y)
    int16 = tinycc_ml.compile(nb, precision="int16", calibration=X, name="nb16")
    assert "input_bound" not in int16.report and "nb16_beyond" not in int16.files["nb16.c"]


def test_the_label_of_a_row_with_no_class_is_no_label(wine):
    X, y = wine
    for classes in (y + 7, np.array(["a", "b", "c"])[y]):
        result = tinycc_ml.compile(GaussianNB().fit(X, classes), precision="float", name="lb")
        header, source = result.files["lb.h"], result.files["lb.c"]
        assert "#define LB_NO_LABEL" in header
        assert "return i < 0 ? LB_NO_LABEL : lb_label(i);" in source
    int_labels = tinycc_ml.compile(GaussianNB().fit(X, y + 7), precision="float", name="lb")
    assert "#define LB_NO_LABEL (-2147483647 - 1)" in int_labels.files["lb.h"]


@pytest.mark.parametrize("target", ["avr", "cortex-m0"])
@pytest.mark.parametrize("kind", ["gaussian_nb", "linear_svc"])
def test_microcontrollers_answer_no_class_beyond_the_bound_by_predict_and_by_streaming(wine, target, kind):
    require_target(target)
    X, y = wine
    est = ESTIMATORS[kind]().fit(X, y)
    backend = get_backend(target)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        result = tinycc_ml.compile(est, target=target, precision="float", name="mb", out_dir=out)
        bound = result.report["input_bound"]["bound"]
        rows = hostile_rows(X, bound, n=24).astype(np.float32)
        within = inside(rows, bound)
        runs = [backend.simulate(out, result.output, rows)]
        o = result.output
        streams = "mb_begin" in result.files["mb.h"]
        assert streams == (kind == "linear_svc")  # a mat-vec on the input streams: tested on the linear SVC
        if streams:
            fmt = dict(p=o.prefix, n=o.input_dim, in_t=o.input_ctype, s_t=o.score_ctype)
            (out / "stream.h").write_text(STREAM_H.format(**fmt))
            (out / "stream.c").write_text(STREAM_C.format(**fmt))
            runs.append(run_on_target(backend.simulator, [str(out / "mb.c"), str(out / "stream.c")],
                                      str(out / "stream.h"), "stream", rows, o.n_scores, o.input_ctype, o.score_ctype,
                                      extra_cflags=("-Werror",), chip=backend.chip))
    for run in runs:
        got = np.asarray(run.predictions)
        assert np.all(got[~within] == -1)
        assert np.all(np.isnan(np.asarray(run.scores)[~within]))
        np.testing.assert_array_equal(got[within], est.predict(rows[within]))


@pytest.mark.parametrize("k", [1, 3, 5])
def test_knn_distances_fused_with_the_vote_bound_the_input_as_stored_distances_do(wine, k):
    """kvote(sqdist) is fused into one op that never stores its distances: the bound was float32's largest for
    k > 1 (the vote's interval alone), so a row of 1e19 overflowed its float32 squared distances and the C
    answered class 0 where scikit-learn answers another. The fused op's distances now bound it as k = 1's do."""
    from sklearn.calibration import CalibratedClassifierCV
    from sklearn.neighbors import KNeighborsClassifier

    X, y = wine
    est = KNeighborsClassifier(n_neighbors=k).fit(X, y)
    result = tinycc_ml.compile(est, precision="float", name="kb")
    bound = result.report["input_bound"]["bound"]
    assert bound < 1e19  # sqrt(float32's largest / 13 features)
    check_float_range(result.graph, -bound, bound, "the bound", "knn")
    with pytest.raises(CompileError, match="beyond float32"):
        check_float_range(result.graph, -4 * bound, 4 * bound, "four times the bound", "knn")
    rows = X[:4].copy()
    rows[:, 0] = [1e19, -1e19, 3e19, 1e6]  # (scikit-learn's own distances lose all precision long before the bound)
    scores, predictions = result.load().run_raw(rows.astype(np.float32))
    assert list(predictions[:3]) == [-1] * 3 and np.all(np.isnan(scores[:3]))
    assert predictions[3] == est.predict(rows[3:])[0]
    calibrated = CalibratedClassifierCV(KNeighborsClassifier(n_neighbors=k), cv=2).fit(X, y)
    assert tinycc_ml.compile(calibrated, precision="float").report["input_bound"]["bound"] < 1e19
