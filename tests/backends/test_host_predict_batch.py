"""Host builds' batch entry point (tinycc_ml/host/batch.py: BLOCK_ROWS rows per pass over the weights)
against the single-row entry points of the same library: the same scores and predictions to the bit, for
every family at every precision (float builds too: the block keeps each sum's order), for batch sizes that
are and are not a multiple of the block."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tinycc_ml
from tinycc_ml.host.batch import BLOCK_ROWS, VEC
from tinycc_ml.host.build import NUMPY_OF_CTYPE
from tinycc_ml.testing import FAMILIES, random_inputs, random_model

pytestmark = pytest.mark.usefixtures("host_target")
SETTINGS = settings(max_examples=14, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def single_rows(pred, Xq: np.ndarray):
    """(scores, predictions) from <prefix>_scores and <prefix>_predict, one call per row."""
    lib, ffi = pred._lib, pred._ffi
    scores = np.zeros((len(Xq), pred.n_scores), dtype=NUMPY_OF_CTYPE[pred.score_ctype])
    preds = np.zeros(len(Xq), dtype=np.int32)
    x_t, s_t = f"{pred.input_ctype}[]", f"{pred.score_ctype}[]"
    for i, row in enumerate(Xq):
        getattr(lib, f"{pred.prefix}_scores")(ffi.from_buffer(x_t, row),
                                              ffi.from_buffer(s_t, scores[i], require_writable=True))
        preds[i] = getattr(lib, f"{pred.prefix}_predict")(ffi.from_buffer(x_t, row))
    return scores, preds


def check_batch(model, X: np.ndarray, precision: str, n: int) -> None:
    try:
        result = tinycc_ml.compile(model, target="host", precision=precision, name="hb",
                                   calibration=None if precision == "float" else X)
    except tinycc_ml.errors.TinyccError:  # a model this precision refuses: nothing to compare
        return
    assert "hb_predict_batch(" in result.files["hb.h"]
    pred = result.load()
    rows = np.resize(X, (n, X.shape[1]))  # n rows: more or fewer than X has
    if pred.input_ctype != "float" and pred.input_scale is None:
        return
    Xq = pred.quantise(rows)
    scores, preds = pred.run_raw(Xq)  # one call of <prefix>_predict_batch
    want_scores, want_preds = single_rows(pred, Xq)
    # bit-identical, float builds included (the same sums in the same order; NaN scores compared as bits)
    assert scores.tobytes() == want_scores.tobytes()
    np.testing.assert_array_equal(preds, want_preds)
    # the float-row entry point (rows converted in C, chunks through the batch entry point)
    if np.all(np.isfinite(rows)):
        np.testing.assert_array_equal(pred.predict_index(rows), want_preds)


@SETTINGS
@given(family=st.sampled_from(FAMILIES), precision=st.sampled_from(("float", "int16", "int8")),
       seed=st.integers(0, 2**32 - 1), n=st.integers(1, 3 * BLOCK_ROWS + 5))
def test_batch_equals_single_rows_random_families(family, precision, seed, n):
    rng = np.random.default_rng(seed)
    model = random_model(family, rng)
    X = np.clip(random_inputs(model, rng, 24), -1e30, 1e30).astype(np.float32).astype(np.float64)
    check_batch(model, X, precision, n)


@SETTINGS
@given(kind=st.sampled_from(("mlp", "forest", "protonn")), precision=st.sampled_from(("float", "int16")),
       width=st.integers(1, 4 * VEC + 7), seed=st.integers(0, 1000),
       n=st.integers(1, 4 * BLOCK_ROWS + 3))
def test_batch_equals_single_rows_wide_models(kind, precision, width, seed, n):
    """Layers wider than the float mat-vec's tile (full tiles and a remainder), deeper forests."""
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.neural_network import MLPClassifier

    from tinycc_ml.models.protonn import ProtoNNModel

    rng = np.random.default_rng(seed)
    D = int(rng.integers(2, 40))
    X = rng.normal(size=(120, D))
    y = (X[:, 0] + X[:, 1 % D] > 0).astype(int) + (X[:, -1] > 0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if kind == "mlp":
            model = MLPClassifier((width,), max_iter=20, random_state=seed).fit(X, y)
        elif kind == "forest":
            model = RandomForestClassifier(n_estimators=1 + width % 12, max_depth=1 + width % 9,
                                           random_state=seed).fit(X, y)
        else:
            m = 1 + width
            model = ProtoNNModel(rng.normal(size=(1 + width % 40, D)), rng.normal(size=(1 + width % 40, m)),
                                 rng.normal(size=(3, m)), 0.3)
    check_batch(model, X.astype(np.float32).astype(np.float64), precision, n)


def test_integer_distances_run_the_vector_block_kernel_and_equal_single_rows():
    """ProtoNN int16: the squared distances to its prototypes are the batch's int32 vector kernel (VEC prototypes
    of every block row at a time; 37 of them: whole vectors and a padded one)."""
    from tinycc_ml.models.protonn import ProtoNNModel

    rng = np.random.default_rng(5)
    model = ProtoNNModel(rng.normal(size=(6, 20)), rng.normal(size=(6, 37)), rng.normal(size=(4, 37)), 0.4)
    X = rng.normal(size=(90, 20))
    result = tinycc_ml.compile(model, target="host", precision="int16", name="hb", calibration=X)
    padded = -(-37 // VEC) * VEC
    assert re.search(rf"static int32_t hb_\w+_block_sums\[{BLOCK_ROWS}\]\[{padded}\];", result.files["hb.c"])
    check_batch(model, X, "int16", 3 * BLOCK_ROWS + 5)
