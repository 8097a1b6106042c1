"""ADD, MUL and DIV of plain (unquantised) integer tensors, broadcast (``broadcast``), and CAST between plain
integers and to float.

TFLite Micro computes them in the tensors' own type (int32 here: the audio front end's arithmetic after its
signal ops): a + b, a * b, a / b (C's division, truncating toward zero), clamped by the fused activation's
range (relu: at least 0; relu6: 0 to 6), wrapping in two's complement where the C would overflow. A divisor is
a constant without zeros (a zero would be undefined behaviour in TFLite Micro). CAST converts as C's
static_cast does: integers modulo 2^bits, integers to float32 rounded to nearest.
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.ir.ops.c_primitives import c_helper
from tinycc_ml.ir.ops.convolution import NO_ACCUMULATOR, NO_RANGES
from tinycc_ml.ir.ops.frontends import tflite_builtin
from tinycc_ml.ir.ops.network.broadcast import broadcast_shape, c_loop, with_rows
from tinycc_ml.ir.ops.network.float_binary import lower_float_div
from tinycc_ml.ir.ops.registry import OpDef, TypeRuleError, need, register_op
from tinycc_ml.ir.ops.signal.common import wrap
from tinycc_ml.ir.types import TensorType, integer

DIV_OPTIONS = 29  # schema.fbs' BuiltinOptions: DivOptions { fused_activation_function }
INTEGER_OPS = {"integer_add": ("+", np.add), "integer_mul": ("*", np.multiply), "integer_div": ("/", None)}
INT32 = integer(32)  # the float semantics' type (the interpreters' float path carries no types)
UNSUPPORTED = {"interval": NO_RANGES, "acc_bound": NO_ACCUMULATOR, "c_float": "plain integers compute in integers"}


def _infer(name: str):
    def infer(ts, attrs, declared):
        a, b = ts
        need(a.dtype.is_integer and a.dtype == b.dtype and a.dtype.bits <= 32,
             f"{name} takes plain integers of one type up to 32 bits, got {a.dtype} and {b.dtype}")
        need(attrs.get("activation", "none") in ("none", "relu", "relu6"), f"activation {attrs.get('activation')!r}")
        shape = broadcast_shape(a.shape, b.shape, name)
        need(declared is None or declared.dtype == a.dtype, f"the result is {a.dtype}, the file declares {declared}")
        return TensorType(shape, a.dtype, a.layout if a.rank >= b.rank else b.layout)
    return infer


def _clamp(v, dtype, activation: str):
    lo, hi = dtype.integer_range
    if activation != "none":
        lo, hi = 0, 6 if activation == "relu6" else hi
    return np.clip(wrap(v, dtype.bits, dtype.kind == "int"), lo, hi)


def integer_result(name: str, a, b, dtype, activation: str) -> np.ndarray:
    a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
    if name == "integer_div":
        quotient = np.abs(a) // np.abs(b)
        value = np.where((a < 0) != (b < 0), -quotient, quotient)
    else:
        value = INTEGER_OPS[name][1](a, b)
    return _clamp(value, dtype, activation)


def _c(name: str):
    symbol = INTEGER_OPS[name][0]

    def c(em, node) -> list[str]:
        dtype = node.type.dtype
        ctype = f"{'u' if dtype.kind == 'uint' else ''}int{dtype.bits}_t"
        unsigned = f"uint{max(dtype.bits, 32)}_t"
        lo, hi = dtype.integer_range
        activation = node.attrs.get("activation", "none")
        if activation != "none":
            lo, hi = 0, 6 if activation == "relu6" else hi

        def element(a: str, b: str) -> str:
            if name == "integer_div":
                value = f"(({ctype})({a}) / ({ctype})({b}))"
            else:  # computed unsigned: wraps as TFLite's int32 kernels do on two's complement
                value = f"({ctype})({unsigned})(({unsigned})({a}) {symbol} ({unsigned})({b}))"
            if activation == "none":
                return value
            return f"{em.sym('int_clamp')}({value}, {lo}, {hi})"
        if activation != "none":
            em.helpers.setdefault(em.sym("int_clamp"), f"static inline int32_t {em.sym('int_clamp')}(int32_t v, "
                                  "int32_t lo, int32_t hi)\n{\n    return v < lo ? lo : (v > hi ? hi : v);\n}\n")
        return c_loop(em, node, element)
    return c


for _name in INTEGER_OPS:
    register_op(OpDef(
        _name, 2, _infer(_name),
        (lambda n: lambda xs, attrs: integer_result(n, xs[0], xs[1], INT32, attrs.get("activation", "none"))
         .astype(np.float64))(_name), {"activation": "str?"},
        f"TFLite's {_name[8:].upper()} of plain integer tensors, broadcast, in the tensors' type (DIV truncates), "
        "clamped by the fused activation",
        fixed=(lambda n: lambda call: integer_result(n, *with_rows(call.ins, call.in_types), call.type.dtype,
                                                     call.attrs.get("activation", "none")))(_name),
        c={"fixed": _c(_name)}, unsupported=UNSUPPORTED))

def lower_integer(low, op: str, options, ins, outs, activation_field: int, name: str) -> None:
    """ADD, MUL or DIV of plain integers (their lowering where the operands are not quantised)."""
    low.add(op, [low.value(ins[0]), low.value(ins[1])], {"activation": low.activation(options, activation_field, name)},
            low.tensors[outs[0]])


@tflite_builtin("DIV", 42, options=DIV_OPTIONS, inputs=(2, 2))
def lower_div(low, options, ins, outs) -> None:
    divisor = low.tensors[ins[1]]
    if low.tensors[ins[0]].type_name == "float32":
        lower_float_div(low, options, ins, outs)
        return
    if low.tensors[ins[0]].type_name == "int8":  # quantised: TFLite Micro's DivElementwise
        low.add("quantised_div", [low.value(ins[0]), low.value(ins[1])],
                {"activation": low.activation(options, 0, "DIV")}, low.tensors[outs[0]])
        return
    if divisor.data is None or not np.all(divisor.data != 0):
        raise TypeRuleError(f"DIV: the divisor {divisor.name!r} must be a constant without zeros")
    lower_integer(low, "integer_div", options, ins, outs, 0, "DIV")


# ---------------------------------------------------------------- CAST

def _stored(dtype) -> bool:
    """An element type CAST reads or writes as stored integers (TFLite Micro's CAST ignores quantisation)."""
    return dtype.is_integer or dtype.is_quantised or dtype.kind == "bool"


def _infer_cast(ts, attrs, declared):
    (x,) = ts
    need(_stored(x.dtype) or x.dtype.is_float,
         f"CAST from {x.dtype} is not supported (from integers, quantised or not, bool and float32 it is)")
    need(declared is not None and ((_stored(declared.dtype) and declared.dtype.kind != "bool")
                                   or declared.dtype.is_float),
         f"CAST to {declared} is not supported (to integers, quantised or not, and float32 it is)")
    want = None if declared.dtype.is_float else [*declared.dtype.integer_range, int(x.dtype.is_float)]
    need(attrs.get("to") == want, f"attribute to must be {want} (the result's range, 1 from a float), got "
                                  f"{attrs.get('to')}")
    return TensorType(x.shape, declared.dtype, x.layout)


def cast_attributes(x, out) -> dict:
    """The attributes a cast from ``x`` to ``out`` (element types) carries: the float semantics need the result's
    range and whether the source is a float."""
    return {} if out.is_float else {"to": [*out.integer_range, int(x.is_float)]}


def cast(x, dtype) -> np.ndarray:
    """static_cast of each stored value: to float32 rounded; a float to an integer truncated towards zero (saturated
    where the C++ is undefined: out of range; NaN gives 0); an integer to a narrower one modulo 2^bits."""
    x = np.asarray(x)
    if dtype.is_float:
        return np.asarray(x, np.float64).astype(np.float32).astype(np.float64)
    lo, hi = dtype.integer_range
    if x.dtype.kind == "f":
        return np.clip(np.nan_to_num(np.trunc(np.asarray(x, np.float64)), nan=0.0), lo, hi).astype(np.int64)
    return wrap(x, dtype.bits, dtype.kind != "uint")


def _c_cast(em, node) -> list[str]:
    dtype = node.type.dtype
    ctype = "float" if dtype.is_float else f"{'u' if dtype.kind == 'uint' else ''}int{dtype.bits}_t"
    (x,) = node.inputs
    source = em.graph.type(x).dtype
    value = em.at(x, "i")
    if source.is_float and not dtype.is_float:  # truncated towards zero, saturated (no undefined conversion)
        lo, hi = dtype.integer_range
        helper = c_helper(em, f"cast_f_{ctype}", f"""\
static inline {ctype} @cast_f_{ctype}(float v)
{{
    if (!(v == v))
        return 0;
    if (v <= {lo}.0)
        return ({ctype}){lo}{'LL' if dtype.bits == 32 else ''};
    if (v >= {hi}.0)
        return ({ctype}){hi}{'U' if dtype.kind == 'uint' else ''};
    return ({ctype})v;
}}
""")
        return [f"for (long i = 0; i < {node.type.size}; ++i)", f"    {em.var(node.name)}[i] = {helper}({value});"]
    # to a narrower signed type through the unsigned one of its width: modulo 2^bits, as gcc converts
    bits = 8 if source.kind == "bool" else source.bits
    through = "" if dtype.is_float or dtype.kind == "uint" or dtype.bits >= bits else f"(uint{dtype.bits}_t)"
    return [f"for (long i = 0; i < {node.type.size}; ++i)",
            f"    {em.var(node.name)}[i] = ({ctype}){through}{value};"]


def _evaluate_cast(xs, attrs):
    x = np.asarray(xs[0], np.float64)
    if "to" not in attrs:
        return x.astype(np.float32).astype(np.float64)
    lo, hi, from_float = attrs["to"]
    if from_float:
        return np.clip(np.nan_to_num(np.trunc(x), nan=0.0), lo, hi)
    span = hi - lo + 1
    return (np.round(x).astype(np.int64) - lo) % span + lo


register_op(OpDef(
    "cast", 1, _infer_cast, _evaluate_cast, {"to": "ints?"},
    "TFLite's CAST of stored values (quantisation ignored, as TFLite Micro's): to integers modulo 2^bits, float32 to "
    "integers truncated towards zero, to float32 rounded",
    fixed=lambda call: cast(call.ins[0], call.type.dtype), c={"fixed": _c_cast, "float": _c_cast},
    unsupported={"interval": NO_RANGES, "acc_bound": NO_ACCUMULATOR}))


@tflite_builtin("CAST", 53)
def lower_cast(low, options, ins, outs) -> None:
    out = low.tensors[outs[0]]
    low.add("cast", [low.value(ins[0])], cast_attributes(low.dtype(low.tensors[ins[0]]), low.dtype(out)), out)
