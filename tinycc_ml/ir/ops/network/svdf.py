"""SVDF as TFLite Micro computes it (kernels/svdf_common.cc), one call as two ops, each one value: ``svdf_state``
(the activation state shifted one step and the new column, each filter's FC of the input) and ``svdf_output``
(the time weights over each filter's memory, summed per unit over the rank, plus the bias). The activation state
is a ``state`` node: TFLite's variable tensor, kept between calls.

Integer (int8 input and output, int8 feature weights, int16 or int8 time weights and state, int32 bias): the FC sums
in int32 ((x - zero point) w), requantised by input scale x feature scale / state scale (the product and quotient in
float32, as Prepare computes them), clamped to the state's type, plus the state's zero point (stored in its type:
wrapping); the time sums in int32 (w (s - state zero point)), added per unit with the bias, requantised by state
scale x time scale / output scale, plus the output's zero point, clamped to int8. The integer kernel applies no
fused activation (TFLite Micro's does not). Float: the same sums in float32 in the kernel's order, then the
activation. Refused: time weights of another width than the state (TFLite Micro's Prepare takes them, its Eval reads
the state at their width) and a missing bias (read through a null pointer: TFLite Micro's TODO #1751).
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.ir.ops.c_primitives import clamp_to, float_activation, requantise
from tinycc_ml.ir.ops.convolution import NO_ACCUMULATOR, NO_RANGES
from tinycc_ml.ir.ops.frontends import tflite_builtin
from tinycc_ml.ir.ops.registry import FixedCall, OpDef, need, register_op
from tinycc_ml.ir.ops.signal.common import wrap
from tinycc_ml.ir.ops.state import variable_state
from tinycc_ml.ir.ops.tflite_arith import (
    ACTIVATIONS,
    apply_activation,
    multiply_by_quantized_multiplier,
    quantize_multiplier,
)
from tinycc_ml.ir.types import TensorType

SVDF_OPTIONS = 6  # schema.fbs' BuiltinOptions: SVDFOptions { rank, fused_activation_function, asymmetric... }
F32 = np.float32


def state_multiplier(x_dtype, w_dtype, s_dtype) -> tuple[int, int]:
    real = F32(x_dtype.qscales[0]) * F32(w_dtype.qscales[0]) / F32(s_dtype.qscales[0])
    return quantize_multiplier(float(real))


def output_multiplier(s_dtype, t_dtype, out_dtype) -> tuple[int, int]:
    real = F32(s_dtype.qscales[0]) * F32(t_dtype.qscales[0]) / F32(out_dtype.qscales[0])
    return quantize_multiplier(float(real))


def _state_fixed(call: FixedCall) -> np.ndarray:
    x, state, w = (np.asarray(v, np.int64) for v in call.ins)
    xt, st, wt = (t.dtype for t in call.in_types)
    memory = int(call.attrs["memory"])
    filters = w.shape[0]
    dot = (x - xt.zero_point) @ w.T  # (rows, filters)
    lo, hi = st.integer_range
    column = wrap(np.clip(multiply_by_quantized_multiplier(dot, *state_multiplier(xt, wt, st)), lo, hi)
                   + st.zero_point, st.bits)
    shifted = state.reshape(*state.shape[:-1], filters, memory)
    shifted = np.concatenate([shifted[..., 1:], column[..., None]], axis=-1)
    return shifted.reshape(state.shape)


def _output_fixed(call: FixedCall) -> np.ndarray:
    state, wt, bias = (np.asarray(v, np.int64) for v in call.ins)
    st, tt = call.in_types[0].dtype, call.in_types[1].dtype
    out = call.type.dtype
    rank = int(call.attrs["rank"])
    filters, memory = wt.shape
    per_filter = ((state.reshape(*state.shape[:-1], filters, memory) - st.zero_point) * wt).sum(axis=-1)
    per_unit = per_filter.reshape(*per_filter.shape[:-1], filters // rank, rank).sum(axis=-1) + bias
    y = multiply_by_quantized_multiplier(per_unit, *output_multiplier(st, tt, out)) + out.zero_point
    return np.clip(y, *out.integer_range)


def _state_float(ins, attrs) -> np.ndarray:
    x, state, w = (np.asarray(v, F32) for v in ins)
    memory = int(attrs["memory"])
    filters = w.shape[0]
    column = np.zeros((*x.shape[:-1], filters), F32)
    for k in range(w.shape[1]):
        column = column + w[:, k] * x[..., k:k + 1]
    shifted = state.reshape(*state.shape[:-1], filters, memory)
    return np.concatenate([shifted[..., 1:], column[..., None]], axis=-1).reshape(state.shape)


def _output_float(ins, attrs) -> np.ndarray:
    state, wt, bias = (np.asarray(v, F32) for v in ins)
    rank = int(attrs["rank"])
    filters, memory = wt.shape
    s = state.reshape(*state.shape[:-1], filters, memory)
    scratch = np.zeros(s.shape[:-1], F32)
    for j in range(memory):
        scratch = scratch + wt[:, j] * s[..., j]
    out = np.broadcast_to(bias, (*scratch.shape[:-1], filters // rank)).astype(F32)
    for k in range(rank):
        out = out + scratch[..., k::rank]
    return apply_activation(out, attrs["activation"])


def _infer_state(ts, attrs, declared):
    x, state, w = ts
    memory = int(attrs["memory"])
    need(x.rank == 1 and state.rank == 1 and w.rank == 2 and w.shape[1] == x.shape[0],
         f"x, the state and the feature weights must be a vector, a vector and (filters, inputs), got {x.shape}, "
         f"{state.shape}, {w.shape}")
    need(memory >= 1 and state.size == w.shape[0] * memory, f"a state of {state.size} for {w.shape[0]} filters x "
         f"{memory}")
    if x.dtype.is_float:
        need(state.dtype.is_float and w.dtype.is_float, "a float SVDF's tensors must all be f32")
    else:
        need(x.dtype.is_quantised and x.dtype.bits == 8 and w.dtype.is_quantised and w.dtype.bits == 8
             and state.dtype.is_quantised and state.dtype.bits in (8, 16),
             f"int8 input and feature weights, an int8 or int16 state, got {x.dtype}, {w.dtype}, {state.dtype}")
    return TensorType(state.shape, state.dtype, "")


def _infer_output(ts, attrs, declared):
    state, wt, bias = ts
    rank = int(attrs["rank"])
    need(attrs["activation"] in ACTIVATIONS, f"unknown activation {attrs['activation']!r}")
    need(wt.rank == 2 and state.size == wt.size and rank >= 1 and wt.shape[0] % rank == 0
         and bias.shape == (wt.shape[0] // rank,),
         f"time weights {wt.shape}, state {state.shape}, bias {bias.shape} for rank {rank}")
    if state.dtype.is_float:
        need(wt.dtype.is_float and bias.dtype.is_float, "a float SVDF's tensors must all be f32")
        return TensorType(bias.shape, state.dtype, "")
    need(wt.dtype.is_quantised and wt.dtype.bits == state.dtype.bits and bias.dtype.is_quantised
         and bias.dtype.bits == 32,
         f"time weights of the state's width and an int32 bias, got {wt.dtype}, {bias.dtype}")
    need(declared is not None and declared.dtype.is_quantised and declared.dtype.bits == 8,
         f"the output must be qi8, got {declared}")
    return TensorType(bias.shape, declared.dtype, "")


def _c_state(em, node) -> list[str]:
    x_name, s_name, w_name = node.inputs
    x, st, w = (em.graph.type(n) for n in node.inputs)
    filters, inputs = w.shape
    memory = int(node.attrs["memory"])
    y = em.var(node.name)
    lines = [f"for (long r = 0; r < {filters}; ++r) {{",
             f"    for (long j = 0; j + 1 < {memory}; ++j)",
             f"        {y}[r * {memory} + j] = {em.at(s_name, f'r * {memory} + j + 1')};"]
    if x.dtype.is_float:
        lines += ["    float dot = 0.0f;",
                  f"    for (long k = 0; k < {inputs}; ++k) dot += {em.at(w_name, f'r * {inputs} + k')} * "
                  f"{em.at(x_name, 'k')};",
                  f"    {y}[r * {memory} + {memory - 1}] = dot;", "}"]
        return lines
    m, s = state_multiplier(x.dtype, w.dtype, st.dtype)
    lo, hi = st.dtype.integer_range
    lines += ["    int32_t dot = 0;",
              f"    for (long k = 0; k < {inputs}; ++k) dot += (int32_t){em.at(w_name, f'r * {inputs} + k')} * "
              f"((int32_t){em.at(x_name, 'k')} - {x.dtype.zero_point});",
              f"    dot = {requantise(em)}(dot, {m}, {s});",
              f"    dot = dot < {lo} ? {lo} : (dot > {hi} ? {hi} : dot);",
              f"    {y}[r * {memory} + {memory - 1}] = (int{st.dtype.bits}_t)(dot + {st.dtype.zero_point});", "}"]
    return lines


def _c_output(em, node) -> list[str]:
    s_name, t_name, b_name = node.inputs
    st, tt = em.graph.type(s_name), em.graph.type(t_name)
    filters, memory = tt.shape
    rank = int(node.attrs["rank"])
    y = em.var(node.name)
    if st.dtype.is_float:
        act = float_activation(em, node.attrs["activation"])  # TFLite's, as the interpreter's apply_activation
        return [f"for (long u = 0; u < {filters // rank}; ++u) {{",
                f"    float v = {em.at(b_name, 'u')};",
                f"    for (long k = 0; k < {rank}; ++k) {{",
                "        float scratch = 0.0f;",
                f"        for (long j = 0; j < {memory}; ++j)",
                f"            scratch += {em.at(t_name, f'(u * {rank} + k) * {memory} + j')} * "
                f"{em.at(s_name, f'(u * {rank} + k) * {memory} + j')};",
                "        v += scratch;", "    }",
                f"    {y}[u] = {f'{act}(v)' if act else 'v'};", "}"]
    out = node.type.dtype
    m, s = output_multiplier(st.dtype, tt.dtype, out)
    lo, hi = out.integer_range
    return [f"for (long u = 0; u < {filters // rank}; ++u) {{",
            f"    int32_t total = {em.at(b_name, 'u')};",
            f"    for (long k = 0; k < {rank}; ++k)",
            f"        for (long j = 0; j < {memory}; ++j)",
            f"            total += (int32_t){em.at(t_name, f'(u * {rank} + k) * {memory} + j')} * "
            f"((int32_t){em.at(s_name, f'(u * {rank} + k) * {memory} + j')} - {st.dtype.zero_point});",
            f"    {y}[u] = {clamp_to(em, 8)}({requantise(em)}(total, {m}, {s}) + {out.zero_point}, {lo}, {hi});", "}"]


register_op(OpDef(
    "svdf_state", 3, _infer_state, _state_float, {"memory": "int"},
    "TFLite's SVDF, its activation state after a call: each filter's memory shifted one step and the filter's FC "
    "of the input appended (inputs x, the state, the feature weights)",
    evaluate_rows=lambda ins, batched, attrs, n, rank: _state_float(ins, attrs),
    fixed=_state_fixed, c={"fixed": _c_state, "float": _c_state},
    unsupported={"interval": NO_RANGES, "acc_bound": NO_ACCUMULATOR}))

register_op(OpDef(
    "svdf_output", 3, _infer_output, _output_float, {"rank": "int", "activation": "str"},
    "TFLite's SVDF, its output: the time weights over each filter's memory summed per unit (rank filters each) "
    "with the bias (inputs the new state, the time weights, the bias); integer: no activation, as TFLite Micro",
    evaluate_rows=lambda ins, batched, attrs, n, rank: _output_float(ins, attrs),
    fixed=_output_fixed, c={"fixed": _c_output, "float": _c_output},
    unsupported={"interval": NO_RANGES, "acc_bound": NO_ACCUMULATOR}))


@tflite_builtin("SVDF", 27, options=SVDF_OPTIONS, options_required=True, inputs=(5, 5), optional=(3,))
def lower_tflite(low, options, ins, outs) -> None:
    x, w, t, state, out = (low.tensors[i] for i in (ins[0], ins[1], ins[2], ins[4], outs[0]))
    rank = int(options.scalar(0, "i", 0, "rank"))
    activation = low.activation(options, 1, "SVDF")
    need(len(x.shape) == 2 and x.shape[0] == 1, f"SVDF: an input of shape {list(x.shape)} (one row of features)")
    need(len(w.shape) == 2 and len(t.shape) == 2 and rank >= 1 and w.shape[0] % rank == 0 and t.shape[0] == w.shape[0],
         f"SVDF: feature weights {list(w.shape)}, time weights {list(t.shape)}, rank {rank}")
    need(state.variable, "SVDF: the activation state must be a variable tensor")
    units, memory = w.shape[0] // rank, t.shape[1]
    need(ins[3] >= 0, "SVDF: no bias (input 3 is -1): tflite-micro reads it unconditionally (its int8 Prepare the "
                      "bias's scale, its float Eval the bias's data: a null pointer)")
    if x.type_name == "int8":
        bias = low.tensors[ins[3]]
        expected = float(np.float32(state.scales[0]) * np.float32(t.scales[0])) if state.scales.size else 0.0
        need(bias.scales.size == 1 and abs(float(bias.scales[0]) - expected) < 1e-5,
             "SVDF: the bias's scale must be the state's times the time weights' (TFLite Micro's Prepare)")
    name = low.name_of(out)
    s0 = variable_state(low, ins[4], f"{name}_state")
    row = low.step("reshape", [low.value(ins[0])], {"shape": [x.shape[1]]}, (x.shape[1],), x, f"{name}_x")
    try:
        new = low.graph.add("svdf_state", [row, s0, low.value(ins[1], "")], {"memory": memory},
                            name=f"{name}_next_state")
        result = low.graph.add("svdf_output", [new, low.value(ins[2], ""), low.value(ins[3], "")],
                               {"rank": rank, "activation": activation},
                               type=TensorType((units,), low.dtype(out)), name=f"{name}_units")
    except ValueError as exc:
        need(False, f"SVDF: {exc}")
    low.add("reshape", [result], {"shape": list(out.shape)}, out)
    low.graph.set_next_state(s0, new)
