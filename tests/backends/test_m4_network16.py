"""The Cortex-M4 kernels of TFLite's 16x8 layers (tinycc_ml/arm/m4_network16.py): their requantisation against
TFLite's in numpy for every multiplier and shift they take, and random single layers (hypothesis: shapes,
channels not a multiple of 4, padding, strides, dilations, accumulators that need the chunked int64 path) in
QEMU, every output value equal to tflite-micro's."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from tests.conftest import require_target
from tests.ops.single_op import simulated_scores, tflite_micro
from tests.ops.test_16x8 import conv_stack, int16_rows
from tests.tflite_builder import NetBuilder
from tinycc_ml.arm.m4_network16 import (
    channel_groups,
    depthwise_weights,
    matrix_weights,
    proven_int32,
    reduced_multipliers,
    smmla_params,
    smmla_requantise,
)
from tinycc_ml.ir.ops.tflite_arith import multiply_by_quantized_multiplier_64


@settings(max_examples=300, deadline=None)
@given(acc=hnp.arrays(np.int64, 64, elements=st.integers(-(2**31), 2**31 - 1)),
       multiplier=st.integers(2**30, 2**31 - 1), shift=st.integers(-48, -2))
def test_the_smmla_requantisation_is_tflites_16x8_one(acc, multiplier, shift):
    """SMMLA(acc, red 2^e, 2^(s-1)) >> s is TFLite's int64 MultiplyByQuantizedMultiplier for every int32 sum, at
    every shift the kernels take (t = 15 - shift >= 17); none taken below."""
    params = smmla_params(np.array([multiplier]), np.array([shift]))
    if 15 - shift < 17:
        assert params is None
        return
    M, s = params
    assert 0 <= M[0] < 2**31 and reduced_multipliers(np.array([multiplier]))[0] <= 0x7FFF
    np.testing.assert_array_equal(smmla_requantise(acc, M, s), multiply_by_quantized_multiplier_64(acc, multiplier,
                                                                                                   shift))


@settings(max_examples=60, deadline=None)
@given(out_c=st.integers(1, 9), k=st.integers(1, 23), seed=st.integers(0, 2**32 - 1),
       kind=st.sampled_from(["2x2", "1x4"]))
def test_matrix_weights_give_each_channels_sum(out_c, k, seed, kind):
    """The matrix steps' reading of the arranged words: per group, per step of 4 inputs, each channel's two words
    of int16 lanes times the column's two words (SMLAD) sum to W x."""
    rng = np.random.default_rng(seed)
    W = rng.integers(-128, 128, size=(out_c, k)).astype(np.int8)
    x = np.zeros(-(-k // 4) * 4, np.int64)
    x[:k] = rng.integers(-32768, 32768, size=k)
    words, kw4 = matrix_weights(W, kind)
    group = 2 if kind == "2x2" else 4
    lanes = words.view("<i2").astype(np.int64).reshape(-1, kw4, group, 4)  # groups, steps, channels, inputs
    sums = np.einsum("gscj,sj->gc", lanes, x.reshape(kw4, 4)).reshape(-1)
    np.testing.assert_array_equal(sums[:out_c], W.astype(np.int64) @ x[:k])
    assert not sums[out_c:].any()


@pytest.mark.parametrize("channels", [1, 2, 3, 4, 6, 7, 8])
def test_depthwise_groups_cover_each_channel_once(channels):
    W = np.arange(channels * 5, dtype=np.int64).reshape(channels, 5) % 251 - 125
    groups = channel_groups(channels)
    assert [c for c0, w in groups for c in range(c0, c0 + w)] == list(range(channels))
    lanes = depthwise_weights(W.astype(np.int8)).view("<i2")
    at = 0
    for c0, width in groups:
        block = lanes[at:at + 5 * max(width, 2)].reshape(5, max(width, 2))
        np.testing.assert_array_equal(block[:, :width].T, W[c0:c0 + width])
        at += block.size


def check_layer(data: bytes, shape, tmp_path, kernel: str, n_random: int = 3):
    """The single-layer model on the M4 in QEMU equals tflite-micro on int16 rows with the extremes, the layer
    through the 16x8 kernel named ``kernel`` (a function name in the C)."""
    require_target("cortex-m4")
    X = int16_rows(np.random.default_rng(len(data)), n_random, shape)
    got = simulated_scores("cortex-m4", data, X, tmp_path)
    source = (tmp_path / "cortex-m4" / "op.c").read_text()
    assert kernel in source, kernel
    np.testing.assert_array_equal(got, tflite_micro(data, X, shape))
    return source


def conv_model(seed, size, in_c, out_c, kernel, stride, dilation, padding, activation, bias_reach, bias_bits=64):
    net = NetBuilder(seed=seed, activation_bits=16, bias_bits=bias_bits, bias_reach=bias_reach)
    x = net.input((*size, in_c))
    return net.finish(net.conv(x, out_c, kernel, stride=stride, dilation=dilation, padding=padding,
                               activation=activation)), (1, *size, in_c)


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 10_000), size=st.tuples(st.integers(1, 6), st.integers(1, 6)),
       in_c=st.integers(1, 9), out_c=st.integers(1, 7), kernel=st.tuples(st.integers(1, 3), st.integers(1, 3)),
       stride=st.tuples(st.integers(1, 2), st.integers(1, 2)), dilation=st.tuples(st.integers(1, 2), st.integers(1, 2)),
       padding=st.sampled_from(["same", "valid"]), activation=st.sampled_from(["none", "relu", "relu6"]),
       bias_bits=st.sampled_from([64, 32]))
