"""MAXIMUM and MINIMUM: the elementwise larger (smaller) of two broadcast tensors (``broadcast``).

TFLite Micro compares the stored values as they are (``std::max``/``std::min`` of floats, or of the integers
whatever their quantisation: it has no Prepare). So the int8 forms here require one quantisation for both
operands and the result, where the integers' order is the reals' order; other files are refused by name, as
the converter never writes them.
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.ir.ops.convolution import NO_ACCUMULATOR, NO_RANGES
from tinycc_ml.ir.ops.frontends import tflite_builtin
from tinycc_ml.ir.ops.network.broadcast import binary_result, c_loop, c_pow2, pow2_fixed, with_rows_aligned
from tinycc_ml.ir.ops.registry import OpDef, need, register_op

# std::max(a, b) is (a < b) ? b : a; std::min(a, b) is (b < a) ? b : a: a NaN first operand is kept by both
PICK = {"tensor_maximum": (lambda a, b: np.where(a < b, b, a), "({a} < {b}) ? {b} : {a}"),
        "tensor_minimum": (lambda a, b: np.where(b < a, b, a), "({b} < {a}) ? {b} : {a}")}


def _infer(name: str):
    def infer(ts, attrs, declared):
        result = binary_result(ts, declared, name)
        a, b = ts
        need(not a.dtype.is_quantised or a.dtype == b.dtype == result.dtype, f"{name} compares the stored integers: "
             f"its operands and result need one quantisation, got {a.dtype}, {b.dtype} and {result.dtype}")
        return result
    return infer


def _register(name: str, tflite: str, code: int) -> None:
    pick, c_text = PICK[name]

    def c(em, node):
        if node.type.dtype.is_fixed:
            return c_pow2(em, node, lambda a, b: "(" + c_text.format(a=a, b=b) + ")")
        return c_loop(em, node, lambda a, b: "(" + c_text.format(a=a, b=b) + ")")

    def fixed(call):
        if call.type.dtype.is_fixed:
            return pow2_fixed(call, name, pick)
        return pick(*with_rows_aligned(call.ins, call.in_types))

    register_op(OpDef(
        name, 2, _infer(name), lambda xs, attrs: pick(np.asarray(xs[0]), np.asarray(xs[1])), {},
        f"TFLite's {tflite}: the elementwise {'larger' if name == 'tensor_maximum' else 'smaller'} of two broadcast "
        "tensors, compared as stored (int8: operands and result of one quantisation)",
        evaluate_rows=lambda ins, batched, attrs, n, rank: pick(*ins) if all(batched) else None,
        fixed=fixed, c={"fixed": c, "float": c},
        unsupported={"interval": NO_RANGES, "acc_bound": NO_ACCUMULATOR}))

    @tflite_builtin(tflite, code, inputs=(2, 2))
    def lower(low, options, ins, outs) -> None:
        low.add(name, [low.value(ins[0]), low.value(ins[1])], {}, low.tensors[outs[0]])


_register("tensor_maximum", "MAXIMUM", 55)
_register("tensor_minimum", "MINIMUM", 57)
