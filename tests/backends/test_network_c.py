"""C for TFLite's int8 network ops (codegen/c_network.py) on the host: every output byte equal to the
interpreter's (``NetworkModel.run_int8``, itself equal to tflite-micro's: tests/importers/test_tflite.py),
on the four MLPerf Tiny models and on random one-op graphs of each op (strides, SAME/VALID padding,
dilation, depth multiplier, fused relu/relu6, per-channel and per-tensor requantisation)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest

import tinycc_ml
from tests.conftest import require_target
from tinycc_ml.errors import CompileError
from tinycc_ml.ir.graph import Graph
from tinycc_ml.ir.ops import OPS
from tinycc_ml.ir.types import F32, TensorType, quantised
from tinycc_ml.models.network import NetworkModel

REPO = Path(__file__).resolve().parents[2]
MODELS = REPO / "data" / "mlperf-tiny"  # MLPerf Tiny's int8 models (data/mlperf-tiny/README.md)
MLPERF = {"kws_ref_model": 10560, "ad01_int8": 256, "pretrainedResnet_quant": 33328, "vww_96_int8": 36912}


@pytest.fixture(scope="module", autouse=True)
def host():
    require_target("host")


def equal_bytes(model: NetworkModel, X: np.ndarray, tmp_path: Path, **kwargs) -> tinycc_ml.CompileResult:
    """Compile ``model`` for the host; assert its scores and prediction equal run_int8's on the rows X."""
    result = tinycc_ml.compile(model, target="host", name="net", out_dir=tmp_path, **kwargs)
    scores, predictions = result.load().run_raw(X.reshape(len(X), -1).astype(np.int8))
    want = model.run_int8(X.reshape(len(X), *model.input_shape)).reshape(len(X), -1)
    assert scores.dtype == np.int8
    np.testing.assert_array_equal(scores, want)
    np.testing.assert_array_equal(predictions, np.argmax(want, axis=1))
    return result


@pytest.mark.parametrize("name", sorted(MLPERF))
def test_mlperf_tiny_models_compile_to_c_equal_on_every_byte(name, tmp_path):
    model = tinycc_ml.load_model(MODELS / f"{name}.tflite")
    rng = np.random.default_rng(1)
    X = rng.integers(-128, 128, size=(3, model.input_dim))
    X[0] = 0
    result = equal_bytes(model, X, tmp_path)
    assert result.precision == "int8" and result.report["ram_bytes"] == MLPERF[name]
    # real rows: quantised with the input tensor's scale and zero point, as the network's own predict does
    real = rng.normal(size=(3, model.input_dim)) * 4
    np.testing.assert_array_equal(result.load().predict_index(real), model.predict_index(real))
    # -Wall -Wextra -Werror clean in C99 (the host build uses its own flags)
    subprocess.run(["gcc", "-std=c99", "-pedantic", "-Wall", "-Wextra", "-Werror", "-c", str(tmp_path / "net.c"),
                    "-o", str(tmp_path / "net.o")], check=True)


# ---------------------------------------------------------------- random one-op graphs


def int8_type(rng, shape, layout, scale=None):
    scale = float(np.float32(scale if scale is not None else rng.uniform(0.005, 0.1)))
    return TensorType(shape, quantised(8, scale, int(rng.integers(-128, 128))), layout)


def filters(rng, shape, axis, layout, per_channel=True):
    scales = rng.uniform(0.001, 0.05, size=shape[axis] if per_channel else 1)
    w = rng.integers(-127, 128, size=shape).astype(np.int8)
    return w, TensorType(shape, quantised(8, scales, 0, axis if per_channel else -1), layout)


def bias(rng, x_type, w_type, channels):
    scales = [float(np.float32(x_type.dtype.qscales[0] * s)) for s in np.broadcast_to(w_type.dtype.qscales,
                                                                                         (channels,))]
    per_channel = w_type.dtype.axis >= 0
    return rng.integers(-5000, 5000, size=channels).astype(np.int32), \
        TensorType((channels,), quantised(32, scales if per_channel else scales[:1], 0, 0 if per_channel else -1))


