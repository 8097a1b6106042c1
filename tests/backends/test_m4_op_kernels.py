"""The Cortex-M4 kernels of the ops CMSIS-NN optimises besides convolutions (tinycc_ml/arm/m4_elementwise.py,
m4_pool.py, m4_softmax.py, m4_pad.py, m4_transpose.py): random single-op models in QEMU, every output byte equal
to tflite-micro's, and the layer run by the kernel's function (not the shared C's loop)."""

from __future__ import annotations

import re
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import require_target
from tests.ops.single_op import OPS, OPTIONS, pool_model, random_rows, simulated_scores, tflite_micro, unary_model
from tests.tflite_builder import ACTIVATIONS, PADDINGS
from tests.tflite_models import TfliteBuilder, options
from tinycc_ml.arm.m4_elementwise import broadcast_loops
from tinycc_ml.arm.m4_softmax import exp_table
from tinycc_ml.arm.m4_transpose import transpose_axes
from tinycc_ml.ir.ops.tflite_arith import softmax_parameters

pytestmark = pytest.mark.toolchain
SETTINGS = settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def binary(code: int, a_shape, b_shape, out_shape, qa, qb, qo, same: bool, seed: int, opts=None) -> bytes:
    """x -> OP(x, y) -> z: y a constant of ``b_shape``, or (``same``) x itself."""
    rng = np.random.default_rng(seed)
    b = TfliteBuilder()
    x = b.tensor(a_shape, "int8", scale=qa[0], zero_point=qa[1], name="x")
    y = x if same else b.tensor(b_shape, "int8", scale=qb[0], zero_point=qb[1],
                                data=rng.integers(-128, 128, size=b_shape), name="y")
    z = b.tensor(out_shape, "int8", scale=qo[0], zero_point=qo[1], name="z")
    b.op(code, [x, y], [z], *(opts or ()))
    return b.finish([x], [z])


def check_on_m4(data: bytes, in_shape, out_shape, tmp_path, kernel: str, seed: int = 0) -> str:
    """The model's bytes in QEMU equal to tflite-micro's; the generated C calls the kernel's function."""
    require_target("cortex-m4")
    X = random_rows(np.random.default_rng(seed), 5, int(np.prod(in_shape)))
    got = simulated_scores("cortex-m4", data, X, tmp_path)
    np.testing.assert_array_equal(got, tflite_micro(data, X, in_shape).reshape(len(X), -1))
    source = (tmp_path / "cortex-m4" / "op.c").read_text()
    assert f"op_m4_{kernel}_" in source, f"the layer did not take the {kernel} kernel"
    return source


@st.composite
def broadcast_case(draw):
    """Shapes of rank 1..4 with odd extents; b broadcast along any subset of axes, or a scalar, or x itself."""
    rank = draw(st.integers(1, 4))
    a_shape = tuple(draw(st.lists(st.integers(1, 7), min_size=rank, max_size=rank)))
    form = draw(st.sampled_from(["same", "const", "broadcast", "scalar"]))
    if form == "broadcast":
        b_shape = tuple(1 if draw(st.booleans()) else e for e in a_shape)[draw(st.integers(0, rank - 1)):]
    else:
        b_shape = () if form == "scalar" else a_shape
    return a_shape, b_shape, form == "same"


def quantisation(draw, low=0.005, high=0.2):
    return (draw(st.floats(low, high)), draw(st.integers(-128, 127)))


@SETTINGS
@given(case=broadcast_case(), data=st.data())
def test_mul_equals_tflite_micro_on_the_m4(case, data, tmp_path_factory):
    """Random broadcasts, zero points (negative ones among them), activations: each byte as tflite-micro's."""
    a_shape, b_shape, same = case
    qa = quantisation(data.draw)
    qb = qa if same else quantisation(data.draw)
    # an output scale below 0.001 lets x * x's multiplier (up to 0.2^2 / scale) pass what the kernel's SMMLAR form
    # is proven for: the layer then runs the shared C (hypothesis found qa 0.1875, qo 0.0005, zero point 127)
    qo = quantisation(data.draw, 0.001, 0.05)
    activation = data.draw(st.sampled_from(sorted(ACTIVATIONS)))
    model = binary(OPS.MUL, a_shape, b_shape, a_shape, qa, qb, qo, same, seed=len(a_shape),
                   opts=(OPTIONS.MulOptions, options("MulOptions", fusedActivationFunction=ACTIVATIONS[activation])))
    check_on_m4(model, a_shape, a_shape, tmp_path_factory.mktemp("mul"), "mul")


