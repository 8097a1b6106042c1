"""Bonsai's node computations on the simulated chips, bit-exact with the fixed-point interpreter: the tanh
computed in its product's loop (W z * tanh(sigma V z)) with the path score's sum, sigma's scale as a shift
(an identity one has no loop) or a product, the node mat-vecs' input prepared once for every matvec_at
reading it (AVR: its sum, Cortex-M0: x + 2^15 and its sum), the Cortex-M0's inlined saturation and its node
kernels storing int16. One simulator run per build, batch and streaming, on 48 rows."""

from __future__ import annotations

import re

import numpy as np
import pytest

from tests.backends.test_mcu import build, check_exact
from tests.conftest import require_target
from tinycc_ml.codegen.c_fixed import add_of_mul, identity_scale, tanh_of_mul
from tinycc_ml.codegen.emitter import CEmitter, CTarget
from tinycc_ml.models.bonsai import BonsaiModel


def bonsai(sigma: float, D: int = 12) -> BonsaiModel:
    """d̂ = 6: with D = 12 the nodes read Z x; with D <= 6 the lowering folds Z into the nodes (their rows then
    carry z_bias's image as a bias: matvec_at's bias, in the kernels' row constants)."""
    rng = np.random.default_rng(3)
    d, L, depth = 6, 5, 2  # 5 rows per node: the Cortex-M0's kernel takes W and V (4 rows or more)
    nodes = 2 ** (depth + 1) - 1
    return BonsaiModel(rng.normal(size=(d, D)) / 3, rng.normal(size=(nodes * L, d)), rng.normal(size=(nodes * L, d)),
                       rng.normal(size=(2 ** depth - 1, d)), sigma, depth, z_bias=rng.normal(size=d) / 2)


@pytest.fixture(scope="module")
def rows():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(448, 12))
    X[-48:-40] *= 8  # beyond the calibration range: tanh's clamp and saturated node scores
    return X[:400], X[400:]


# sigma 1: an identity scale (no loop) where the search gives V z and sigma V z one scale; 4: a shift; 0.7: a product
# D = 5: Z folded into the nodes (biased node rows)
CASES = [("avr", "int16", 1.0, 12), ("avr", "int8", 4.0, 12), ("cortex-m0", "int16", 0.7, 12),
         ("cortex-m0", "int8", 1.0, 12), ("avr", "int16", 0.7, 5), ("cortex-m0", "int8", 4.0, 5)]


@pytest.mark.parametrize("target, precision, sigma, D", CASES)
def test_bonsai_nodes_bit_exact(target, precision, sigma, D, rows, tmp_path):
    require_target(target)
    X, test = rows
    model = bonsai(sigma, D)
    X, test = X[:, :D], test[:, :D]
    result, out = build(model, precision, X, tmp_path, name="bk", target=target)
    src = result.files["bk.c"]
    g = result.graph
    at = [g.node(n) for n in g.order() if g.op(n) == "matvec_at"]
    assert all(("bias_q" in n.attrs) == (D < 6) for n in at) and ("matvec" in map(g.op, g.order())) == (D == 12)
    muls = [n for n in g.order() if g.op(n) == "mul"]
    assert len(muls) == 3  # one node per level on the path
    em = CEmitter(g, "bk", CTarget())
    # fused unless the plan gave the product a slot overlapping the tanh's input at another offset
    fused = sum(tanh_of_mul(em, g.node(n)) is not None for n in muls)
    assert fused >= 2 and src.count("(tanh and product fused)") == fused and src.count(" th = ") == fused
    assert len(re.findall(r"v_t\d+\[i\] =", src)) == 3 - fused  # a fused tanh is never stored
    # the path score's sum in the same loop (levels 1 and 2 add to the previous levels' sum)
    sums = sum(add_of_mul(em, g.node(n)) is not None for n in muls)
    assert sums >= 1 and src.count("(tanh, product and sum fused)") == sums
    # the sum of z (AVR) or z + 2^15 (M0) taken by the first node mat-vec only, the others read it back
    # (AVR: shifted once for the kernels); a folded model's input clamp stores x + 2^15 and its sum itself
    folded_m0 = target == "cortex-m0" and D < 6
    assert len(re.findall(r"bk_sum_at_\w+\[0\] = sx\b", src)) == (0 if folded_m0 else 1)
    assert len(re.findall(r"(sx|v) = bk_sum_(at_)?v_\w+\[0\];", src)) >= (6 if target == "avr" else 5)
    if D < 6:
        assert "sx += (uint16_t)" not in src and "bk_xo_" not in src  # no pass over x in the nodes
    identity = [identity_scale(em, g.node(n)) for n in g.order() if g.op(n) == "scale"]
    assert src.count("chain leaves its values as they are: no loop") == sum(identity)
    if sigma == 0.7:
        assert not any(identity)
    if target == "cortex-m0":
        assert "static inline __attribute__((always_inline)) int16_t bk_sat16" in src
        assert re.search(rf"bk_mac\d+w(8|16)_{min(D, 6)}s\d+r?(p\d+|l\d+)?\(\(const", src)  # storing int16 itself
    check_exact(result, out, test, target=target)
    if precision == "int16" and D == 12:  # a folded model has no Z x to stream (it reads x whole, D <= d̂)
        check_exact(result, out, test, target=target, stream=True)


