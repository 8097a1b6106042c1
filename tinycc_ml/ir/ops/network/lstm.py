"""UNIDIRECTIONAL_SEQUENCE_LSTM as TFLite Micro computes it (kernels/lstm_eval.h: LstmStep), one time step as two
ops, each one value: ``lstm_cell`` (the forget, input and cell gates and the new cell state) and ``lstm_hidden``
(the output gate and the new hidden state). The TFLite lowering unrolls the sequence over its time steps, the hidden
and cell states are ``state`` nodes (TFLite's variable tensors: kept from one call to the next).

A gate: FC(x_t) with its bias, plus FC(h_{t-1}), then sigmoid (the cell gate: the options' activation, tanh or
sigmoid). Cell: c_t = f c_{t-1} + i g, clipped at cell_clip (when above 0). Hidden: h_t = o tanh(c_t).

Integer (int8 activations and hidden state, int8 weights per tensor, int32 biases, int16 cell state): each FC sums
in int32 ((x - zero point) w, plus the bias for the input's), requantised (input scale x weight scale / 2^-12) to
int16 at 2^-12 and saturated; the two FCs added with int16 saturation; sigmoid and tanh are TFLite's int16 kernels
(ir/ops/tflite_sigmoid.py) at 2^-15. The products are TFLite's int16 MulElementwise: f c at the cell's scale, i g
from 2^-30 to the cell's scale, the two added with saturation and clipped at round-towards-zero(cell_clip / scale);
tanh(c_t) reads the cell at its power-of-two scale, and h_t = o tanh(c_t) goes from 2^-30 to the hidden state's
scale and zero point, int8. 16x8 (int16 activations and hidden state, int64 biases): the FCs sum in int64 and
requantise with TFLite's 64-bit MultiplyByQuantizedMultiplier, the hidden state int16. Float: the same steps in
float32 (TFLite's logistic with its cut-offs).
"""

from __future__ import annotations

import math

import numpy as np

from tinycc_ml.ir.ops.c_primitives import clamp_to, requantise, requantise64
from tinycc_ml.ir.ops.convolution import NO_ACCUMULATOR, NO_RANGES
from tinycc_ml.ir.ops.frontends import tflite_builtin
from tinycc_ml.ir.ops.registry import FixedCall, OpDef, need, register_op
from tinycc_ml.ir.ops.state import variable_state
from tinycc_ml.ir.ops.tflite_arith import (
    multiply_by_quantized_multiplier,
    multiply_by_quantized_multiplier_64,
    quantize_multiplier,
)
from tinycc_ml.ir.ops.tflite_sigmoid import (
    c_int16_block,
    c_logistic_float,
    logistic_float,
    logistic_int16,
    tanh_int16,
)
from tinycc_ml.ir.types import TensorType

GATE_SCALE, UNIT_SCALE = 2.0**-12, 2.0**-15  # the gates' FC outputs (Q3.12) and their activations (Q0.15)
# the cell gate's activation by the options' code: schema.fbs has TANH (4) and no SIGMOID; with any other code
# TFLite Micro's gate applies none (a failed debug assertion), which no model means
ACTIVATIONS = {4: "tanh"}
INT16_MIN, INT16_MAX = -(1 << 15), (1 << 15) - 1


# ---------------------------------------------------------------- parameters

def fc_multiplier(x_dtype, w_dtype) -> tuple[int, int]:
    """A gate FC's requantisation to 2^-12: input scale x weight scale / 2^-12 (in double), as Prepare."""
    return quantize_multiplier(float(x_dtype.qscales[0]) * float(w_dtype.qscales[0]) / GATE_SCALE)


def mul_multiplier(scale1: float, scale2: float, out_scale: float) -> tuple[int, int]:
    """CreateInterGateMulParams: scale1 x scale2 / output scale (in double), quantised."""
    return quantize_multiplier(float(scale1) * float(scale2) / float(out_scale))


def cell_power(cell_dtype) -> int:
    """CheckedLog2 of the cell state's scale: its rounded log2 (TFLite uses it even when the scale is not a power
    of two; the reader refuses that)."""
    return round(math.log2(float(cell_dtype.qscales[0])))


def cell_tanh_parameters(cell_dtype) -> tuple[int, int]:
    """The int16 tanh of the cell state: (multiplier, right shift) from the cell's power of two."""
    left = 15 + cell_power(cell_dtype) - 3
    return (3 << left, 0) if left >= 0 else (3, -left)