@SETTINGS
@given(case=broadcast_case(), code=st.sampled_from([OPS.MAXIMUM, OPS.MINIMUM]), data=st.data())
def test_maximum_minimum_equal_tflite_micro_on_the_m4(case, code, data, tmp_path_factory):
    a_shape, b_shape, same = case
    q = quantisation(data.draw)
    model = binary(code, a_shape, b_shape, a_shape, q, q, q, same, seed=3)
    check_on_m4(model, a_shape, a_shape, tmp_path_factory.mktemp("minmax"), "max" if code == OPS.MAXIMUM else "min")


def test_mul_of_two_broadcast_operands_and_its_shared_loop_gone(tmp_path):
    """Both operands broadcast ([2, 1, 5] x [1, 3, 1]): the kernel's loops, not the shared C's per-axis ones."""
    model = binary(OPS.MUL, (2, 1, 5), (1, 3, 1), (2, 3, 5), (0.05, -7), (0.03, 100), (0.01, -128), False, 1)
    source = check_on_m4(model, (2, 1, 5), (2, 3, 5), tmp_path, "mul")
    assert "long o = 0;" not in source  # broadcast.c_loop's counter


@pytest.mark.parametrize("a_shape, b_shape, out_shape, loops", [
    ((1, 4, 4, 3), (1, 4, 4, 3), (1, 4, 4, 3), [(48, 1, 1)]),
    ((1, 4, 4, 3), (3,), (1, 4, 4, 3), [(16, 3, 0), (3, 1, 1)]),
    ((1, 4, 4, 3), (1, 4, 1, 1), (1, 4, 4, 3), [(4, 12, 1), (12, 1, 0)]),
    ((1, 6), (), (1, 6), [(6, 1, 0)]),
    ((2, 1, 5), (1, 3, 1), (2, 3, 5), [(2, 5, 0), (3, 0, 1), (5, 1, 0)]),
])
def test_broadcast_loops_merge_the_axes_both_operands_walk_together(a_shape, b_shape, out_shape, loops):
    assert broadcast_loops(a_shape, b_shape, out_shape) == loops


def max_pool(shape, window, stride, padding: str, activation: str, q) -> tuple[bytes, tuple]:
    return pool_model(OPS.MAX_POOL_2D, shape, window, stride, padding, activation, q)


@SETTINGS
@given(h=st.integers(1, 9), w=st.integers(1, 9), c=st.integers(1, 11), kh=st.integers(1, 3), kw=st.integers(1, 3),
       sy=st.integers(1, 3), sx=st.integers(1, 3), padding=st.sampled_from(["same", "valid"]),
       activation=st.sampled_from(sorted(ACTIVATIONS)), zp=st.integers(-128, 127))
def test_max_pool_equals_tflite_micro_on_the_m4(h, w, c, kh, kw, sy, sx, padding, activation, zp, tmp_path_factory):
    """Odd channel counts (the byte tail), windows over the border (same padding), the activation clamp."""
    if padding == "valid" and (kh > h or kw > w):
        return
    model, _ = max_pool((1, h, w, c), (kh, kw), (sy, sx), padding, activation, (0.02, zp))
    check_on_m4(model, (1, h, w, c), None, tmp_path_factory.mktemp("pool"), "maxpool")


@SETTINGS
@given(lead=st.lists(st.integers(1, 3), min_size=0, max_size=2), depth=st.integers(1, 41),
       beta=st.sampled_from([1.0, 0.5, 2.0]), scale=st.floats(0.01, 0.5), zp=st.integers(-128, 127))
def test_softmax_equals_tflite_micro_on_the_m4(lead, depth, beta, scale, zp, tmp_path_factory):
    """Rows of 1 to 41 (the word search for the largest from 8), small and large input scales (differences below
    diff_min among them), several rows."""
    shape = (*lead, depth)
    model = unary_model(OPS.SOFTMAX, shape, in_q=(scale, zp), out_q=(1 / 256, -128),
                        options_type=OPTIONS.SoftmaxOptions, option_fields={"beta": beta},
                        options_name="SoftmaxOptions")
    check_on_m4(model, shape, shape, tmp_path_factory.mktemp("softmax"), "softmax")


