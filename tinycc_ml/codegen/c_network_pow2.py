"""C for the network ops in the project's power-of-two fixed point (fx types; ``ir/ops/pow2_arith.py``): entries
of ``C_CODE["fixed"]`` beside TFLite's int8 ones (``c_network``), chosen by the node's type.

Bit for bit the interpreter's: int8/int16 tensors (NHWC, row-major) in the arena, a layer's int32 sum of weight x
input products (int8 products in int16, int16 products in int32: exact) and its bias, shifted right with rounding
(``c_fixed.rshift_c``: the proof keeps |acc| <= 2^30, so the rounding constant cannot overflow), then one clamp
that is the saturation and the fused activation together; pools and means divide as TFLite's int8 kernels do.
"""

from __future__ import annotations

from tinycc_ml.codegen.c_fixed import rshift_c
from tinycc_ml.codegen.c_network import (
    conv_layer,
    dense_layer,
    depthwise_layer,
    padded_copy,
    pool_window,
    require_computed,
    window_loops,
)
from tinycc_ml.codegen.emitter import C_CODE, CEmitter, ctype_of
from tinycc_ml.ir.graph import Node
from tinycc_ml.ir.ops.pow2_arith import activation_bounds, layer_shift


def _clamped(em: CEmitter, node: Node, expr: str, bounds: tuple[int, int] | None = None) -> str:
    """``expr`` (an int32) clamped to ``bounds``, by default the result's width and its fused activation (the
    saturation and the activation in one clamp: the activation's bounds lie within the width's)."""
    dtype = node.type.dtype
    lo, hi = bounds or activation_bounds(node.attrs.get("activation", "none"), dtype)
    symbol = em.sym(f"fx_clamp{dtype.bits}")
    if symbol not in em.helpers:
        em.helpers[symbol] = (f"static inline int{dtype.bits}_t {symbol}(int32_t v, int32_t lo, int32_t hi)\n{{\n"
                              f"    return (int{dtype.bits}_t)(v < lo ? lo : (v > hi ? hi : v));\n}}\n")
    return f"{symbol}({expr}, INT32_C({lo}), INT32_C({hi}))"


def _product(em: CEmitter, node: Node, w: str, x: str) -> str:
    """An exact weight x input product: int8 operands multiply in int16, int16 ones in int32."""
    ptype = "int16_t" if em.graph.type(node.inputs[0]).dtype.bits == 8 else "int32_t"
    return f"({ptype})(({ptype}){w} * ({ptype}){x})"


def layer_store(em: CEmitter, node: Node) -> str:
    x, w = em.graph.type(node.inputs[0]), em.graph.type(node.inputs[1])
    return _clamped(em, node, rshift_c("acc", layer_shift(x, w, node.type)))


def _mac(em: CEmitter, node: Node):
    return lambda w, x: f"acc += {_product(em, node, w, x)};"


def conv2d(em: CEmitter, node: Node) -> list[str]:
    element = ctype_of(em.graph.type(node.inputs[0]).dtype)
    return conv_layer(em, node, "int32_t acc = 0;", element, _mac(em, node), lambda: layer_store(em, node))


def depthwise_conv2d(em: CEmitter, node: Node) -> list[str]:
    return depthwise_layer(em, node, "int32_t acc = 0;", _mac(em, node), lambda: layer_store(em, node))


def fully_connected(em: CEmitter, node: Node) -> list[str]:
    element = ctype_of(em.graph.type(node.inputs[0]).dtype)
    return dense_layer(em, node, "int32_t acc = 0;", element, lambda w, x: _product(em, node, w, x),
                       lambda: layer_store(em, node))


ROUNDED_AVERAGE = "sum > 0 ? (sum + count / 2) / count : (sum - count / 2) / count"  # pow2_arith.rounded_division


