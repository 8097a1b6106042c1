"""The project's fx16 hard_swish, silu, gelu (both forms) and elu (ir/ops/fixed16_activations.py): the error bounds
the module states, proven over every one of the 65,536 int16 inputs at every input scale from 0 to 15 (and the gates
up to 20) against the float64 functions; the C equal to the fixed-point interpreter on every input (host) and on
the ATmega328P, the Cortex-M0 and the Cortex-M4; the scale rules refused by name."""

from __future__ import annotations

import numpy as np
import pytest

import tinycc_ml
from tests.conftest import require_target
from tinycc_ml.ir.fixed import run_fixed
from tinycc_ml.ir.graph import Graph
from tinycc_ml.ir.ops import OPS, FixedCall
from tinycc_ml.ir.ops.fixed16_activations import (
    GATES,
    alpha_parameters,
    gate_error,
    hard_sigmoid_parameters,
    output_scale_range,
)
from tinycc_ml.ir.ops.network.activations import FUNCTIONS
from tinycc_ml.ir.ops.registry import TypeRuleError
from tinycc_ml.ir.types import F32, TensorType, fixed
from tinycc_ml.models.network import NetworkModel
from tinycc_ml.models.network_fixed import quantise_rows

EVERY_INPUT = np.arange(-(2**15), 2**15, dtype=np.int64)
# (op, attrs, gate): every form (PyTorch's Hardsigmoid: alpha 1/6; ONNX's default 0.2)
FORMS = [("hard_swish", {}, None), ("hard_sigmoid", {"alpha": 1 / 6, "beta": 0.5}, None),
         ("hard_sigmoid", {"alpha": 0.2, "beta": 0.5}, None), ("silu", {}, "silu"),
         ("gelu", {"approximate": "none"}, "gelu"),
         ("gelu", {"approximate": "tanh"}, "gelu_tanh"), ("elu", {"alpha": 1.0}, "elu"),
         ("elu", {"alpha": 0.3}, "elu"), ("elu", {"alpha": 1.7}, "elu")]
IDS = ["hard_swish", "hard_sigmoid", "hard_sigmoid_0.2", "silu", "gelu", "gelu_tanh", "elu", "elu_0.3", "elu_1.7"]


def fx16(op: str, attrs: dict, s_in: int, s_out: int, q=EVERY_INPUT) -> np.ndarray:
    call = FixedCall([q], [TensorType((q.size,), fixed(16, s_in))], TensorType((q.size,), fixed(16, s_out)),
                     attrs, op)
    return np.asarray(OPS[op].fixed(call), dtype=np.int64)


@pytest.mark.parametrize("name", sorted(GATES))
def test_each_gate_is_within_its_stated_error_at_every_position_an_int16_input_reaches(name):
    assert gate_error(GATES[name]) <= GATES[name].error
    assert np.all(np.diff(GATES[name].table) >= 0)  # the C's unsigned b - a


@pytest.mark.parametrize("op, attrs, gate", FORMS, ids=IDS)
@pytest.mark.parametrize("s_in", range(16))
def test_every_input_within_the_stated_bound(op, attrs, gate, s_in):
    lo, hi = output_scale_range(op, attrs, s_in)
    x = EVERY_INPUT * 2.0**-s_in
    truth = FUNCTIONS[op][0](x, attrs)
    for s_out in sorted({min(max(s, lo), hi) for s in (s_in - 3, s_in, s_in + 2, 15)}):
        step = 2.0**-s_out
        got = fx16(op, attrs, s_in, s_out) * step
        wanted = np.clip(truth, -32768 * step, 32767 * step)  # saturation aside
        slack = 1e-9 * step  # the float64 oracle's own rounding
        if op == "hard_swish":  # correctly rounded
            bound = 0.5 * step
        elif op == "hard_sigmoid":
            alpha_q, beta_q, a = hard_sigmoid_parameters(attrs, s_in)
            bound = (0.5 * step + np.abs(x) * abs(attrs["alpha"] - alpha_q * 2.0**-a)
                     + abs(attrs["beta"] - beta_q * 2.0 ** -(s_in + a)))
        elif op == "elu":
            alpha = float(attrs["alpha"])
            alpha_q, a = alpha_parameters(alpha)
            bound = 0.5 * step + np.where(x > 0, 0.0, abs(alpha) * GATES[gate].error + abs(alpha - alpha_q * 2.0**-a))
        else:
            bound = 0.5 * step + np.abs(x) * GATES[gate].error
        assert np.all(np.abs(got - wanted) <= bound + slack), (s_out, float(np.max(np.abs(got - wanted) - bound)))