def test_the_softmax_table_is_the_exp_of_every_difference():
    """exp_table: the shared steps on each difference, the largest exp(0) (INT32_MAX), zeros exactly below
    diff_min."""
    multiplier, left, diff_min = softmax_parameters(1.0, 0.25)
    table = exp_table(multiplier, left, diff_min)
    assert table.shape == (256,) and table[-1] == 2**31 - 1
    assert np.all(table[: 255 + diff_min] == 0) and np.all(table[255 + diff_min:] > 0)
    assert np.all(np.diff(table[255 + diff_min:]) >= 0)  # exp grows with the difference


def pad_model(shape, pads, q, value: int | None = None) -> bytes:
    """x -> PAD (or PADV2 with the int8 constant ``value``) -> y."""
    b = TfliteBuilder()
    out_shape = tuple(n + p0 + p1 for n, (p0, p1) in zip(shape, pads))
    x = b.tensor(shape, "int8", scale=q[0], zero_point=q[1], name="x")
    paddings = b.tensor((len(shape), 2), "int32", scale=None, data=np.asarray(pads, np.int32), name="paddings")
    y = b.tensor(out_shape, "int8", scale=q[0], zero_point=q[1], name="y")
    if value is None:
        b.op(OPS.PAD, [x, paddings], [y], OPTIONS.PadOptions, options("PadOptions"))
    else:
        c = b.tensor((), "int8", scale=q[0], zero_point=q[1], data=np.asarray(value), name="c")
        b.op(OPS.PADV2, [x, paddings, c], [y], OPTIONS.PadV2Options, options("PadV2Options"))
    return b.finish([x], [y])


@SETTINGS
@given(shape=st.lists(st.integers(1, 6), min_size=1, max_size=4), data=st.data(), zp=st.integers(-128, 127),
       value=st.one_of(st.none(), st.integers(-128, 127)))
def test_pad_equals_tflite_micro_on_the_m4(shape, data, zp, value, tmp_path_factory):
    """Any axes padded (none, the last only, leading ones), odd lengths (the aligned and unaligned copies and
    fills), PADV2's constant."""
    pads = [tuple(data.draw(st.integers(0, 5)) for _ in range(2)) for _ in shape]
    check_on_m4(pad_model(tuple(shape), pads, (0.05, zp), value), tuple(shape), None, tmp_path_factory.mktemp("pad"),
                "pad")


def transpose_model(shape, perm, q) -> bytes:
    b = TfliteBuilder()
    x = b.tensor(shape, "int8", scale=q[0], zero_point=q[1], name="x")
    p = b.tensor((len(perm),), "int32", scale=None, data=np.asarray(perm, np.int32), name="perm")
    y = b.tensor(tuple(shape[k] for k in perm), "int8", scale=q[0], zero_point=q[1], name="y")
    b.op(OPS.TRANSPOSE, [x, p], [y], OPTIONS.TransposeOptions, options("TransposeOptions"))
    return b.finish([x], [y])


@SETTINGS
@given(shape=st.lists(st.integers(1, 9), min_size=1, max_size=5), data=st.data())
def test_transpose_equals_tflite_micro_on_the_m4(shape, data, tmp_path_factory):
    """Ranks 1 to 5, any permutation: contiguous runs (copied), strided ones (gathered), unit axes."""
    perm = data.draw(st.permutations(range(len(shape))))
    check_on_m4(transpose_model(tuple(shape), list(perm), (0.05, -7)), tuple(shape), None,
                tmp_path_factory.mktemp("transpose"), "transpose")


@pytest.mark.parametrize("shape, perm, axes", [
    ((1, 4, 5, 3), [0, 2, 1, 3], [(5, 3), (4, 15), (3, 1)]),   # rows of 3 channels copied whole
    ((2, 3, 4), [0, 1, 2], [(24, 1)]),                           # the identity: one run
    ((1, 6, 8), [0, 2, 1], [(8, 1), (6, 8)]),                    # a matrix: a strided inner axis
    ((2, 1, 3), [1, 2, 0], [(3, 1), (2, 3)]),
])
def test_transpose_axes_merge_runs_the_input_continues(shape, perm, axes):
    assert transpose_axes(shape, perm) == axes