def quantised_clip(cell_clip: float, cell_dtype) -> int:
    """CreateLstmCellStateInfo: cell_clip / scale clamped to int16, then truncated towards zero."""
    return int(min(max(float(np.float32(cell_clip)) / float(cell_dtype.qscales[0]), -32768.0), 32767.0))


# ---------------------------------------------------------------- integer arithmetic (rows first)

def _fc(x, x_dtype, w, bias, multiplier: tuple[int, int]) -> np.ndarray:
    """A gate's FC to int16: an int32 sum (int64 for int16 activations, TFLite's 64-bit requantisation)."""
    acc = (np.asarray(x, np.int64) - x_dtype.zero_point) @ np.asarray(w, np.int64).T
    if bias is not None:
        acc = acc + np.asarray(bias, np.int64)
    requantised = multiply_by_quantized_multiplier_64 if x_dtype.bits == 16 else multiply_by_quantized_multiplier
    return np.clip(requantised(acc, *multiplier), INT16_MIN, INT16_MAX)


def _gate(x, x_dtype, h, h_dtype, w, w_dtype, r, r_dtype, bias, activation: str) -> np.ndarray:
    total = np.clip(_fc(x, x_dtype, w, bias, fc_multiplier(x_dtype, w_dtype))
                    + _fc(h, h_dtype, r, None, fc_multiplier(h_dtype, r_dtype)), INT16_MIN, INT16_MAX)
    return logistic_int16(total, 3, 0) if activation == "sigmoid" else tanh_int16(total, 3, 0)


def _mul(a, b, multiplier: tuple[int, int], lo: int, hi: int, zero_point: int = 0) -> np.ndarray:
    product = np.asarray(a, np.int64) * np.asarray(b, np.int64)
    return np.clip(multiply_by_quantized_multiplier(product, *multiplier) + zero_point, lo, hi)


def _cell_fixed(call: FixedCall) -> np.ndarray:
    x, h, c, wf, wi, wg, rf, ri, rg, bf, bi, bg = call.ins
    xt, ht, ct = (t.dtype for t in call.in_types[:3])
    wt = [t.dtype for t in call.in_types[3:9]]
    f = _gate(x, xt, h, ht, wf, wt[0], rf, wt[3], bf, "sigmoid")
    i = _gate(x, xt, h, ht, wi, wt[1], ri, wt[4], bi, "sigmoid")
    g = _gate(x, xt, h, ht, wg, wt[2], rg, wt[5], bg, call.attrs["activation"])
    scale = float(ct.qscales[0])
    kept = _mul(f, c, mul_multiplier(UNIT_SCALE, scale, scale), INT16_MIN, INT16_MAX)
    added = _mul(i, g, mul_multiplier(UNIT_SCALE, UNIT_SCALE, scale), INT16_MIN, INT16_MAX)
    new = np.clip(kept + added, INT16_MIN, INT16_MAX)
    if float(call.attrs["cell_clip"]) > 0:
        clip = quantised_clip(call.attrs["cell_clip"], ct)
        new = np.clip(new, -clip, clip)
    return new


def _hidden_fixed(call: FixedCall) -> np.ndarray:
    x, h, c, wo, ro, bo = call.ins
    xt, ht, ct, wt, rt = (t.dtype for t in call.in_types[:5])
    out = call.type.dtype
    o = _gate(x, xt, h, ht, wo, wt, ro, rt, bo, "sigmoid")
    squashed = tanh_int16(c, *cell_tanh_parameters(ct))
    return _mul(squashed, o, mul_multiplier(UNIT_SCALE, UNIT_SCALE, float(out.qscales[0])), *out.integer_range,
                zero_point=out.zero_point)


# ---------------------------------------------------------------- float32, TFLite's order

def _fc_float(x, w, bias) -> np.ndarray:
    """reference_ops::FullyConnected: the products added one by one in float32, then the bias."""
    x, w = np.asarray(x, np.float32), np.asarray(w, np.float32)
    total = np.zeros((*x.shape[:-1], w.shape[0]), np.float32)
    for k in range(w.shape[1]):
        total = total + x[..., k:k + 1] * w[:, k]
    return total + (np.asarray(bias, np.float32) if bias is not None else np.float32(0))


def _gate_float(x, h, w, r, bias, activation: str):
    total = _fc_float(x, w, bias) + _fc_float(h, r, None)
    return (logistic_float(total) if activation == "sigmoid" else np.tanh(total)).astype(np.float32)