def tanh_attrs(s_in: int, drop: int) -> dict:
    """tanh_lut attributes with a given drop, as passes/tanh_approx builds its candidates."""
    top = min(int(np.ceil(4.0 * 2.0**s_in)), 2**15 - 1)
    n = (top >> drop) + 2
    table = np.floor(np.tanh(np.arange(n) * 2.0 ** (drop - s_in)) * 2.0**14 + 0.5)
    return {"drop_bits": drop, "in_max_q": top, "table": table.astype(np.int16), "table_scale": 14}


# (s_in, drop, what the AVR's 16-bit form uses): the index and fraction from q 2^(8-drop) (a byte move), the
# shift past 8 bits as a byte move and a 16-bit shift, drop < 8 where q 2^(8-drop) would not fit 16 bits, and
# no bit dropped (no interpolation): every table the tanh pass can choose
TANH_CASES = [(9, 6, "qq"), (11, 8, "qq"), (8, 3, "qq"), (13, 10, ">> 8) >> 2"), (13, 6, ") >> 6)"),
              (5, 0, "const int16_t y = (int16_t)pgm_read_word(&ok_y_tanh[q]);")]


@pytest.mark.parametrize("s_in, drop, marker", TANH_CASES)
def test_avr_tanh_interpolation_bit_exact(s_in, drop, marker, tmp_path):
    from tests.backends.test_avr_kernels import one_op, run_exact

    require_target("avr")
    rng = np.random.default_rng(drop)
    X = rng.integers(-32768, 32768, size=(16, 40))
    top = min(2 ** (s_in + 2), 32767)
    X[:, :30] = rng.integers(-top - 300, top + 300, size=(16, 30))  # mostly within the table's range
    X[0, :6] = [0, top, -top, top - 1, 1 - top, -32768]
    g = one_op("tanh_lut", lambda g, x: [x], tanh_attrs(s_in, drop), s_in, 14)
    run_exact(g, X.clip(-32768, 32767).astype(np.int16), tmp_path, marker)


def test_m0_similarities_feed_the_kernel(tmp_path):
    """ProtoNN on the Cortex-M0: the exp similarities store x + 2^15 and their sum for Z's kernel (no input
    pass over them before it), bit-exact at both precisions' scales."""
    from tinycc_ml.models.protonn import ProtoNNModel

    require_target("cortex-m0")
    rng = np.random.default_rng(5)
    model = ProtoNNModel(rng.normal(size=(6, 12)) / 3, rng.normal(size=(6, 14)), rng.normal(size=(4, 14)), 0.4)
    X = rng.normal(size=(448, 12))
    for precision in ("int16", "int8"):
        result, out = build(model, precision, X[:400], tmp_path, name="pe", target="cortex-m0")
        src = result.files["pe.c"]
        sim = [n for n in result.graph.order() if result.graph.op(n) == "exp_lut"]
        assert len(sim) == 1 and f"pe_sum_v_{sim[0]}[0] = sx;" in src and "pe_xo_v_" + sim[0] not in src
        check_exact(result, out, X[400:], target="cortex-m0")


# (shift, rows, weights' magnitude): two passes (6 and 5 rows), three (7, 6, 6: two of the tail's size); with
# small weights the rounding constant joins the sum ("r"), with large ones the stores add it; int8 weights (wmax
# 128: blocks of 42 bytes, padded to words in flash); no shift: the kernel's uint32 sums, stored by C
M0_CASES = [(1, 11, 8192), (14, 11, 8192), (5, 19, 8192), (9, 19, 32768), (5, 19, 128), (0, 19, 8192)]