def batch_matmul_model(x_shape, y_shape, out_shape, adj_x: bool, adj_y: bool, rhs: str, qs, seed: int) -> bytes:
    """x -> BATCH_MATMUL(x, y) -> z: y a constant (``rhs`` "const"), or x itself read through a RESHAPE ("x")."""
    rng = np.random.default_rng(seed)
    b = TfliteBuilder()
    (sx, zx), (sy, zy), (so, zo) = qs
    x = b.tensor(x_shape, "int8", scale=sx, zero_point=zx, name="x")
    if rhs == "x":
        y = b.tensor(y_shape, "int8", scale=sx, zero_point=zx, name="y")
        b.op(OPS.RESHAPE, [x], [y])
    else:
        y = b.tensor(y_shape, "int8", scale=sy, zero_point=zy, data=rng.integers(-128, 128, size=y_shape), name="y")
    z = b.tensor(out_shape, "int8", scale=so, zero_point=zo, name="z")
    b.op(OPS.BATCH_MATMUL, [x, y], [z], OPTIONS.BatchMatMulOptions,
         options("BatchMatMulOptions", adjX=adj_x, adjY=adj_y))
    return b.finish([x], [z])


@st.composite
def batch_matmul_case(draw):
    """Shapes (m, k, n of 1 to 9: k's tail of 1 to 3 bytes, odd column counts), adj_x / adj_y, batch axes
    broadcast on either side, a constant rhs or x itself (both operands computed, its zero point on both)."""
    rhs = draw(st.sampled_from(["const", "x"]))
    adj_x, adj_y = draw(st.booleans()), draw(st.booleans())
    m, k = draw(st.integers(1, 9)), draw(st.integers(1, 9))
    if rhs == "x":  # y is x's matrix (r, c) read as the rhs: the sums agree where adj_x != adj_y or r == c
        r = draw(st.integers(1, 9))
        c = draw(st.integers(1, 9)) if adj_x != adj_y else r
        batch = tuple(draw(st.lists(st.integers(1, 3), max_size=2)))
        m, n = c if adj_x else r, r if adj_y else c
        return (*batch, r, c), (*batch, r, c), (*batch, m, n), adj_x, adj_y, rhs
    n = draw(st.integers(1, 9))
    xb = tuple(draw(st.lists(st.integers(1, 3), max_size=2)))
    yb = tuple(e if draw(st.booleans()) else 1 for e in xb)[draw(st.integers(0, len(xb))):]
    out_b = xb if len(xb) >= len(yb) else yb
    x_mat = (k, m) if adj_x else (m, k)
    y_mat = (n, k) if adj_y else (k, n)
    return (*xb, *x_mat), (*yb, *y_mat), (*out_b, m, n), adj_x, adj_y, rhs


@settings(SETTINGS, max_examples=10)
@given(case=batch_matmul_case(), data=st.data())
def test_batch_matmul_equals_tflite_micro_on_the_m4(case, data, tmp_path_factory):
    """Every zero point (the rhs's among them: its int16 weights r - zr), the run-time arrangement of a computed
    rhs in both layouts and its tails, lhs rows copied (adj_x, k not a multiple of 4) or read in place."""
    x_shape, y_shape, out_shape, adj_x, adj_y, rhs = case
    qx, qy = quantisation(data.draw, 0.01, 0.1), quantisation(data.draw, 0.01, 0.1)
    k = x_shape[-2] if adj_x else x_shape[-1]
    qo = (data.draw(st.floats(0.5, 4.0)) * qx[0] * (qx[0] if rhs == "x" else qy[0]) * 128 * k ** 0.5,
          data.draw(st.integers(-128, 127)))
    model = batch_matmul_model(x_shape, y_shape, out_shape, adj_x, adj_y, rhs, (qx, qy, qo), seed=k)
    check_on_m4(model, x_shape, out_shape, tmp_path_factory.mktemp("bmm"), "bmm")