def window_attrs(rng):
    return {"stride": [int(v) for v in rng.integers(1, 3, size=2)],
            "dilation": [int(v) for v in rng.integers(1, 3, size=2)],
            "padding": str(rng.choice(["same", "valid"])),
            "activation": str(rng.choice(["none", "relu", "relu6"]))}


def one_op_graph(op: str, seed: int) -> tuple[Graph, TensorType]:
    rng = np.random.default_rng(seed)
    h, w, c = (int(v) for v in rng.integers(3, 9, size=3))
    x_type = int8_type(rng, (1, h, w, c), "NHWC")
    g = Graph("g")
    x = g.add("input", [], {"name": "x"}, type=x_type, name="x")

    def const(value, t, name):
        return g.add("const", [], {"value": value}, type=t, name=name)

    def result(shape, layout="NHWC"):
        return int8_type(rng, shape, layout, scale=rng.uniform(0.01, 0.2))

    if op in ("conv2d", "depthwise_conv2d"):
        kh, kw = (int(v) for v in rng.integers(1, 4, size=2))
        attrs = window_attrs(rng)
        if op == "conv2d":
            o = int(rng.integers(1, 6))
            wq, wt = filters(rng, (o, kh, kw, c), 0, "OHWI", per_channel=bool(seed % 3))
        else:
            attrs["depth_multiplier"] = int(rng.integers(1, 3))
            o = c * attrs["depth_multiplier"]
            wq, wt = filters(rng, (1, kh, kw, o), 3, "IHWO", per_channel=bool(seed % 3))
        bq, bt = bias(rng, x_type, wt, o)
        shape = OPS[op].infer([x_type.with_dtype(F32), wt.with_dtype(F32), bt.with_dtype(F32)], attrs, None).shape
        out = g.add(op, [x, const(wq, wt, "w"), const(bq, bt, "b")], attrs, type=result(shape))
    elif op == "average_pool2d":
        attrs = {"filter": [int(v) for v in rng.integers(1, 4, size=2)],
                 "stride": [int(v) for v in rng.integers(1, 3, size=2)],
                 "padding": str(rng.choice(["same", "valid"])),
                 "activation": str(rng.choice(["none", "relu", "relu6"]))}
        shape = OPS[op].infer([x_type.with_dtype(F32)], attrs, None).shape
        out = g.add(op, [x], attrs, type=TensorType(shape, x_type.dtype, "NHWC"))
    elif op == "max_pool2d":  # a relu'd copy first: the pool reads a computed tensor either way
        attrs = {"filter": [int(v) for v in rng.integers(1, 4, size=2)],
                 "stride": [int(v) for v in rng.integers(1, 3, size=2)],
                 "padding": str(rng.choice(["same", "valid"])),
                 "activation": str(rng.choice(["none", "relu", "relu6"]))}
        shape = OPS[op].infer([x_type.with_dtype(F32)], attrs, None).shape
        out = g.add(op, [x], attrs, type=TensorType(shape, x_type.dtype, "NHWC"))
    elif op == "mean":
        keep = seed % 2
        out = g.add(op, [x], {"axes": [1, 2], "keep_dims": keep},
                    type=result((1, 1, 1, c) if keep else (1, c), "NHWC" if keep else "NC"))
    elif op == "pad":  # then relu and relu6 of the padded tensor
        pads = [0, 0] + [int(v) for v in rng.integers(0, 3, size=6)]
        shape = tuple(d + pads[2 * i] + pads[2 * i + 1] for i, d in enumerate(x_type.shape))
        padded = g.add(op, [x], {"pads": pads}, type=TensorType(shape, x_type.dtype, "NHWC"))
        relu = g.add("relu", [padded], {}, type=result(shape))
        out = g.add("relu6", [relu], {}, type=g.type(relu))
    elif op == "tensor_add":  # the input plus a constant, then that plus the input again
        b_type = int8_type(rng, x_type.shape, "NHWC")
        activation = str(rng.choice(["none", "relu", "relu6"]))
        first = g.add(op, [x, const(rng.integers(-128, 128, size=x_type.shape).astype(np.int8), b_type, "b")],
                      {"activation": activation}, type=result(x_type.shape))
        out = g.add(op, [first, x], {"activation": "none"}, type=result(x_type.shape))
    elif op == "fully_connected":  # rows of the input's last axis
        o = int(rng.integers(1, 12))
        wq, wt = filters(rng, (o, c), 0, "OI", per_channel=False)
        bq, bt = bias(rng, x_type, wt, o)
        out = g.add(op, [x, const(wq, wt, "w"), const(bq, bt, "b")],
                    {"activation": str(rng.choice(["none", "relu", "relu6"]))}, type=result((h * w, o), "NC"))
    elif op == "softmax":  # along the last axis, each position a row
        beta = float(rng.choice([1.0, 0.5, 2.0]))
        out = g.add(op, [x], {"beta": beta},
                    type=TensorType(x_type.shape, quantised(8, 1 / 256, -128), "NHWC"))
    else:  # reshape, then a network on the result: conv, pool, reshape, fully connected, softmax
        o = int(rng.integers(2, 5))
        wq, wt = filters(rng, (o, 3, 3, c), 0, "OHWI")
        bq, bt = bias(rng, x_type, wt, o)
        conv = g.add("conv2d", [x, const(wq, wt, "w"), const(bq, bt, "b")],
                     {"stride": [1, 1], "dilation": [1, 1], "padding": "same", "activation": "relu6"},
                     type=result((1, h, w, o)))
        pool = g.add("average_pool2d", [conv], {"filter": [2, 2], "stride": [2, 2], "padding": "valid",
                                                "activation": "none"},
                     type=TensorType((1, h // 2, w // 2, o), g.type(conv).dtype, "NHWC"))
        flat = g.add("reshape", [pool], {"shape": [1, (h // 2) * (w // 2) * o]},
                     type=TensorType((1, (h // 2) * (w // 2) * o), g.type(pool).dtype, "NC"))
        k = g.type(flat).shape[1]
        fq, ft = filters(rng, (4, k), 0, "OI", per_channel=False)
        fb, fbt = bias(rng, g.type(flat), ft, 4)
        fc = g.add("fully_connected", [flat, const(fq, ft, "fw"), const(fb, fbt, "fb")], {"activation": "none"},
                   type=result((1, 4), "NC"))
        out = g.add("softmax", [fc], {"beta": 1.0}, type=TensorType((1, 4), quantised(8, 1 / 256, -128), "NC"))
    g.set_output("scores", out)
    return g, x_type


CASES = [("conv2d", s) for s in range(6)] + [("depthwise_conv2d", s) for s in range(6)] + \
    [(op, s) for op in ("average_pool2d", "tensor_add", "fully_connected", "softmax", "network", "max_pool2d", "mean",
                        "pad") for s in range(3)]


@pytest.mark.parametrize("op,seed", CASES)
def test_random_network_ops_in_c_equal_the_interpreter(op, seed, tmp_path):
    graph, x_type = one_op_graph(op, seed)
    model = NetworkModel(graph, f"{op}{seed}")
    rng = np.random.default_rng(100 + seed)
    X = rng.integers(-128, 128, size=(6, x_type.size))
    X[0], X[1] = -128, 127
    equal_bytes(model, X, tmp_path)


def test_reshape_is_free_and_network_intermediates_share_the_arena():
    graph, _ = one_op_graph("network", 0)
    result = tinycc_ml.compile(NetworkModel(graph, "net"), target="host", name="net")
    plan = result.graph.analyses.memory_plan
    reshapes = [n for n in result.graph.order() if result.graph.op(n) == "reshape"]
    assert reshapes and not any(n in plan for n in reshapes)
    assert set(result.graph.analyses.arenas) == {"i8"}
    # per-channel requantisation tables, prefixed (the host's kernels: host/network.py)
    assert "net_conv2d_host_requant" in result.files["net.c"]


def test_networks_are_refused_where_their_c_is_untested_and_at_int16():
    # the microcontroller targets' builds: tests/backends/test_network_mcu.py
    model = tinycc_ml.load_model(MODELS / "ad01_int8.tflite")
    with pytest.raises(CompileError, match="precision 'int16' is not one of"):
        tinycc_ml.compile(model, target="host", precision="int16")