@pytest.mark.parametrize("shift, rows, wmax", M0_CASES)
def test_m0_node_kernel_stores_saturated_int16(shift, rows, wmax, tmp_path):
    """The Cortex-M0's node kernel shifting, rounding and saturating its int16 outputs itself (a runtime node
    index; sums past int16 both ways; every block of the node in one call), bit-exact with the fixed-point
    interpreter."""
    from tinycc_ml.codegen.backend import get_backend
    from tinycc_ml.ir.fixed import run_fixed
    from tinycc_ml.ir.graph import Graph
    from tinycc_ml.ir.types import IDX, TensorType, fixed
    from tinycc_ml.runtime.simulate import run_on_target

    require_target("cortex-m0")
    rng = np.random.default_rng(shift)
    n, cols = 3, 6
    g = Graph("one")
    x = g.add("input", [], {"name": "x"}, type=TensorType((cols,), fixed(16, 8)), name="x")
    M = rng.integers(-wmax, wmax, size=(n, rows, cols))
    M[:, :3], M[:, 3:5] = wmax - 1, -wmax  # rows whose sums leave int16 at extreme inputs, both ways
    wbits = 8 if wmax <= 128 else 16
    stack = g.add("const", [], {"value": M.astype(np.int8 if wbits == 8 else np.int16)},
                  type=TensorType((n, rows, cols), fixed(wbits, shift)), name="M")
    total = g.add("sum", [x], {"shift": 0}, type=TensorType((), fixed(32, 8)), name="total")
    root = g.add("const", [], {"value": np.array(0, dtype=np.int32)}, type=TensorType((), IDX), name="root")
    k = g.add("branch", [root, total], type=TensorType((), IDX), name="k")  # node 1 or 2 by the sign of sum(x)
    y = g.add("matvec_at", [stack, k, x], type=TensorType((rows,), fixed(16, 8)), name="y")
    g.set_output("scores", y)
    g.set_output("prediction", g.add("argmax", [y], type=TensorType((), IDX), name="pred"))
    out = get_backend("cortex-m0").emit(g, "ok", [])
    blocks = f"mac6w{wbits}_6t5x1" if rows == 11 else f"mac7w{wbits}_6t6x2"
    # the storing kernel, one call (shift 0: the kernel leaves the uint32 sums, a C loop stores them)
    assert f"{blocks}{f's{shift}' if shift else ''}{'r' if wmax < 32768 and shift else ''}(" in out.files["ok.c"]
    for name, text in out.files.items():
        (tmp_path / name).write_text(text)
    top = 16384 if wmax < 32768 else 8192  # the sums stay within int32
    X = rng.integers(-top, top, size=(24, cols))
    X[:4] = [[top - 1] * cols, [-top] * cols, [0] * cols, [1] * cols]
    X = X.astype(np.int16)
    run = run_on_target("cortex-m0", [str(tmp_path / "ok.c")], str(tmp_path / "ok.h"), "ok", X, rows,
                        "int16_t", "int16_t", extra_cflags=("-Werror",))
    want = run_fixed(g, X)
    assert np.any(np.abs(want["scores"]) == 32767) or np.any(want["scores"] == -32768)  # saturation reached
    np.testing.assert_array_equal(run.scores, want["scores"])
    np.testing.assert_array_equal(run.predictions, want["prediction"])


def node_kernel_graph(rng, shift: int, s_x: int, rows: int, outputs: bool = True, wmax: int = 32767):
    """A matvec_at whose node (1 or 2 by the sign of sum(x)) has rows reaching int32's extremes (weights up to
    ``wmax``): its kernel shifts the accumulator by ``shift``, rounds and saturates (rows 0-1 of one sign, row 2
    small sums)."""
    from tinycc_ml.ir.graph import Graph
    from tinycc_ml.ir.types import IDX, TensorType, fixed

    n, cols = 3, 40
    g = Graph("one")
    x = g.add("input", [], {"name": "x"}, type=TensorType((cols,), fixed(16, s_x)), name="x")
    M = rng.integers(-wmax - 1, wmax + 1, size=(n, rows, cols))
    M[:, 0], M[:, 1], M[:, 2] = wmax, -wmax - 1, rng.integers(-3, 4, size=(n, cols))
    s_a = 6
    stack = g.add("const", [], {"value": M.astype(np.int16)}, type=TensorType((n, rows, cols), fixed(16, s_a)),
                  name="M")
    total = g.add("sum", [x], {"shift": 0}, type=TensorType((), fixed(32, s_x)), name="total")
    root = g.add("const", [], {"value": np.array(0, dtype=np.int32)}, type=TensorType((), IDX), name="root")
    k = g.add("branch", [root, total], type=TensorType((), IDX), name="k")
    y = g.add("matvec_at", [stack, k, x], type=TensorType((rows,), fixed(16, s_a + s_x - shift)), name="y")
    if outputs:
        g.set_output("scores", y)
        g.set_output("prediction", g.add("argmax", [y], type=TensorType((), IDX), name="pred"))
    return g