@pytest.mark.parametrize("x_shape, y_shape, out_shape, adj_x, adj_y, rhs", [
    ((2, 6, 8), (2, 6, 8), (2, 6, 6), False, True, "x"),     # Q K^T of one tensor: adj_y, in place
    ((1, 5, 7), (1, 5, 7), (1, 7, 7), True, False, "x"),     # X^T X: rows copied, row-major rhs of 7 columns
    ((2, 3, 12), (12, 5), (2, 3, 5), False, False, "const"),  # a constant rhs broadcast over the batch
])
def test_batch_matmul_layouts_on_the_m4(x_shape, y_shape, out_shape, adj_x, adj_y, rhs, tmp_path):
    model = batch_matmul_model(x_shape, y_shape, out_shape, adj_x, adj_y, rhs,
                               ((0.05, -7), (0.03, 9), (0.5, 3)), seed=1)
    check_on_m4(model, x_shape, out_shape, tmp_path, "bmm")


def transpose_conv_model(in_shape, out_c, kernel, stride, padding: str, activation: str, zx: int, zy: int,
                         seed: int = 5) -> tuple[bytes, tuple]:
    """x -> TRANSPOSE_CONV -> y, per-channel int8 filters and an int32 bias (the shared builder's)."""
    rng = np.random.default_rng(seed)
    b = TfliteBuilder()
    _, h, w, c = in_shape
    size = [n * s if padding == "same" else (n - 1) * s + k for n, k, s in zip((h, w), kernel, stride)]
    out_shape = (1, *size, out_c)
    x = b.tensor(in_shape, "int8", scale=0.05, zero_point=zx, name="x")
    shape = b.tensor((4,), "int32", scale=None, data=np.asarray(out_shape, dtype=np.int32), name="output_shape")
    f = b.filters(rng, (out_c, *kernel, c), 0)
    bias = b.bias(rng, x, f, out_c)
    y = b.tensor(out_shape, "int8", scale=0.08, zero_point=zy, name="y")
    b.op(OPS.TRANSPOSE_CONV, [shape, f, x, bias], [y], OPTIONS.TransposeConvOptions,
         options("TransposeConvOptions", padding=PADDINGS[padding], strideW=stride[1], strideH=stride[0],
                 fusedActivationFunction=ACTIVATIONS[activation]))
    return b.finish([x], [y]), out_shape


@settings(SETTINGS, max_examples=8)
@given(h=st.integers(1, 5), w=st.integers(1, 5), c=st.integers(1, 9), out_c=st.integers(1, 9),
       kh=st.integers(1, 4), kw=st.integers(1, 4), sy=st.integers(1, 3), sx=st.integers(1, 3),
       padding=st.sampled_from(["same", "valid"]), activation=st.sampled_from(sorted(ACTIVATIONS)),
       zx=st.integers(-128, 127), zy=st.integers(-128, 127))
def test_transpose_conv_equals_tflite_micro_on_the_m4(h, w, c, out_c, kh, kw, sy, sx, padding, activation, zx, zy,
                                                      tmp_path_factory):
    """Phases of every kind: taps inside and outside the input, filters smaller than the stride (phases no tap
    reaches), channel counts off the groups of 4, columns off whole words."""
    model, out_shape = transpose_conv_model((1, h, w, c), out_c, (kh, kw), (sy, sx), padding, activation, zx, zy)
    check_on_m4(model, (1, h, w, c), out_shape, tmp_path_factory.mktemp("tconv"), "tconv")


@pytest.mark.parametrize("in_shape, out_c, kernel, stride, padding", [
    ((1, 4, 4, 8), 4, (3, 3), (2, 2), "same"),    # conv_autoencoder_int8's first
    ((1, 8, 8, 4), 1, (3, 3), (2, 2), "same"),    # and second
    ((1, 1, 16, 6), 4, (1, 3), (1, 2), "same"),   # unet_1d_int8's
    ((1, 3, 3, 5), 3, (1, 1), (2, 2), "valid"),   # outputs no tap reaches
])
def test_transpose_conv_layers_on_the_m4(in_shape, out_c, kernel, stride, padding, tmp_path):
    model, out_shape = transpose_conv_model(in_shape, out_c, kernel, stride, padding, "none", -7, 3)
    check_on_m4(model, in_shape, out_shape, tmp_path, "tconv")


@SETTINGS
@given(features=st.integers(1, 13), units=st.integers(1, 6), rank=st.integers(1, 3), memory=st.integers(1, 9),
       seed=st.integers(0, 3))
