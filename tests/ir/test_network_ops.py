"""The network ops' oracle: TFLite-int8 semantics (run_fixed on a one-op graph with random quantisation,
shapes and attributes) within one output step of the float semantics on the dequantised operands (each
op rounds once to the output's step; the multipliers' own rounding is 2^-31 relative). The int8
semantics' definition is tflite-micro: tests/importers/test_tflite.py."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tinycc_ml.ir.fixed import run_fixed
from tinycc_ml.ir.graph import Graph
from tinycc_ml.ir.ops import OPS
from tinycc_ml.ir.types import F32, TensorType, quantised
from tinycc_ml.ir.verify import verify

SEEDS = range(12)


def dequantise(q, t: TensorType) -> np.ndarray:
    scales = np.asarray(t.dtype.qscales)
    if t.dtype.axis >= 0:
        scales = scales.reshape([-1 if i == t.dtype.axis else 1 for i in range(t.rank)])
    return (np.asarray(q, dtype=np.float64) - t.dtype.zero_point) * scales


def as_float(t: TensorType) -> TensorType:
    return t.with_dtype(F32)


def int8_type(rng, shape, layout, scale=None):
    scale = float(np.float32(scale if scale is not None else rng.uniform(0.005, 0.1)))
    return TensorType(shape, quantised(8, scale, int(rng.integers(-128, 128))), layout)


def check_against_float(g: Graph, node: str, rng, x_shape_type: TensorType, extra_steps: float = 0.0):
    g.set_output("y", node)
    verify(g)
    X = rng.integers(-128, 128, size=(5, *x_shape_type.shape))
    got_q = run_fixed(g, X)["y"]
    out = g.type(node)
    got = dequantise(got_q, out)
    nodes = g.node(node)
    def operand(name, row):
        if g.op(name) == "input":
            return dequantise(X[row], g.type(name))
        return dequantise(g.node(name).attrs["value"], g.type(name))

    want = np.stack([OPS[nodes.op].evaluate([operand(n, r) for n in nodes.inputs], nodes.attrs) for r in range(len(X))])
    step = out.dtype.qscales[0]
    lo, hi = dequantise(-128, out), dequantise(127, out)
    want = np.clip(want, lo, hi)
    assert np.max(np.abs(got - want)) <= step * (1 + extra_steps), f"{nodes.op}: int8 beyond one step of float"


def filters(rng, shape, axis, layout):
    scales = rng.uniform(0.001, 0.05, size=shape[axis])
    w = rng.integers(-127, 128, size=shape).astype(np.int8)
    return w, TensorType(shape, quantised(8, scales, 0, axis), layout)


def bias(rng, x_type, w_type, channels):
    scales = [float(np.float32(x_type.dtype.qscales[0] * s)) for s in np.broadcast_to(w_type.dtype.qscales,
                                                                                         (channels,))]
    per_channel = w_type.dtype.axis >= 0
    return rng.integers(-5000, 5000, size=channels).astype(np.int32), \
        TensorType((channels,), quantised(32, scales if per_channel else scales[:1], 0, 0 if per_channel else -1))


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("op", ["conv2d", "depthwise_conv2d"])
def test_convolutions_are_within_one_step_of_float(op, seed):
    rng = np.random.default_rng(seed)
    h, w, c = (int(v) for v in rng.integers(3, 9, size=3))
    kh, kw = (int(v) for v in rng.integers(1, 4, size=2))
    x_type = int8_type(rng, (1, h, w, c), "NHWC")
    attrs = {"stride": [int(v) for v in rng.integers(1, 3, size=2)],
             "dilation": [int(v) for v in rng.integers(1, 3, size=2)],
             "padding": str(rng.choice(["same", "valid"])), "activation": str(rng.choice(["none", "relu", "relu6"]))}
    if attrs["padding"] == "valid":
        attrs["dilation"] = [1, 1]
    g = Graph("g")
    x = g.add("input", [], {"name": "x"}, type=x_type, name="x")
    if op == "conv2d":
        o = int(rng.integers(1, 6))
        wq, wt = filters(rng, (o, kh, kw, c), 0, "OHWI")
    else:
        attrs["depth_multiplier"] = int(rng.integers(1, 3))
        o = c * attrs["depth_multiplier"]
        wq, wt = filters(rng, (1, kh, kw, o), 3, "IHWO")
    bq, bt = bias(rng, x_type, wt, o)
    wn = g.add("const", [], {"value": wq}, type=wt, name="w")
    bn = g.add("const", [], {"value": bq}, type=bt, name="b")
    probe = OPS[op].infer([as_float(x_type), as_float(wt), as_float(bt)], attrs, None)  # the result's shape
    node = g.add(op, [x, wn, bn], attrs, type=int8_type(rng, probe.shape, "NHWC", scale=rng.uniform(0.01, 0.2)))
    check_against_float(g, node, rng, x_type)


@pytest.mark.parametrize("seed", SEEDS)
def test_fully_connected_average_pool_and_add_are_within_one_step_of_float(seed):
    rng = np.random.default_rng(seed)
    k, o = int(rng.integers(1, 40)), int(rng.integers(1, 10))
    x_type = int8_type(rng, (1, k), "NC")
    g = Graph("fc")
    x = g.add("input", [], {"name": "x"}, type=x_type, name="x")
    wq = rng.integers(-127, 128, size=(o, k)).astype(np.int8)
    wt = TensorType((o, k), quantised(8, rng.uniform(0.001, 0.05), 0), "OI")
    bq, bt = bias(rng, x_type, wt, o)
    node = g.add("fully_connected", [x, g.add("const", [], {"value": wq}, type=wt, name="w"),
                                     g.add("const", [], {"value": bq}, type=bt, name="b")],
                 {"activation": "none"}, type=int8_type(rng, (1, o), "NC", scale=rng.uniform(0.01, 0.5)))
    check_against_float(g, node, rng, x_type)

    x_type = int8_type(rng, (1, 6, 5, 3), "NHWC")
    g = Graph("pool")
    x = g.add("input", [], {"name": "x"}, type=x_type, name="x")
    attrs = {"filter": [int(v) for v in rng.integers(1, 4, size=2)], "stride": [int(v) for v in rng.integers(1, 3, 2)],
             "padding": str(rng.choice(["same", "valid"])), "activation": "none"}
    shape = OPS["average_pool2d"].infer([as_float(x_type)], attrs, None).shape
    node = g.add("average_pool2d", [x], attrs, type=TensorType(shape, x_type.dtype, "NHWC"))
    check_against_float(g, node, rng, x_type)

    g = Graph("add")
    a_type = int8_type(rng, (1, 4, 4, 2), "NHWC")
    a = g.add("input", [], {"name": "x"}, type=a_type, name="x")
    b_type = int8_type(rng, (1, 4, 4, 2), "NHWC")
    b = g.add("const", [], {"value": rng.integers(-128, 128, size=(1, 4, 4, 2)).astype(np.int8)}, type=b_type,
              name="b")
    node = g.add("tensor_add", [a, b], {"activation": "none"}, type=int8_type(rng, (1, 4, 4, 2), "NHWC",
                                                                              scale=rng.uniform(0.01, 0.2)))
    check_against_float(g, node, rng, a_type)


def test_type_rules_refuse_mismatched_network_operands():
    rng = np.random.default_rng(0)
    x_type = int8_type(rng, (1, 4, 4, 2), "NHWC")
    wq, wt = filters(rng, (3, 3, 3, 5), 0, "OHWI")  # reads 5 channels, the input has 2
    _, bt = bias(rng, x_type, wt, 3)
    g = Graph("g")
    x = g.add("input", [], {"name": "x"}, type=x_type, name="x")
    w = g.add("const", [], {"value": wq}, type=wt, name="w")
    b = g.add("const", [], {"value": np.zeros(3, np.int32)}, type=bt, name="b")
    attrs = {"stride": [1, 1], "dilation": [1, 1], "padding": "same", "activation": "none"}
    with pytest.raises(ValueError, match="reads 5 channels"):
        g.add("conv2d", [x, w, b], attrs, type=int8_type(rng, (1, 4, 4, 3), "NHWC"))
    with pytest.raises(ValueError, match="padding must be one of"):
        g.add("average_pool2d", [x], {"filter": [2, 2], "stride": [1, 1], "padding": "full", "activation": "none"},
              type=x_type)
    with pytest.raises(ValueError, match="scale 1/256"):
        g.add("softmax", [x], {"beta": 1.0}, type=x_type)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1),
       op=st.sampled_from(["max_pool2d", "mean", "pad", "relu", "relu6", "concatenation"]))
def test_pooling_padding_and_activations_are_within_one_step_of_float(seed, op):
    """MAX_POOL_2D, MEAN, PAD, RELU, RELU6, CONCATENATION (issue 35): the int8 semantics within one output step
    of the float semantics on the dequantised input (max pool, pad, relu6 and concatenation exactly: they only
    move or clamp integers)."""
    rng = np.random.default_rng(seed)
    h, w, c = (int(v) for v in rng.integers(1, 9, size=3))
    x_type = int8_type(rng, (1, h, w, c), "NHWC")
    g = Graph(op)
    x = g.add("input", [], {"name": "x"}, type=x_type, name="x")
    if op == "max_pool2d":
        attrs = {"filter": [int(rng.integers(1, h + 1)), int(rng.integers(1, w + 1))],
                 "stride": [int(v) for v in rng.integers(1, 3, 2)], "padding": str(rng.choice(["same", "valid"])),
                 "activation": str(rng.choice(["none", "relu", "relu6"]))}
        shape = OPS[op].infer([as_float(x_type)], attrs, None).shape
        node = g.add(op, [x], attrs, type=TensorType(shape, x_type.dtype, "NHWC"))
    elif op == "mean":
        keep = int(rng.integers(0, 2))
        shape, layout = ((1, 1, 1, c), "NHWC") if keep else ((1, c), "NC")
        node = g.add(op, [x], {"axes": [1, 2], "keep_dims": keep},
                     type=int8_type(rng, shape, layout, scale=rng.uniform(0.002, 0.2)))
    elif op == "pad":
        pads = [0, 0] + [int(v) for v in rng.integers(0, 3, size=6)]
        shape = tuple(d + pads[2 * i] + pads[2 * i + 1] for i, d in enumerate(x_type.shape))
        node = g.add(op, [x], {"pads": pads}, type=TensorType(shape, x_type.dtype, "NHWC"))
    elif op == "concatenation":  # the input beside itself
        axis = int(rng.integers(0, 4))
        shape = tuple(2 * d if k == axis else d for k, d in enumerate(x_type.shape))
        node = g.add(op, [x, x], {"axis": axis}, type=TensorType(shape, x_type.dtype, "NHWC"))
    else:
        out = x_type if op == "relu6" else int8_type(rng, x_type.shape, "NHWC", scale=rng.uniform(0.005, 0.2))
        node = g.add(op, [x], {}, type=out)
    check_against_float(g, node, rng, x_type)