# every branch of the AVR kernels' store epilogue outside 8..16: no shift, right shifts (1-4), left shifts
# into a sign byte (5-7), past 16 bits (17-20 right, 21-23 left), the top byte alone (24-31); with weights
# small enough that no sum can pass int32, the rounding constant in the row constants ("r")
AVR_SHIFTS = [(0, 32767), (3, 32767), (6, 32767), (17, 32767), (22, 32767), (24, 32767), (31, 32767),
              (3, 1600), (13, 1600), (22, 1600)]


@pytest.mark.parametrize("shift, wmax", AVR_SHIFTS)
def test_avr_node_kernel_stores_every_shift(shift, wmax, tmp_path):
    """The AVR's node kernel (5-row blocks and a 2-row remainder) storing sat16(rshift(acc, shift)) itself at
    shifts outside 8..16 (and inside with the rounding constant pre-added), bit-exact with the fixed-point
    interpreter (saturation both ways, rounding of small sums, int32 extremes where the rounding addition
    overflows)."""
    from tests.backends.test_avr_kernels import run_exact

    require_target("avr")
    rng = np.random.default_rng(100 + shift)
    g = node_kernel_graph(rng, shift, 9, 7, wmax=wmax)
    X = rng.integers(-1638, 1639, size=(24, 40))
    X[:4] = rng.integers(-3, 4, size=(4, 40))
    X[4], X[5] = 1638, -1638
    scores = run_exact(g, X.astype(np.int16), tmp_path, f"s{shift}{'r' if wmax < 32767 and shift else ''}(")
    if (wmax * 40 * 1638) >> shift > 32767:  # the constant rows' sums leave int16
        assert np.any(scores == 32767) and np.any(scores == -32768)


# (target, product shift, chain shift): a rounding right shift, a saturating left shift, on both chips
POST_CASES = [("avr", 10, 2), ("avr", 3, -2), ("avr", 20, 1), ("cortex-m0", 12, 3), ("cortex-m0", 9, -3)]


@pytest.mark.parametrize("target, shift, post", POST_CASES)
def test_node_kernel_applies_its_scale_chain(target, shift, post, tmp_path):
    """sigma's scale by a power of two fused into the node kernel's stores (c_fixed.chain_shift): no loop after
    the kernel, bit-exact with the fixed-point interpreter where the first shift saturates and the second rounds
    or saturates again."""
    from tests.backends.test_avr_kernels import N
    from tinycc_ml.codegen.backend import get_backend
    from tinycc_ml.ir.fixed import run_fixed
    from tinycc_ml.ir.types import IDX, TensorType, fixed
    from tinycc_ml.passes.plan_memory import fused_chains, plan
    from tinycc_ml.runtime.simulate import run_on_target

    require_target(target)
    rng = np.random.default_rng(200 + shift)
    s_x, rows = 9, N  # rows = N: the sum below adds x itself
    g = node_kernel_graph(rng, shift, s_x, rows, outputs=False)
    z = g.add("scale", ["y"], {"factor": 1.0, "factor_q": 1, "factor_scale": 0},
              type=TensorType((rows,), fixed(16, g.type("y").dtype.scale - post)), name="z")
    total = g.add("add", [z, "x"], type=TensorType((rows,), fixed(16, s_x)), name="total")  # z stays fused
    g.set_output("scores", total)
    g.set_output("prediction", g.add("argmax", [total], type=TensorType((), IDX), name="pred"))
    g.analyses.fused = fused_chains(g)
    assert g.analyses.fused.get("y") == ["z"]
    g.analyses.memory_plan, g.analyses.arenas = plan(g, g.analyses.fused)
    out = get_backend(target).emit(g, "ok", [])
    src = out.files["ok.c"]
    assert f"s{shift}{'p' if post > 0 else 'l'}{abs(post)}" in src and "for (int i = 0; i < 40; ++i) {" not in src
    for name, text in out.files.items():
        (tmp_path / name).write_text(text)
    X = rng.integers(-1638, 1639, size=(24, rows))
    X[:4] = rng.integers(-3, 4, size=(4, rows))
    X[4], X[5] = 1638, -1638
    X = X.astype(np.int16)
    run = run_on_target(target, [str(tmp_path / "ok.c")], str(tmp_path / "ok.h"), "ok", X, rows,
                        "int16_t", "int16_t", extra_cflags=("-Werror",))
    want = run_fixed(g, X)
    np.testing.assert_array_equal(run.scores, want["scores"])