def test_svdf_stream_equals_tflite_micro_on_the_m4(features, units, rank, memory, seed, tmp_path_factory):
    """Streams of 5 calls (the state kept between them): inputs off whole words, filters off groups of 4, a unit's
    rank x memory bytes off whole words, a memory of one step."""
    from tests.ops.test_svdf import svdf

    model = svdf(state_kind="int8", features=features, units=units, rank=rank, memory=memory, seed=seed)
    source = check_on_m4(model, (1, features), (1, units), tmp_path_factory.mktemp("svdf"), "svdf")
    assert "op_m4_svdf_out_" in source


@pytest.mark.parametrize("features, units, rank, memory", [
    (40, 16, 1, 8),   # the shape of a keyword model's first SVDF layer (fewer units)
    (12, 3, 2, 40),   # a unit of 80 state bytes: its groups of 4 in a loop (beyond m4_svdf.UNROLL)
    (9, 2, 3, 23),    # 69 bytes: the loop, its leftover groups and a tail byte
])
def test_svdf_layers_on_the_m4(features, units, rank, memory, tmp_path):
    from tests.ops.test_svdf import svdf

    model = svdf(state_kind="int8", features=features, units=units, rank=rank, memory=memory)
    check_on_m4(model, (1, features), (1, units), tmp_path, "svdf")


@SETTINGS
@given(shape=st.lists(st.integers(1, 7), min_size=1, max_size=4), data=st.data(),
       kind=st.sampled_from(["int8", "int16"]))
def test_concatenation_equals_tflite_micro_on_the_m4(shape, data, kind, tmp_path_factory):
    """SPLIT_V of x along a random axis into two unequal parts, CONCATENATION of them swapped (two computed
    operands of different lengths, odd byte counts, several slices before the axis): each byte as
    tflite-micro's, the copies arm.m4_concatenation's."""
    axis = data.draw(st.integers(0, len(shape) - 1))
    shape[axis] = max(shape[axis], 2)
    first = data.draw(st.integers(1, shape[axis] - 1))
    b = TfliteBuilder()
    q = (0.05 / 256, 0) if kind == "int16" else (0.05, -3)
    x = b.tensor(shape, kind, scale=q[0], zero_point=q[1], name="x")
    parts = [b.tensor([n if k == axis else e for k, e in enumerate(shape)], kind, scale=q[0], zero_point=q[1])
             for n in (first, shape[axis] - first)]
    sizes = b.tensor((2,), "int32", scale=None, data=np.asarray([first, -1], dtype=np.int32))
    b.op(OPS.SPLIT_V, [x, sizes, b.tensor((), "int32", scale=None, data=np.asarray(axis, dtype=np.int32))], parts,
         OPTIONS.SplitVOptions, options("SplitVOptions", numSplits=2))
    z = b.tensor(shape, kind, scale=q[0], zero_point=q[1], name="z")
    b.op(OPS.CONCATENATION, parts[::-1], [z], OPTIONS.ConcatenationOptions, options("ConcatenationOptions", axis=axis))
    model = b.finish([x], [z])
    tmp_path = tmp_path_factory.mktemp("concatenation")
    X = random_rows(np.random.default_rng(len(shape)), 3, int(np.prod(shape)), kind)
    require_target("cortex-m4")
    got = simulated_scores("cortex-m4", model, X, tmp_path)
    np.testing.assert_array_equal(got, tflite_micro(model, X, tuple(shape)).reshape(len(X), -1))
    assert "arm.m4_concatenation" in (tmp_path / "cortex-m4" / "op.c").read_text()


@SETTINGS
@given(features=st.integers(1, 13), units=st.integers(1, 9), steps=st.integers(1, 3), seed=st.integers(0, 3),
       cell_clip=st.sampled_from([0.0, 0.5]), cell_scale=st.sampled_from([2.0**-8, 2.0**-11, 2.0**-15]),
       kind=st.sampled_from(["int8", "int16"]))
def test_lstm_stream_equals_tflite_micro_on_the_m4(features, units, steps, seed, cell_clip, cell_scale, kind,
                                                   tmp_path_factory):
    """int8 and 16x8 UNIDIRECTIONAL_SEQUENCE_LSTM streams of 5 calls (hidden and cell states kept between them) on
    arm.m4_lstm's step function: inputs and units off whole words, one step, cell clips and scales."""
    from tests.ops.test_lstm import lstm

    require_target("cortex-m4")
    model = lstm(steps=steps, features=features, units=units, seed=seed, cell_clip=cell_clip, cell_scale=cell_scale,
                 kind=kind)
    tmp_path = tmp_path_factory.mktemp("lstm")
    X = random_rows(np.random.default_rng(seed), 5, steps * features, kind)
    got = simulated_scores("cortex-m4", model, X, tmp_path)
    np.testing.assert_array_equal(got, tflite_micro(model, X, (1, steps, features)).reshape(len(X), -1))
    source = (tmp_path / "cortex-m4" / "op.c").read_text()
    assert "arm.m4_lstm.fused_cell" in source


