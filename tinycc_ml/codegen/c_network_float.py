"""C for the network ops in float (a float network compiled at precision float): entries of ``C_CODE["float"]``.

The float interpreter's arithmetic in float32: a layer's window sums, plus its bias, then the fused activation;
averages as sum / count; softmax as exp(beta (x - max)) over its sum (``expf``). Equal to the interpreter within
float32 rounding. The loops and window geometry are the int8 kernels' (``c_network``).
"""

from __future__ import annotations

from tinycc_ml.codegen.c_network import (
    concatenation,
    conv_layer,
    dense_layer,
    depthwise_layer,
    padded_copy,
    pool_window,
    require_computed,
    reshape,
    transpose,
    window_loops,
)
from tinycc_ml.codegen.emitter import C_CODE, CEmitter, c_float
from tinycc_ml.ir.graph import Node


def _activated(activation: str, expr: str) -> str:
    """The fused activation of a float expression (a plain variable: it is read twice or three times)."""
    if activation == "relu":
        return f"({expr} < 0.0f ? 0.0f : {expr})"
    if activation == "relu6":
        return f"({expr} < 0.0f ? 0.0f : ({expr} > 6.0f ? 6.0f : {expr}))"
    return expr


def _mac(w: str, x: str) -> str:
    return f"acc += {w} * {x};"


def _store(node: Node):
    return lambda: _activated(node.attrs.get("activation", "none"), "acc")


def conv2d(em: CEmitter, node: Node) -> list[str]:
    return conv_layer(em, node, "float acc = 0.0f;", "float", _mac, _store(node))


def depthwise_conv2d(em: CEmitter, node: Node) -> list[str]:
    return depthwise_layer(em, node, "float acc = 0.0f;", _mac, _store(node))


def fully_connected(em: CEmitter, node: Node) -> list[str]:
    return dense_layer(em, node, "float acc = 0.0f;", "float", lambda w, x: f"{w} * {x}", _store(node))


def average_pool2d(em: CEmitter, node: Node) -> list[str]:
    pool = pool_window(em, node)
    body = [*pool.clip,
            "const float count = (float)((fy1 - fy0) * (fx1 - fx0));",
            f"for (int c = 0; c < {pool.channels}; ++c) {{",
            "    float sum = 0.0f, average;",
            "    for (int fy = fy0; fy < fy1; ++fy)",
            "    for (int fx = fx0; fx < fx1; ++fx)",
            f"        sum += {pool.tap};",
            "    average = sum / count;",
            f"    {em.var(node.name)}[pos + c] = {_activated(node.attrs.get('activation', 'none'), 'average')};",
            "}"]
    return window_loops(em, node, pool.window, pool.channels, body)


def max_pool2d(em: CEmitter, node: Node) -> list[str]:
    pool = pool_window(em, node)
    body = [*pool.clip,
            f"for (int c = 0; c < {pool.channels}; ++c) {{",
            "    float largest = -3.40282347e38f;",  # every window holds at least one element of the input
            "    for (int fy = fy0; fy < fy1; ++fy)",
            "    for (int fx = fx0; fx < fx1; ++fx) {",
            f"        const float v = {pool.tap};",
            "        if (v > largest) largest = v;",
            "    }",
            f"    {em.var(node.name)}[pos + c] = {_activated(node.attrs.get('activation', 'none'), 'largest')};",
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
            "        float sum = 0.0f;",
            f"        for (long i = 0; i < {count}; ++i)",
            f"            sum += {em.var(x_name)}[((long)b * {count} + i) * {channels} + c];",
            f"        {em.var(node.name)}[b * {channels} + c] = sum / {c_float(count)};",
            "    }",
            "}"]


def tensor_add(em: CEmitter, node: Node) -> list[str]:
    a_name, b_name = node.inputs
    return [f"for (long i = 0; i < {node.type.size}; ++i) {{",
            f"    const float v = {em.at(a_name, 'i')} + {em.at(b_name, 'i')};",
            f"    {em.var(node.name)}[i] = {_activated(node.attrs.get('activation', 'none'), 'v')};",
            "}"]


def activation(em: CEmitter, node: Node) -> list[str]:
    (x_name,) = node.inputs
    return [f"for (long i = 0; i < {node.type.size}; ++i) {{",
            f"    const float v = {em.at(x_name, 'i')};",
            f"    {em.var(node.name)}[i] = {_activated(node.op, 'v')};",
            "}"]


def softmax(em: CEmitter, node: Node) -> list[str]:
    (x_name,) = node.inputs
    require_computed(em, node, x_name)
    depth = em.graph.type(x_name).shape[-1]
    beta = c_float(float(node.attrs["beta"]))
    xs, out = em.var(x_name), em.var(node.name)
    return ["{",
            f"    for (long r = 0; r < {node.type.size // depth}; ++r) {{",
            f"        const float *in = {xs} + r * {depth};",
            "        float largest = in[0], sum = 0.0f;",
            f"        for (int i = 1; i < {depth}; ++i)",
            "            if (in[i] > largest) largest = in[i];",
            f"        for (int i = 0; i < {depth}; ++i) {{",
            f"            {out}[r * {depth} + i] = expf({beta} * (in[i] - largest));",
            f"            sum += {out}[r * {depth} + i];",
            "        }",
            f"        for (int i = 0; i < {depth}; ++i)",
            f"            {out}[r * {depth} + i] /= sum;",
            "    }",
            "}"]


def pad(em: CEmitter, node: Node) -> list[str]:
    return padded_copy(em, node, c_float(float(node.attrs.get("fill", 0.0))))


C_CODE["float"].update({
    "conv2d": conv2d, "depthwise_conv2d": depthwise_conv2d, "fully_connected": fully_connected,
    "average_pool2d": average_pool2d, "max_pool2d": max_pool2d, "mean": mean, "tensor_add": tensor_add,
    "relu": activation, "relu6": activation, "softmax": softmax, "pad": pad, "reshape": reshape,
    "transpose": transpose, "concatenation": concatenation,
})