def _cell_float(ins, attrs) -> np.ndarray:
    x, h, c, wf, wi, wg, rf, ri, rg, bf, bi, bg = ins
    f = _gate_float(x, h, wf, rf, bf, "sigmoid")
    i = _gate_float(x, h, wi, ri, bi, "sigmoid")
    g = _gate_float(x, h, wg, rg, bg, attrs["activation"])
    new = f * np.asarray(c, np.float32) + i * g
    clip = np.float32(attrs["cell_clip"])
    return np.clip(new, -clip, clip) if clip > 0 else new


def _hidden_float(ins, attrs) -> np.ndarray:
    x, h, c, wo, ro, bo = ins
    return np.tanh(np.asarray(c, np.float32)) * _gate_float(x, h, wo, ro, bo, "sigmoid")


# ---------------------------------------------------------------- types

def _check(x, h, c, weights, biases):
    units = h.shape[-1]
    need(x.rank == 1 and h.rank == 1 and c.rank == 1 and c.shape == h.shape,
         f"x, h and c must be vectors (one time step, batch 1), got {x.shape}, {h.shape}, {c.shape}")
    for w, k in weights:
        need(w.shape == (units, (x.shape[0] if k == "input" else units)),
             f"a {k} weight of shape {list(w.shape)} for {units} units and {x.shape[0]} inputs")
    for b in biases:
        need(b.shape == (units,), f"a bias of shape {list(b.shape)} for {units} units")
    if x.dtype.is_float:
        need(all(t.dtype.is_float for t in (h, c, *(w for w, _ in weights), *biases)),
             "a float LSTM's tensors must all be f32")
        return
    need(x.dtype.is_quantised and x.dtype.bits in (8, 16) and h.dtype.is_quantised and h.dtype.bits == x.dtype.bits,
         f"the input and hidden state must be both qi8 or both qi16 (TFLite's LSTMs), got {x.dtype}, {h.dtype}")
    need(c.dtype.is_quantised and c.dtype.bits == 16 and c.dtype.zero_point == 0,
         f"the cell state must be symmetric qi16, got {c.dtype}")
    scale = float(c.dtype.qscales[0])
    need(abs(math.log2(scale) - round(math.log2(scale))) < 1e-3,
         f"the cell state's scale {scale:g} must be a power of two (TFLite Micro's tanh reads it as one)")
    for w, _ in weights:
        need(w.dtype.is_quantised and w.dtype.bits == 8 and len(w.dtype.qscales) == 1 and w.dtype.zero_point == 0,
             f"weights must be per-tensor symmetric qi8, got {w.dtype}")
    bias_bits = 64 if x.dtype.bits == 16 else 32
    for b in biases:
        need(b.dtype.is_quantised and b.dtype.bits == bias_bits, f"biases must be qi{bias_bits}, got {b.dtype}")


def _attrs_check(attrs):
    need(attrs["activation"] in ("tanh", "sigmoid"), f"activation {attrs['activation']!r}: tanh or sigmoid")
    need(math.isfinite(float(attrs["cell_clip"])) and float(attrs["cell_clip"]) >= 0,
         f"cell_clip {attrs['cell_clip']} must be a non-negative number")


def _infer_cell(ts, attrs, declared):
    x, h, c, wf, wi, wg, rf, ri, rg, bf, bi, bg = ts
    _attrs_check(attrs)
    _check(x, h, c, [(wf, "input"), (wi, "input"), (wg, "input"), (rf, "recurrent"), (ri, "recurrent"),
                     (rg, "recurrent")], [bf, bi, bg])
    return TensorType(c.shape, c.dtype, "")


def _infer_hidden(ts, attrs, declared):
    x, h, c, wo, ro, bo = ts
    _check(x, h, c, [(wo, "input"), (ro, "recurrent")], [bo])
    return TensorType(h.shape, h.dtype, "")


# ---------------------------------------------------------------- C