# (steps, features, units, seed): benchmarks/cmsis_nn_ops.py's layers, words of inputs and units exactly, one of
# each left over, and inputs beyond 256 (the sums' asm loops over 8 words of inputs at a time)
FUSED_SHAPES = [(5, 6, 4, 38), (10, 10, 32, 39), (4, 40, 64, 40), (3, 8, 8, 1), (2, 5, 9, 2), (2, 262, 3, 3)]


@pytest.mark.parametrize("kind", ["int8", "int16"])
@pytest.mark.parametrize("shape", FUSED_SHAPES, ids=[f"{s}x{f}->{u}" for s, f, u, _ in FUSED_SHAPES])
def test_lstm_step_function_equals_tflite_micro_on_the_m4(shape, kind, tmp_path):
    """The int8 and 16x8 step function (arm.m4_lstm.fused_cell) on streams of 5 calls, the extremes among the
    inputs: one function for the layer's steps, every requantisation its own (none of the shared C's)."""
    from tests.ops.test_lstm import lstm

    require_target("cortex-m4")
    steps, features, units, seed = shape
    model = lstm(steps=steps, features=features, units=units, seed=seed, cell_clip=0.5, kind=kind)
    X = random_rows(np.random.default_rng(seed), 5, steps * features, kind)
    got = simulated_scores("cortex-m4", model, X, tmp_path)
    np.testing.assert_array_equal(got, tflite_micro(model, X, (1, steps, features)).reshape(len(X), -1))
    source = (tmp_path / "cortex-m4" / "op.c").read_text()
    assert "arm.m4_lstm.fused_cell" in source and "op_tfl_requantise" not in source
    assert source.count("static void op_m4_lstm_") == 1  # one function for the layer's steps


@pytest.mark.parametrize("op", ["logistic", "tanh"])
def test_the_activation_tables_give_tflites_int16_logistic_and_tanh(op):
    """Every int16 input of the gates' rescaling (3, 0) and of the cell state's tanh at cell scales 2^-8..2^-15,
    against the reference kernels' arithmetic (tflite_sigmoid.logistic_int16, tanh_int16: measured against
    tflite-micro in tests/ops/test_logistic_tanh.py)."""
    from tinycc_ml.arm.m4_lstm import TABLE_BITS, activation_table
    from tinycc_ml.ir.ops.network.lstm import cell_tanh_parameters
    from tinycc_ml.ir.ops.tflite_sigmoid import logistic_int16, tanh_int16

    table = activation_table(op)
    bits, out = TABLE_BITS[op]
    q = np.arange(-32768, 32768, dtype=np.int64)
    rescalings = {(3, 0)} | {cell_tanh_parameters(SimpleNamespace(qscales=(2.0**-p,))) for p in range(8, 16)}
    for multiplier, shift in sorted(rescalings):
        v = q * multiplier
        v = (v + (1 << (shift - 1))) >> shift if shift else v
        rows = table[np.clip(v >> bits, -256, 255) + 256]
        got = (rows[:, 0] + (v & ((1 << bits) - 1)) * rows[:, 1]) >> out
        want = (logistic_int16 if op == "logistic" else tanh_int16)(q, multiplier, shift)
        np.testing.assert_array_equal(got, want, err_msg=f"rescaling {multiplier}, {shift}")


@pytest.mark.parametrize("bias_reach", [2000, 1 << 29])  # 2^29 x 2^shift: beyond SMMLAR's proof, the shared C's
def test_lstm_layers_on_the_m4(bias_reach, tmp_path):
    from tests.ops.test_lstm import lstm

    model = lstm(steps=3, features=20, units=24, seed=5, bias_reach=bias_reach)
    source = check_on_m4(model, (1, 3, 20), (1, 3, 24), tmp_path, "lstm")
    assert bool(re.search(r"op_tfl_requantise\(\w_a,", source)) == (bias_reach > 2000)
