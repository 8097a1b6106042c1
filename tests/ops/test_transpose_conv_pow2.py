"""transpose_conv2d in the project's fixed point (ir/ops/network/transpose_conv.py: int32 sums, the rounded shift to
the result's scale): the C equal to the fixed-point interpreter bit for bit (host, int16 and pow2 int8; the
ATmega328P, the Cortex-M0 and the Cortex-M4), within the quantisation of the float network, and the accumulator's
overflow proof checked against the largest sum any input can make."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import tinycc_ml
from tests.conftest import require_target
from tinycc_ml.ir.fixed import run_fixed
from tinycc_ml.ir.graph import Graph
from tinycc_ml.ir.ops import OPS, BoundCall
from tinycc_ml.ir.types import F32, TensorType, fixed
from tinycc_ml.models.network import NetworkModel
from tinycc_ml.models.network_fixed import quantise_rows

POW2 = {"int16": {"search": False}, "int8": {"int8_dialect": "pow2", "search": False}}
# (input H, W, C, output channels, kernel, stride, pad): U-Net's 2x2 stride 2, a 3x3 stride 2 with padding, a 1-D
# one (height 1), stride 1
GEOMETRIES = [(3, 4, 2, 3, (2, 2), (2, 2), (0, 0)), (3, 3, 3, 2, (3, 3), (2, 2), (1, 1)),
              (1, 6, 2, 2, (1, 4), (1, 2), (0, 1)), (4, 4, 2, 2, (3, 3), (1, 1), (1, 1))]


def out_size(h, k, s, p):
    return (h - 1) * s - 2 * p + k


def network(geometry, activation="none", seed=0) -> NetworkModel:
    h, w, c, o, kernel, stride, pad = geometry
    rng = np.random.default_rng(seed)
    g = Graph("tconv")
    x = g.add("input", [], {"name": "x"}, type=TensorType((1, h, w, c), F32, "NHWC"), name="x")
    filt = rng.normal(size=(o, *kernel, c)).astype(np.float32)
    bias = rng.normal(size=o).astype(np.float32)
    wn = g.add("const", [], {"value": filt}, type=TensorType(filt.shape, F32, "OHWI"), name="w")
    bn = g.add("const", [], {"value": bias}, type=TensorType(bias.shape, F32), name="b")
    oh, ow = out_size(h, kernel[0], stride[0], pad[0]), out_size(w, kernel[1], stride[1], pad[1])
    y = g.add("transpose_conv2d", [x, wn, bn], {"stride": list(stride), "pad": list(pad), "out_size": [oh, ow],
                                               "activation": activation}, name="tconv")
    g.set_output("scores", g.add("reshape", [y], {"shape": [1, oh * ow * o]}, name="flat"))
    return NetworkModel(g, "tconv")


@pytest.mark.parametrize("geometry", GEOMETRIES)
@pytest.mark.parametrize("precision", sorted(POW2))
@pytest.mark.parametrize("activation", ["none", "relu"])
def test_the_host_c_equals_the_fixed_interpreter_and_follows_the_float_network(geometry, precision, activation,
                                                                              tmp_path):
    require_target("host")
    model = network(geometry, activation)
    rng = np.random.default_rng(1)
    rows = rng.normal(size=(40, model.input_dim))
    result = tinycc_ml.compile(model, target="host", precision=precision, calibration=rows, name="tconv",
                               out_dir=tmp_path, **POW2[precision])
    assert any(result.graph.op(n) == "transpose_conv2d" and result.graph.type(n).dtype.is_fixed
               for n in result.graph.order())
    Xq = quantise_rows(result.graph, rows)
    scores, _ = result.load().run_raw(Xq)
    want = run_fixed(result.graph, Xq)["scores"]
    np.testing.assert_array_equal(scores, want)
    scale = result.graph.type(result.graph.output("scores")).dtype.scale
    real = model.scores(rows)
    spread = float(np.max(real) - np.min(real))
    assert np.max(np.abs(want * 2.0**-scale - real)) < (0.002 if precision == "int16" else 0.08) * spread


@pytest.mark.parametrize("geometry", GEOMETRIES)
def test_the_overflow_proof_is_the_largest_sum_an_input_can_make(geometry):
    """The bound acc_bound states equals the brute-force largest |sum| over the output positions (each input
    value at +-its bound, signed as the taps' weights), and so bounds every sum."""
    h, w, c, o, kernel, stride, pad = geometry
    rng = np.random.default_rng(3)
    wq = rng.integers(-300, 300, size=(o, *kernel, c))
    bias = rng.integers(-1000, 1000, size=o)
    x_bound = 32768
    oh, ow = out_size(h, kernel[0], stride[0], pad[0]), out_size(w, kernel[1], stride[1], pad[1])
    attrs = {"stride": list(stride), "pad": list(pad), "out_size": [oh, ow]}
    types = [TensorType((1, h, w, c), fixed(16, 10), "NHWC"), TensorType(wq.shape, fixed(16, 8), "OHWI"),
             TensorType((o,), fixed(32, 18))]
    bound, scale = OPS["transpose_conv2d"].acc_bound(BoundCall([x_bound, None, None], [10, 8, 18],
                                                                [None, wq, bias], attrs, 0, 16, types))
    assert scale == 18
    worst = 0
    for oy, ox, ch in itertools.product(range(oh), range(ow), range(o)):
        total = abs(int(bias[ch]))
        for iy, ix in itertools.product(range(h), range(w)):
            ky, kx = oy + pad[0] - iy * stride[0], ox + pad[1] - ix * stride[1]
            if 0 <= ky < kernel[0] and 0 <= kx < kernel[1]:
                total += int(np.abs(wq[ch, ky, kx]).sum()) * x_bound
        worst = max(worst, total)
    assert bound >= worst
    if all(k % s == 0 or k > s for k, s in zip(kernel, stride)) and min(h, w) >= max(kernel):
        assert bound == worst  # an inner output position reaches a whole phase


@pytest.mark.toolchain
@pytest.mark.parametrize("target", ["avr", "cortex-m0", "cortex-m4"])
def test_the_microcontrollers_compute_the_same_values(target, tmp_path):
    require_target(target)
    from tinycc_ml.codegen.backend import get_backend  # noqa: PLC0415

    for n, (geometry, precision) in enumerate([(GEOMETRIES[0], "int16"), (GEOMETRIES[1], "int8")]):
        model = network(geometry, "relu", seed=n)
        rows = np.random.default_rng(2).normal(size=(30, model.input_dim))
        folder = tmp_path / f"{precision}{n}"
        result = tinycc_ml.compile(model, target=target, precision=precision, calibration=rows, name="tconv",
                                   out_dir=folder, **POW2[precision])
        X = rows[:4]
        run = get_backend(target).simulate(folder, result.output, X)
        want = run_fixed(result.graph, quantise_rows(result.graph, X))
        np.testing.assert_array_equal(run.scores, want["scores"])