def _c_gate(em, node, name: str, x: str, h: str, w: str, r: str, bias: str | None, activation: str,
            sums=None) -> list[str]:
    """C statements declaring ``int16_t name`` (integer) or ``float name``: unit j's gate. ``sums`` (integer): a
    target kernel's, called as sums(name, x, h, w, r, bias, (mx, sx), (mh, sh)) with the two requantisations:
    (lines, qa, qb), the lines declaring ``int32_t <name>_a`` (the input's sum, the bias added) and ``<name>_b``
    (the hidden state's), qa and qb C for their requantised values (None: the portable requantisation); None:
    the portable loops."""
    g = em.graph
    xt, ht, wt, rt = (g.type(n) for n in (x, h, w, r))
    if xt.dtype.is_float:
        bias_term = em.at(bias, "j") if bias is not None else "0.0f"
        sigmoid = c_logistic_float(f"{name}_s")
        return [f"float {name}_a = 0.0f, {name}_b = 0.0f;",
                f"for (long k = 0; k < {xt.size}; ++k) {name}_a += {em.at(x, 'k')} * {em.at(w, f'j * {xt.size} + k')};",
                f"for (long k = 0; k < {ht.size}; ++k) {name}_b += {em.at(h, 'k')} * {em.at(r, f'j * {ht.size} + k')};",
                f"const float {name}_s = ({name}_a + {bias_term}) + {name}_b;",
                f"const float {name} = {sigmoid if activation == 'sigmoid' else f'tanhf({name}_s)'};"]
    wide = xt.dtype.bits == 16  # int64 sums and TFLite's 64-bit requantisation
    req, clamp, acc = (requantise64(em) if wide else requantise(em)), clamp_to(em, 16), "int64_t" if wide else "int32_t"
    (mx, sx), (mh, sh) = fc_multiplier(xt.dtype, wt.dtype), fc_multiplier(ht.dtype, rt.dtype)
    qa = qb = None
    if sums is not None:
        (lines, qa, qb), bias_term = sums(name, x, h, w, r, bias, (mx, sx), (mh, sh)), ""
    else:
        bias_term = f" + ({acc}){em.at(bias, 'j')}" if bias is not None else ""
        lines = [f"{acc} {name}_a = 0, {name}_b = 0;",
                 f"for (long k = 0; k < {xt.size}; ++k) {name}_a += ((int32_t){em.at(x, 'k')} - "
                 f"{xt.dtype.zero_point}) * (int32_t){em.at(w, f'j * {xt.size} + k')};",
                 f"for (long k = 0; k < {ht.size}; ++k) {name}_b += ((int32_t){em.at(h, 'k')} - "
                 f"{ht.dtype.zero_point}) * (int32_t){em.at(r, f'j * {ht.size} + k')};"]
    lines += [  # each sum's int16 widened before adding: int is 16 bits on the AVR
        f"const int32_t {name}_s = {clamp}((int32_t){clamp}({qa or f'{req}({name}_a{bias_term}, {mx}, {sx})'}, "
        f"{INT16_MIN}, {INT16_MAX}) + (int32_t){clamp}({qb or f'{req}({name}_b, {mh}, {sh})'}, {INT16_MIN}, "
        f"{INT16_MAX}), {INT16_MIN}, {INT16_MAX});",
        f"int16_t {name};"]
    return lines + c_int16_block(em, "logistic" if activation == "sigmoid" else "tanh", f"{name}_s", name, 3, 0)


def _c_mul(em, a: str, b: str, multiplier: tuple[int, int], lo: int, hi: int, zero_point: int = 0,
           requant=None) -> str:
    """C for TFLite's MulElementwise of two int16 values; ``requant``: a target kernel's requantisation, called as
    requant(product, multiplier, bound of |product|), giving C or None (the portable one)."""
    product = f"(int32_t){a} * (int32_t){b}"  # a: a sigmoid's output, at most 32767
    quick = requant(product, multiplier, 32767 * 32768) if requant is not None else None
    return (f"{clamp_to(em, 16)}({quick or f'{requantise(em)}({product}, {multiplier[0]}, {multiplier[1]})'} + "
            f"{zero_point}, {lo}, {hi})")


