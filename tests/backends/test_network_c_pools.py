"""The network ops ONNX's networks added (max_pool2d, transpose, explicit pads on convolutions and pools):
int8 within one output step of their float semantics, and their host C equal to the interpreter on every
byte, on random one-op graphs (strides, SAME / VALID / explicit padding, fused ReLU / ReLU6)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.backends.test_network_c import bias, equal_bytes, filters, int8_type
from tests.conftest import require_target
from tests.ir.test_network_ops import as_float, check_against_float
from tinycc_ml.ir.graph import Graph
from tinycc_ml.ir.ops import OPS
from tinycc_ml.ir.types import F32, TensorType
from tinycc_ml.models.network import NetworkModel

OPS_HERE = ("max_pool2d", "transpose", "conv2d_explicit", "depthwise_explicit", "average_pool2d_explicit")


def padding(rng, window) -> dict:
    choice = str(rng.choice(["same", "valid", "explicit"]))
    if choice != "explicit":
        return {"padding": choice}
    return {"padding": "explicit", "pads": [int(rng.integers(0, window[k % 2])) for k in range(4)]}


def one_op(op: str, seed: int) -> tuple[Graph, str, TensorType]:
    rng = np.random.default_rng(seed)
    h, w, c = (int(v) for v in rng.integers(3, 9, size=3))
    x_type = int8_type(rng, (1, h, w, c), "NHWC")
    g = Graph("g")
    x = g.add("input", [], {"name": "x"}, type=x_type, name="x")
    activation = str(rng.choice(["none", "relu", "relu6"]))
    window = [int(v) for v in rng.integers(1, 4, size=2)]
    if op == "transpose":
        perm = [0, *(1 + rng.permutation(3))]
        shape = tuple(x_type.shape[p] for p in perm)
        return g, g.add("transpose", [x], {"perm": [int(p) for p in perm]}, type=TensorType(shape, x_type.dtype)), \
            x_type
    if op in ("max_pool2d", "average_pool2d_explicit"):
        attrs = {"filter": window, "stride": [int(v) for v in rng.integers(1, 3, size=2)],
                 **(padding(rng, window) if op == "max_pool2d" else {"padding": "explicit",
                                                                     "pads": [int(rng.integers(0, window[k % 2]))
                                                                              for k in range(4)]}),
                 "activation": activation}
        name = op.replace("_explicit", "")
        shape = OPS[name].infer([as_float(x_type)], attrs, None).shape
        return g, g.add(name, [x], attrs, type=TensorType(shape, x_type.dtype, "NHWC")), x_type
    attrs = {"stride": [int(v) for v in rng.integers(1, 3, size=2)], "dilation": [1, 1], "padding": "explicit",
             "pads": [int(rng.integers(0, window[k % 2])) for k in range(4)], "activation": activation}
    if op == "conv2d_explicit":
        o = int(rng.integers(1, 6))
        wq, wt = filters(rng, (o, *window, c), 0, "OHWI")
        name = "conv2d"
    else:
        attrs["depth_multiplier"] = int(rng.integers(1, 3))
        o = c * attrs["depth_multiplier"]
        wq, wt = filters(rng, (1, *window, o), 3, "IHWO")
        name = "depthwise_conv2d"
    bq, bt = bias(rng, x_type, wt, o)
    shape = OPS[name].infer([x_type.with_dtype(F32), wt.with_dtype(F32), bt.with_dtype(F32)], attrs, None).shape
    out_type = int8_type(rng, shape, "NHWC", scale=rng.uniform(0.05, 0.5))
    node = g.add(name, [x, g.add("const", [], {"value": wq}, type=wt, name="w"),
                        g.add("const", [], {"value": bq}, type=bt, name="b")], attrs, type=out_type)
    return g, node, x_type


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("op", OPS_HERE)
def test_int8_is_within_one_step_of_float(op, seed):
    g, node, x_type = one_op(op, seed)
    check_against_float(g, node, np.random.default_rng(seed), x_type)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("op", OPS_HERE)
def test_c_equals_the_interpreter(op, seed, tmp_path):
    require_target("host")
    g, node, x_type = one_op(op, seed)
    g.set_output("scores", node)
    rng = np.random.default_rng(100 + seed)
    X = rng.integers(-128, 128, size=(6, x_type.size))
    X[0], X[1] = -128, 127
    equal_bytes(NetworkModel(g, f"{op}{seed}"), X, tmp_path)