def average_pool2d(em: CEmitter, node: Node) -> list[str]:
    pool = pool_window(em, node)
    body = [*pool.clip,
            "const int32_t count = (int32_t)((fy1 - fy0) * (fx1 - fx0));",
            f"for (int c = 0; c < {pool.channels}; ++c) {{",
            "    int32_t sum = 0;",
            "    for (int fy = fy0; fy < fy1; ++fy)",
            "    for (int fx = fx0; fx < fx1; ++fx)",
            f"        sum += {pool.tap};",
            f"    {em.var(node.name)}[pos + c] = {_clamped(em, node, f'({ROUNDED_AVERAGE})')};",
            "}"]
    return window_loops(em, node, pool.window, pool.channels, body)


def max_pool2d(em: CEmitter, node: Node) -> list[str]:
    pool = pool_window(em, node)
    lowest = -(2 ** (node.type.dtype.bits - 1))
    body = [*pool.clip,
            f"for (int c = 0; c < {pool.channels}; ++c) {{",
            f"    int32_t largest = {lowest};",
            "    for (int fy = fy0; fy < fy1; ++fy)",
            "    for (int fx = fx0; fx < fx1; ++fx) {",
            f"        const int32_t v = {pool.tap};",
            "        if (v > largest) largest = v;",
            "    }",
            f"    {em.var(node.name)}[pos + c] = {_clamped(em, node, 'largest')};",
            "}"]
    return window_loops(em, node, pool.window, pool.channels, body)


def mean(em: CEmitter, node: Node) -> list[str]:
    (x_name,) = node.inputs
    require_computed(em, node, x_name)
    batch, height, width, channels = em.graph.type(x_name).shape
    count = height * width
    return ["{",
            f"    for (int b = 0; b < {batch}; ++b)",
            f"    for (int c = 0; c < {channels}; ++c) {{",
            f"        const int32_t count = {count};",
            "        int32_t sum = 0;",
            f"        for (long i = 0; i < {count}; ++i)",
            f"            sum += {em.var(x_name)}[((long)b * {count} + i) * {channels} + c];",
            f"        {em.var(node.name)}[b * {channels} + c] = {_clamped(em, node, f'({ROUNDED_AVERAGE})')};",
            "    }",
            "}"]


def tensor_add(em: CEmitter, node: Node) -> list[str]:
    a_name, b_name = node.inputs
    terms = [rshift_c(f"(int32_t){em.at(n, 'i')}", em.graph.type(n).dtype.scale - node.type.dtype.scale)
             for n in (a_name, b_name)]
    return [f"for (long i = 0; i < {node.type.size}; ++i)",
            f"    {em.var(node.name)}[i] = {_clamped(em, node, ' + '.join(terms))};"]


def activation(em: CEmitter, node: Node) -> list[str]:
    """relu and relu6: the integers clamped, their type kept."""
    (x_name,) = node.inputs
    value = f"(int32_t){em.at(x_name, 'i')}"
    return [f"for (long i = 0; i < {node.type.size}; ++i)",
            f"    {em.var(node.name)}[i] = {_clamped(em, node, value, activation_bounds(node.op, node.type.dtype))};"]


def pad(em: CEmitter, node: Node) -> list[str]:
    return padded_copy(em, node, "0")


POW2_CODE = {"conv2d": conv2d, "depthwise_conv2d": depthwise_conv2d, "fully_connected": fully_connected,
             "average_pool2d": average_pool2d, "max_pool2d": max_pool2d, "mean": mean, "tensor_add": tensor_add,
             "relu": activation, "relu6": activation, "pad": pad}


def by_dialect(tflite, pow2):
    """An op's fixed-precision C: the project's for fx types, TFLite's for quantised ones."""
    def code(em: CEmitter, node: Node) -> list[str]:
        return pow2(em, node) if node.type.dtype.is_fixed else tflite(em, node)
    code.__name__ = getattr(tflite, "__name__", "code")
    return code


for _op, _code in POW2_CODE.items():
    C_CODE["fixed"][_op] = by_dialect(C_CODE["fixed"][_op], _code)