def lstm_cell_c(em, node, sums=None, prologue: list[str] | None = None, requant=None) -> list[str]:
    """lstm_cell's C: a loop over the units; ``sums``: a target kernel's gate sums (``_c_gate``), ``prologue``: its
    lines before the loop, ``requant``: its requantisation of the products (``_c_mul``)."""
    x, h, c, wf, wi, wg, rf, ri, rg, bf, bi, bg = node.inputs
    ct = em.graph.type(c)
    units = ct.size
    body = (_c_gate(em, node, "f", x, h, wf, rf, bf, "sigmoid", sums)
            + _c_gate(em, node, "i", x, h, wi, ri, bi, "sigmoid", sums)
            + _c_gate(em, node, "g", x, h, wg, rg, bg, node.attrs["activation"], sums))
    clip = float(node.attrs["cell_clip"])
    if ct.dtype.is_float:
        body.append(f"float cell = f * {em.at(c, 'j')} + i * g;")
        if clip > 0:
            limit = f"{float(np.float32(clip))!r}f"
            body.append(f"cell = cell > {limit} ? {limit} : (cell < -{limit} ? -{limit} : cell);")
    else:
        scale = float(ct.dtype.qscales[0])
        kept = _c_mul(em, "f", em.at(c, "j"), mul_multiplier(UNIT_SCALE, scale, scale), INT16_MIN, INT16_MAX,
                      requant=requant)
        added = _c_mul(em, "i", "g", mul_multiplier(UNIT_SCALE, UNIT_SCALE, scale), INT16_MIN, INT16_MAX,
                       requant=requant)
        body.append(f"int32_t cell = {clamp_to(em, 16)}((int32_t){kept} + (int32_t){added}, {INT16_MIN}, "
                    f"{INT16_MAX});")
        if clip > 0:
            q = quantised_clip(clip, ct.dtype)
            body.append(f"cell = cell > {q} ? {q} : (cell < {-q} ? {-q} : cell);")
    body.append(f"{em.var(node.name)}[j] = ({'float' if ct.dtype.is_float else 'int16_t'})cell;")
    return (prologue or []) + [f"for (long j = 0; j < {units}; ++j) {{"] + [f"    {line}" for line in body] + ["}"]


def lstm_hidden_c(em, node, sums=None, prologue: list[str] | None = None, requant=None) -> list[str]:
    """lstm_hidden's C, as ``lstm_cell_c``."""
    x, h, c, wo, ro, bo = node.inputs
    ct, out = em.graph.type(c), node.type.dtype
    body = _c_gate(em, node, "o", x, h, wo, ro, bo, "sigmoid", sums)
    if out.is_float:
        body.append(f"{em.var(node.name)}[j] = tanhf({em.at(c, 'j')}) * o;")
    else:
        body += ["int16_t squashed;"] + c_int16_block(em, "tanh", em.at(c, "j"), "squashed",
                                                          *cell_tanh_parameters(ct.dtype))
        lo, hi = out.integer_range
        body.append(f"{em.var(node.name)}[j] = (int{out.bits}_t)" + _c_mul(
            em, "o", "squashed", mul_multiplier(UNIT_SCALE, UNIT_SCALE, float(out.qscales[0])), lo, hi,
            out.zero_point, requant) + ";")
    return (prologue or []) + [f"for (long j = 0; j < {ct.size}; ++j) {{"] + [f"    {line}" for line in body] + ["}"]


register_op(OpDef(
    "lstm_cell", 12, _infer_cell, _cell_float, {"activation": "str", "cell_clip": "float"},
    "one time step of TFLite's LSTM, its new cell state: inputs x, h, c, the input weights of the forget, input and "
    "cell gates, their recurrent weights, their biases; integer: TFLite Micro's int8/int16 kernel",
    evaluate_rows=lambda ins, batched, attrs, n, rank: _cell_float(ins, attrs), fixed=_cell_fixed,
    c={"fixed": lstm_cell_c, "float": lstm_cell_c},
    unsupported={"interval": NO_RANGES, "acc_bound": NO_ACCUMULATOR}))

register_op(OpDef(
    "lstm_hidden", 6, _infer_hidden, _hidden_float, {},
    "one time step of TFLite's LSTM, its new hidden state: inputs x, h, the new c, the output gate's input and "
    "recurrent weights and bias; integer: TFLite Micro's int8/int16 kernel",
    evaluate_rows=lambda ins, batched, attrs, n, rank: _hidden_float(ins, attrs), fixed=_hidden_fixed,
    c={"fixed": lstm_hidden_c, "float": lstm_hidden_c},
    unsupported={"interval": NO_RANGES, "acc_bound": NO_ACCUMULATOR}))


# ---------------------------------------------------------------- the TFLite operator

LSTM_OPTIONS = 71  # schema.fbs' BuiltinOptions: UnidirectionalSequenceLSTMOptions
INPUT, HIDDEN, CELL = 0, 18, 19
# gate -> (input weight, recurrent weight, bias): the operator's input indices
GATES = {"input": (1, 5, 12), "forget": (2, 6, 13), "cell": (3, 7, 14), "output": (4, 8, 15)}
ABSENT = (9, 10, 11, 16, 17, 20, 21, 22, 23)  # peepholes, projection, layer norms: TFLite Micro's kernel takes none


