"""Distance kernels with 8-bit prototypes (kernels_distance): the rounding to 8 significant bits, and
builds bit-exact with the fixed-point interpreter on the simulated chips, with inputs that may be
negative, prototypes small enough to need no scaling (k = 0) and large ones."""

from __future__ import annotations

import numpy as np
import pytest

import tinycc_ml
from tests.backends.graph_models import NearestMean
from tests.conftest import require_target
from tinycc_ml.codegen.matvec_plan import PROTO_BITS, split8
from tinycc_ml.ir.fixed import quantise, run_fixed, significant_bits
from tinycc_ml.runtime.simulate import run_on_target


def test_int8_prototypes_keep_eight_significant_bits():
    rng = np.random.default_rng(0)
    for top in (5, 127, 128, 1000, 32767):
        Mq = rng.integers(-top, top + 1, size=(40, 7))
        Mq[0, 0] = top
        r = significant_bits(Mq, PROTO_BITS)
        m8, k = split8(r)
        assert np.abs(m8).max() <= 127 and np.array_equal(m8 << k, r)
        assert np.abs(r).max() <= 32767
        step = max(1, 2 ** max(0, int(top).bit_length() - 7))
        assert np.abs(r - Mq).max() <= step  # rounding to the step (the largest values may saturate a step)
        if top <= 127:
            assert np.array_equal(r, Mq)  # already 8-bit: unchanged


def test_split8_refuses_what_has_no_8_bit_form():
    assert split8(np.array([[3, 129]])) is None
    m8, k = split8(np.array([[4, -8], [0, 12]]))
    assert k == 2 and m8.tolist() == [[1, -2], [0, 3]]
    m8, k = split8(np.zeros((2, 2), np.int64))
    assert k == 0 and not m8.any()


# (D, classes, signed inputs, prototype scale)
CASES = [(256, 20, False, 1.0), (37, 7, True, 1.0), (64, 3, True, 0.01), (16, 1, False, 3.0)]


@pytest.mark.parametrize("case", CASES, ids=[f"D{c[0]}-m{c[1]}-{'signed' if c[2] else 'pos'}" for c in CASES])
@pytest.mark.parametrize("target", ["avr", "cortex-m0"])
def test_distance_kernels_bit_exact(case, target, tmp_path):
    require_target(target)
    D, m, signed, scale = case
    rng = np.random.default_rng(D + m)
    X = rng.normal(size=(360, D)) if signed else rng.random((360, D))
    P = X[rng.choice(300, m)].T * scale
    X[320:] *= 5  # beyond the calibrated range: clamped
    for precision in ("int16", "int8"):
        out = tmp_path / f"{precision}"
        result = tinycc_ml.compile(NearestMean(P), target=target, precision=precision, calibration=X[:300],
                                   out_dir=out, name="nd")
        src = result.files["nd.c"]
        if precision == "int8":  # the 8-bit prototype kernel
            assert ("_i8_off[" if target == "avr" else "_i8_m0[") in src
        o = result.output
        Xq = quantise(X[300:], o.input_scale, 16).astype(np.int16)
        want = run_fixed(result.graph, Xq)
        run = run_on_target(target, [str(out / "nd.c")], str(out / "nd.h"), "nd", Xq, o.n_scores, o.input_ctype,
                            o.score_ctype, extra_cflags=("-Werror",))
        np.testing.assert_array_equal(run.scores, want["scores"])
        np.testing.assert_array_equal(run.predictions, want["prediction"])