def test_hard_swish_is_the_correctly_rounded_function_on_exact_halves():
    """x (x + 3) / 6 at x = 1 (scale 0) is 2/3; at x = -1.5 (scale 1) -0.375: at output scale 3, -3 exactly, at
    scale 2, -1.5 steps, rounded up (halves up) to -1."""
    assert fx16("hard_swish", {}, 0, 3, np.array([1]))[0] == 5  # 16/3 = 5.33 steps
    assert fx16("hard_swish", {}, 1, 3, np.array([-3]))[0] == -3
    assert fx16("hard_swish", {}, 1, 2, np.array([-3]))[0] == -1


def test_output_scales_the_kernels_cannot_reach_are_refused_by_name():
    with pytest.raises(TypeRuleError, match="silu's output scale 60 is too far from its input's 10"):
        OPS["silu"].infer([TensorType((4,), fixed(16, 10))], {}, TensorType((4,), fixed(16, 60)))
    with pytest.raises(TypeRuleError, match="hard_swish needs an input scale >= 0"):
        OPS["hard_swish"].infer([TensorType((4,), fixed(16, -2))], {}, TensorType((4,), fixed(16, 0)))


# ---------------------------------------------------------------- C


def network(op: str, attrs: dict, width: int) -> NetworkModel:
    g = Graph("act")
    x = g.add("input", [], {"name": "x"}, type=TensorType((1, width), F32, "NC"), name="x")
    g.set_output("scores", g.add(op, [x], dict(attrs), name=op))
    return NetworkModel(g, "activation")


def calibration(s_in: int, width: int) -> np.ndarray:
    """Rows whose largest |value| gives the input scale ``s_in``, spread over the range."""
    peak = 32767 * 2.0**-s_in
    return np.linspace(-peak, peak, 16 * width).reshape(16, width)


@pytest.mark.parametrize("op, attrs, gate", FORMS[:7], ids=IDS[:7])
@pytest.mark.parametrize("s_in", [4, 11, 14])  # 14: hard_swish's product in int64
def test_the_host_c_equals_the_interpreter_on_every_input(op, attrs, gate, s_in, tmp_path):
    require_target("host")
    width = 256
    model = network(op, attrs, width)
    result = tinycc_ml.compile(model, target="host", precision="int16", calibration=calibration(s_in, width),
                               search=False, name="act", out_dir=tmp_path)
    assert result.graph.type(result.graph.inputs()[0]).dtype == fixed(16, s_in)
    Xq = EVERY_INPUT.reshape(-1, width).astype(np.int16)
    scores, _ = result.load().run_raw(Xq)
    np.testing.assert_array_equal(scores, run_fixed(result.graph, Xq)["scores"])


@pytest.mark.toolchain
@pytest.mark.parametrize("target", ["avr", "cortex-m0", "cortex-m4"])
def test_the_microcontrollers_compute_the_same_values(target, tmp_path):
    require_target(target)
    from tinycc_ml.codegen.backend import get_backend  # noqa: PLC0415

    width, rng = 48, np.random.default_rng(4)
    cases = [(op, attrs, name, 9) for (op, attrs, _), name in zip(FORMS, IDS)
             if name not in ("elu_1.7", "hard_sigmoid_0.2")] + [("hard_swish", {}, "hard_swish_int64", 14)]
    for op, attrs, name, s_in in cases:
        model = network(op, attrs, width)
        folder = tmp_path / name
        result = tinycc_ml.compile(model, target=target, precision="int16", calibration=calibration(s_in, width),
                                   search=False, name="act", out_dir=folder)
        q = np.concatenate([[-32768, 32767, 0, -1, 1], rng.integers(-32768, 32768, size=3 * width - 5)])
        X = q.reshape(3, width) * 2.0**-s_in  # exactly the int16 values at the input's scale
        run = get_backend(target).simulate(folder, result.output, X)
        want = run_fixed(result.graph, quantise_rows(result.graph, X))
        np.testing.assert_array_equal(run.scores, want["scores"], err_msg=name)