@tflite_builtin("UNIDIRECTIONAL_SEQUENCE_LSTM", 44, options=LSTM_OPTIONS, inputs=(24, 24), optional=ABSENT)
def lower_tflite(low, options, ins, outs) -> None:
    op = "UNIDIRECTIONAL_SEQUENCE_LSTM"
    present = [k for k in ABSENT if ins[k] >= 0]
    need(not present, f"{op}: inputs {present} (peepholes, projection, layer normalisation): TFLite Micro's kernel "
                      "takes none")
    x, out = low.tensors[ins[INPUT]], low.tensors[outs[0]]
    code = int(options.scalar(0, "b", 0, "fused_activation_function")) if options is not None else 0
    need(code in ACTIVATIONS, f"{op}: the cell gate's activation {code} (TFLite Micro computes TANH, 4; with any "
                              "other it applies none)")
    cell_clip = float(options.scalar(1, "f", 0.0, "cell_clip")) if options is not None else 0.0
    time_major = bool(options.scalar(3, "B", 0, "time_major")) if options is not None else False
    need(len(x.shape) == 3, f"{op}: an input of shape {list(x.shape)} (3 dimensions: batch, time, features)")
    steps, batch = (x.shape[0], x.shape[1]) if time_major else (x.shape[1], x.shape[0])
    need(batch == 1, f"{op}: a batch of {batch} (one sequence is supported)")
    need(x.type_name in ("float32", "int8", "int16"), f"{op}: {x.type_name} activations")
    hidden, cell = low.tensors[ins[HIDDEN]], low.tensors[ins[CELL]]
    need(hidden.variable and cell.variable, f"{op}: the hidden and cell states must be variable tensors")
    need(out.type_name == hidden.type_name and np.array_equal(out.scales, hidden.scales)
         and np.array_equal(out.zero_points, hidden.zero_points),
         f"{op}: the output is the hidden state copied: it must share its type and quantisation")
    units = hidden.shape[-1]
    need(list(out.shape) == ([steps, 1, units] if time_major else [1, steps, units]),
         f"{op}: the output declares shape {list(out.shape)} for {steps} steps of {units} units")
    name = low.name_of(out)
    h = h_state = variable_state(low, ins[HIDDEN], f"{name}_hidden")
    c = c_state = variable_state(low, ins[CELL], f"{name}_cell")
    weights = {gate: [low.value(ins[k], "") for k in indices] for gate, indices in GATES.items()}
    if x.type_name != "float32":  # sums TFLite would wrap (int32) or leave its requantisation's range (int64)
        bits = 64 if x.type_name == "int16" else 32
        for w_index, r_index, b_index in GATES.values():
            for source_index, weight_index, bias_index in ((INPUT, w_index, b_index), (HIDDEN, r_index, -1)):
                data = low.tensors[ins[weight_index]].data
                if data is not None:
                    low.check_accumulator(ins[source_index], ins[bias_index] if bias_index >= 0 else -1, data,
                                          out, bits)
    source = low.value(ins[INPUT])
    parts = []
    for t in range(steps):
        begin = [t, 0, 0] if time_major else [0, t, 0]
        x_t = low.step("strided_slice", [source], {"begin": begin, "stride": [1, 1, 1], "count": [1, 1, x.shape[2]],
                                                   "shape": [x.shape[2]]}, (x.shape[2],), x, f"{name}_x{t}")
        try:
            c = low.graph.add("lstm_cell", [x_t, h, c, *(weights[g][0] for g in ("forget", "input", "cell")),
                                            *(weights[g][1] for g in ("forget", "input", "cell")),
                                            *(weights[g][2] for g in ("forget", "input", "cell"))],
                              {"activation": ACTIVATIONS[code], "cell_clip": cell_clip}, name=f"{name}_c{t}")
            h = low.graph.add("lstm_hidden", [x_t, h, c, *weights["output"]], {}, name=f"{name}_h{t}")
        except ValueError as exc:
            need(False, f"{op}: {exc}")
        parts.append(low.step("reshape", [h], {"shape": [1, 1, units]}, (1, 1, units), out, f"{name}_out{t}"))
    low.graph.set_next_state(h_state, h)
    low.graph.set_next_state(c_state, c)
    axis = 0 if time_major else 1
    if steps == 1:
        low.add("reshape", parts, {"shape": list(out.shape)}, out)
        return
    joined = parts[0]
    for t, part in enumerate(parts[1:], start=1):
        shape = [t + 1, 1, units] if time_major else [1, t + 1, units]
        if t < steps - 1:
            joined = low.step("concatenation", [joined, part], {"axis": axis}, shape, out, f"{name}_seq{t}")
        else:
            low.add("concatenation", [joined, part], {"axis": axis}, out)
