"""ATmega328P asm kernels of kernels_avr on one-op graphs, bit-exact with the fixed-point interpreter
under simavr: exp_asm over the table shapes the exp pass can choose (index bits dropped or not, low
tables of 1 to 8 bits, high tables wider than a byte of offsets, clamps at 0 and elsewhere), and the
mat-vec's store epilogue at every output shift it shifts and saturates itself (8..16)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import require_target
from tinycc_ml.codegen.backend import get_backend
from tinycc_ml.ir.fixed import run_fixed
from tinycc_ml.ir.graph import Graph
from tinycc_ml.ir.types import IDX, TensorType, fixed
from tinycc_ml.passes.exp_table import _table, build_exp_lut
from tinycc_ml.runtime.simulate import run_on_target

N = 40  # elements per vector


def exp_attrs(lo_q: int, hi_q: int, s_in: int, drop: int, k: int, factor: float) -> dict:
    """exp_lut attributes with a given (drop, k), built as the exp pass builds its candidates."""
    span = (hi_q - lo_q + ((1 << (drop - 1)) if drop else 0)) >> drop
    n_hi, n_lo = (span >> k) + 1, min(1 << k, span + 1)
    t_hi, s_hi = _table(np.exp(factor * (lo_q * 2.0**-s_in + np.arange(n_hi) * 2.0 ** (k + drop - s_in))))
    t_lo, s_lo = _table(np.exp(factor * np.arange(n_lo) * 2.0 ** (drop - s_in)))
    return {"lo": lo_q * 2.0**-s_in, "hi": hi_q * 2.0**-s_in, "lo_q": lo_q, "hi_q": hi_q, "drop_bits": drop,
            "low_bits": k, "table_hi": t_hi, "table_lo": t_lo, "hi_scale": s_hi, "lo_scale": s_lo,
            **({"factor": factor} if factor != 1.0 else {})}


def one_op(op: str, inputs_of, attrs: dict, s_in: int, s_out: int, n_out: int = N) -> Graph:
    g = Graph("one")
    x = g.add("input", [], {"name": "x"}, type=TensorType((N,), fixed(16, s_in)), name="x")
    y = g.add(op, inputs_of(g, x), attrs, type=TensorType((n_out,), fixed(16, s_out)), name="y")
    g.set_output("scores", y)
    g.set_output("prediction", g.add("argmax", [y], type=TensorType((), IDX), name="pred"))
    return g


def run_exact(g: Graph, X: np.ndarray, tmp_path, must_contain: str) -> np.ndarray:
    out = get_backend("avr").emit(g, "ok", [])
    assert must_contain in out.files["ok.c"]  # the kernel under test is the one in use
    for name, text in out.files.items():
        (tmp_path / name).write_text(text)
    run = run_on_target("avr", [str(tmp_path / "ok.c")], str(tmp_path / "ok.h"), "ok", X, out.n_scores,
                        "int16_t", "int16_t", extra_cflags=("-Werror",))
    want = run_fixed(g, X)
    np.testing.assert_array_equal(run.scores, want["scores"])
    np.testing.assert_array_equal(run.predictions, want["prediction"])
    return want["scores"]


def inputs(rng, lo_q: int, hi_q: int) -> np.ndarray:
    X = rng.integers(-32768, 32768, size=(24, N))  # mostly beyond the interval: clamped
    X[:, : N // 2] = rng.integers(lo_q - 40, hi_q + 41, size=(24, N // 2))
    X[0, :4] = [lo_q, hi_q, lo_q - 1, hi_q + 1]
    return X.clip(-32768, 32767).astype(np.int16)


# (lo_q, hi_q, s_in, s_out, drop, k, factor): distances (lo_q = 0, factor < 0) and signed intervals
EXP_CASES = [
    (0, 7516, 10, 13, 7, 3, -1.0),  # SeeDot's USPS shape: 7 bits dropped, 3 low bits
    (0, 7516, 10, 13, 0, 6, -1.0),
    (0, 32767, 12, 14, 2, 6, -1.0),
    (0, 30000, 13, 14, 9, 1, -1.0),  # 9 bits dropped: index bytes by moves
    (0, 500, 6, 14, 0, 1, -1.0),  # a high table of 251 entries: offsets wider than a byte
    (-16381, -7, 11, 14, 1, 6, 1.0),
    (-24570, -2, 13, 14, 5, 5, 1.0),
    (-32768, 0, 12, 14, 3, 8, 1.0),  # 8 low bits: low-table offsets wider than a byte
    (-2000, -100, 9, 14, 4, 0, 1.0),  # no low table bits
]


@pytest.mark.parametrize("case", EXP_CASES, ids=[f"lo{c[0]}-hi{c[1]}-d{c[4]}-k{c[5]}" for c in EXP_CASES])
def test_exp_kernel_bit_exact(case, tmp_path):
    require_target("avr")
    lo_q, hi_q, s_in, s_out, drop, k, factor = case
    g = one_op("exp_lut", lambda g, x: [x], exp_attrs(lo_q, hi_q, s_in, drop, k, factor), s_in, s_out)
    run_exact(g, inputs(np.random.default_rng(abs(lo_q) + hi_q + drop), lo_q, hi_q), tmp_path, "ok_exp_y")


@pytest.mark.parametrize("s_out", [4, 6, 9, 21])
def test_exp_kernel_every_output_scale(s_out, tmp_path):
    # output scales whose product shift is past 16 or under 8 stay on the asm path (issue 21 item 5)
    require_target("avr")
    lo_q, hi_q, s_in, _, drop, k, factor = EXP_CASES[0]
    attrs = exp_attrs(lo_q, hi_q, s_in, drop, k, factor)
    if s_out == 21:  # a small table: its products fit 15 bits even after a shift under 8
        attrs = {**attrs, "table_hi": attrs["table_hi"] >> 6, "table_lo": attrs["table_lo"] >> 6}
    g = one_op("exp_lut", lambda g, x: [x], attrs, s_in, s_out)
    shift = attrs["hi_scale"] + attrs["lo_scale"] - s_out
    assert shift < 8 or shift > 16
    src = get_backend("avr").emit(g, "ok", []).files["ok.c"]
    assert "ok_exp_y(" in src and "__asm__" in src.split("ok_exp_y", 1)[1][:400]
    run_exact(g, inputs(np.random.default_rng(s_out), lo_q, hi_q), tmp_path, "ok_exp_y")


def test_exp_attrs_match_the_pass():
    # the helper builds what the pass would for the pair the pass chose
    attrs, _, _ = build_exp_lut(0, 7516, 10, 13, 16, factor=-1.0)
    mine = exp_attrs(0, 7516, 10, attrs["drop_bits"], attrs["low_bits"], -1.0)
    for key in ("table_hi", "table_lo", "hi_scale", "lo_scale"):
        np.testing.assert_array_equal(mine[key], attrs[key])


@pytest.mark.parametrize("shift", range(8, 17))
def test_matvec_store_epilogue_every_shift(shift, tmp_path):
    # acc = A x with |A x| up to 2^31 (x within +-1638: 40 products of 32767 x 1638 fit int32): every row
    # rounds, shifts by `shift` and saturates in the kernel
    require_target("avr")
    rng = np.random.default_rng(shift)
    A = rng.integers(-32768, 32768, size=(7, N))
    A[0] = 32767  # rows of one sign: saturate high and low on large inputs
    A[1] = -32768
    A[2] = rng.integers(-3, 4, size=N)  # small sums: every rounding case
    s_a, s_x = 6, 9
    g = one_op("matvec", lambda g, x: [g.add("const", [], {"value": A.astype(np.int16)},
                                             type=TensorType(A.shape, fixed(16, s_a)), name="A"), x],
               {}, s_x, s_a + s_x - shift, n_out=7)
    X = rng.integers(-1638, 1639, size=(24, N))
    X[:4] = rng.integers(-3, 4, size=(4, N))
    X[4] = 1638
    X[5] = -1638
    scores = run_exact(g, X.astype(np.int16), tmp_path, f"ok_mac5w16_{N}x1s{shift}")
    assert scores[4, 0] == 32767 and scores[4, 1] == -32768 or shift == 16  # saturated both ways
