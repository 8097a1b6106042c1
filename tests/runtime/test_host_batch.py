"""The host build's one-call batch (rows quantised in C, then predicted) equals quantise() + the model per row."""

from __future__ import annotations

import numpy as np
import pytest

import tinycc_ml
from tinycc_ml.errors import DataError
from tinycc_ml.models.linear import LinearModel


@pytest.fixture(scope="module")
def model():
    rng = np.random.default_rng(0)
    return LinearModel(rng.normal(size=(5, 9)), rng.normal(size=5)), rng.normal(size=(300, 9)) * 3


@pytest.mark.parametrize("precision", ["float", "int16", "int8"])
def test_batch_quantises_as_quantise_does(model, precision):
    m, X = model
    pred = tinycc_ml.compile(m, target="host", precision=precision, calibration=X, name="hq").load()
    rows = np.concatenate([X, X * 1e6, -X * 1e6])  # far beyond the clamp: saturated on the way in
    if pred.input_scale is not None:  # exact halves of the input step: round half up, as quantise() does
        step = 2.0 ** -np.asarray(pred.input_scale, dtype=np.float64)
        rows[:50] = (np.round(X[:50] / step) + 0.5) * step
    want = pred._run(pred.quantise(rows), want_scores=False)[1]
    np.testing.assert_array_equal(pred.predict_index(rows), want)
    bad = rows[:20].copy()
    bad[3, 4] = np.nan  # a value that is not finite: the whole batch takes quantise()'s path
    if precision == "float":  # a float build answers no class for it: said, naming the row and feature
        with pytest.raises(DataError, match="row 3, feature 4 is nan"):
            pred.predict_index(bad)
        return
    with np.errstate(invalid="ignore"):  # quantise() casts the NaN as numpy does
        np.testing.assert_array_equal(pred.predict_index(bad), pred._run(pred.quantise(bad), want_scores=False)[1])


@pytest.mark.parametrize("dim, ctype", [(9, "int16_t"), (784, "int16_t"), (784, "float"), (10**6, "int8_t")])
def test_the_conversion_chunk_is_whole_blocks_within_its_buffer(dim, ctype):
    from tinycc_ml.host.batch import BLOCK_ROWS
    from tinycc_ml.host.build import CONVERT_BUFFER_BYTES, MAX_CONVERT_ROWS, NUMPY_OF_CTYPE, batch_chunk_rows

    rows = batch_chunk_rows(f"#define HQ_INPUT_DIM {dim}\n", "hq", ctype)
    assert rows % BLOCK_ROWS == 0 and BLOCK_ROWS <= rows <= MAX_CONVERT_ROWS
    assert rows == BLOCK_ROWS or rows * dim * NUMPY_OF_CTYPE[ctype]().itemsize <= CONVERT_BUFFER_BYTES