def test_random_convolutions_equal_tflite_micro(tmp_path_factory, seed, size, in_c, out_c, kernel, stride,
                                                dilation, padding, activation, bias_bits):
    """int64 biases, or int32 ones (TFLite's int32 sums and requantisation: the narrow epilogue)."""
    reach = [(k - 1) * d + 1 for k, d in zip(kernel, dilation)]
    if padding == "valid" and any(r > n for r, n in zip(reach, size)):
        return
    data, shape = conv_model(seed, size, in_c, out_c, kernel, stride, dilation, padding, activation, 3000, bias_bits)
    source = check_layer(data, shape, tmp_path_factory.mktemp("conv"), "m4_mm16_")
    assert ("m4_rq_wide(" in source) == (bias_bits == 32)


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 10_000), size=st.tuples(st.integers(1, 6), st.integers(1, 7)), channels=st.integers(1, 9),
       kernel=st.tuples(st.integers(1, 3), st.integers(1, 3)), stride=st.tuples(st.integers(1, 2), st.integers(1, 2)),
       dilation=st.tuples(st.integers(1, 2), st.integers(1, 2)), padding=st.sampled_from(["same", "valid"]),
       activation=st.sampled_from(["none", "relu", "relu6"]))
def test_random_depthwise_convolutions_equal_tflite_micro(tmp_path_factory, seed, size, channels, kernel, stride,
                                                          dilation, padding, activation):
    reach = [(k - 1) * d + 1 for k, d in zip(kernel, dilation)]
    if padding == "valid" and any(r > n for r, n in zip(reach, size)):
        return
    net = NetBuilder(seed=seed, activation_bits=16, bias_bits=64)
    x = net.input((*size, channels))
    data = net.finish(net.depthwise(x, 1, kernel, stride=stride, dilation=dilation, padding=padding,
                                    activation=activation))
    check_layer(data, (1, *size, channels), tmp_path_factory.mktemp("dw"), "m4_dw16_")


def rows_fc(net: NetBuilder, x: int, rows: int, units: int, activation: str = "none") -> int:
    """FULLY_CONNECTED of ``rows`` rows: its output declared (rows, units), as TFLite computes it."""
    out = net.fc(x, units, activation=activation)
    net.tensors[out].shape, net.shapes[out] = [rows, units], (rows, units)
    return out


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 10_000), depth=st.integers(1, 40), units=st.integers(1, 11), rows=st.integers(1, 3),
       activation=st.sampled_from(["none", "relu", "relu6"]), bias_bits=st.sampled_from([64, 32]))
def test_random_fully_connected_layers_equal_tflite_micro(tmp_path_factory, seed, depth, units, rows, activation,
                                                          bias_bits):
    """One row (four channels a step, the row in place or copied where its depth is not a multiple of 4) or
    several (two by two); int64 or int32 biases."""
    net = NetBuilder(seed=seed, activation_bits=16, bias_bits=bias_bits)
    data = net.finish(rows_fc(net, net.input((rows, depth)), rows, units, activation))
    source = check_layer(data, (1, rows, depth), tmp_path_factory.mktemp("fc"), "m4_mm16_")
    assert ("1x4 (int16" in source) == (rows == 1)
    assert ("m4_rq_wide(" in source) == (bias_bits == 32)


@settings(max_examples=6, deadline=None)
@given(seed=st.integers(0, 10_000), shape=st.sampled_from([(7,), (3, 5), (2, 3, 4)]),
       activation=st.sampled_from(["none", "relu", "relu6"]))
def test_random_adds_equal_tflite_micro(tmp_path_factory, seed, shape, activation):
    """ADD of the input and a rescaled copy of it (two operands of different scales)."""
    net = NetBuilder(seed=seed, activation_bits=16, bias_bits=64)
    x = net.input(shape)
    scale = float(net.rng.uniform(0.3, 3.0)) * net.scales[x]
    data = net.finish(net.add(x, net.requantize(x, scale, 16), activation=activation))
    check_layer(data, (1, *shape), tmp_path_factory.mktemp("add"), "m4_add16_", n_random=6)


@pytest.mark.parametrize("depth, units, rows", [(300, 5, 1), (300, 3, 2), (6, 4, 1)])
def test_sums_beyond_int32_take_the_chunked_int64_path(tmp_path, depth, units, rows):
    """Biases near 2^40: no int32 sum is proven, so per chunk of at most 256 inputs an int32 partial sum (proven)
    goes into int64 sums; several chunks where the depth passes 256. Every value equals tflite-micro's."""
    net = NetBuilder(seed=depth + units, activation_bits=16, bias_bits=64, bias_reach=1 << 32)
    data = net.finish(rows_fc(net, net.input((rows, depth)), rows, units))
    source = check_layer(data, (1, rows, depth), tmp_path, "m4_mm16_")
    assert "int32 chunks into int64" in source


def test_a_layer_whose_sums_fit_is_proven_and_one_whose_do_not_is_not():
    W = np.full((2, 100), 127, np.int8)
    assert proven_int32(np.array([0, 0]), W)  # 100 x 127 x 32768 < 2^31
    assert not proven_int32(np.array([0, 2**31 - 100 * 127 * 32768]), W)
    assert not proven_int32(np.zeros(2), np.full((2, 600), -128, np.int8))


EDGES = {
    "conv 3x3 stride 2 same, 3 -> 5 channels": (
        lambda n, x: n.conv(x, 5, (3, 3), stride=(2, 2)), (7, 6, 3), "m4_mm16_"),
    "conv 1x1 of 6 channels (im2col: not a multiple of 4)": (lambda n, x: n.conv(x, 7, (1, 1)), (3, 5, 6), "m4_mm16_"),
    "depthwise 3x3 stride 2 same, 7 channels (a four, a two, a one)": (
        lambda n, x: n.depthwise(x, 1, (3, 3), stride=(2, 2)), (7, 9, 7), "m4_dw16_"),
    "depthwise 2x3 dilation 2 valid, 6 channels": (
        lambda n, x: n.depthwise(x, 1, (2, 3), dilation=(2, 2), padding="valid"), (6, 7, 6), "m4_dw16_"),
}


@pytest.mark.parametrize("edge", sorted(EDGES))
def test_edge_shapes_equal_tflite_micro(edge, tmp_path):
    build, shape, kernel = EDGES[edge]
    net = NetBuilder(seed=len(edge), activation_bits=16, bias_bits=64)
    data = net.finish(build(net, net.input(shape)))
    check_layer(data, (1, *shape), tmp_path, kernel)


def test_the_cortex_m33_runs_the_kernels_too(tmp_path):
    """The M33 takes the M4's kernel table: test_16x8's network (conv, depthwise of multiplier 2 on the shared C,
    ADD, fully connected, softmax) equal to tflite-micro there."""
    require_target("cortex-m33")
    data, shape = conv_stack(7, 64)
    X = int16_rows(np.random.default_rng(7), 3, shape)
    np.testing.assert_array_equal(simulated_scores("cortex-m33", data, X, tmp_path), tflite_micro(data, X, shape))
    source = (tmp_path / "cortex-m33" / "op.c").read_text()
    assert "m4_mm16_" in source and "m4_add16_" in source
