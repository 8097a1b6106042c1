"""Cortex-M4 / M33 kernel for TFLite's int8 TRANSPOSE (the ``transpose`` op), byte for byte the shared C's
(codegen/c_network.py) and so tflite-micro's.

One function per layer (``m4_transpose_<layer>``), its geometry unrolled at compile time: axes of extent 1
dropped, output axes merged where they read neighbouring input axes in order (a run contiguous in both
tensors), the output written in order. Where the innermost output axis reads consecutive input bytes the run
is copied in words (``m4_pad``'s copy: 16 bytes per LDM / STM where aligned); else its bytes are gathered at a
literal stride, the loop unrolled up to 64 bytes (one LDRB and one STRB a byte, literal offsets).
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.arm.m4_pad import copy_helpers
from tinycc_ml.target import Node

UNROLL = 64  # bytes of a strided run gathered without a loop


def transpose_axes(shape, perm) -> list[tuple[int, int]]:
    """The output's axes as (extent, input stride), extent-1 axes dropped, neighbours merged where the input
    continues them in order."""
    strides = [int(np.prod(shape[k + 1:], dtype=np.int64)) for k in range(len(shape))]
    axes: list[tuple[int, int]] = []
    for axis in perm:
        extent, stride = int(shape[axis]), strides[axis]
        if extent == 1:
            continue
        if axes and axes[-1][1] == stride * extent:  # the previous output axis steps over this one's run
            axes[-1] = (axes[-1][0] * extent, stride)
            continue
        axes.append((extent, stride))
    return axes or [(1, 1)]


def transpose_claims(em, node: Node) -> bool:
    (x,) = node.inputs
    t = em.graph.type(x)
    return (t.dtype.is_quantised and t.dtype.bits == 8 and em.graph.op(x) not in ("const", "sparse_const")
            and x not in em.inline_values)


def transpose(em, node: Node) -> list[str] | None:
    (x_name,) = node.inputs
    x = em.graph.type(x_name)
    perm = [int(p) for p in node.attrs["perm"]]
    axes = transpose_axes(x.shape, perm)
    n, step = axes[-1]
    copy, _ = copy_helpers(em)
    lines, indent, terms = [], "    ", []
    for depth, (extent, stride) in enumerate(axes[:-1]):
        lines.append(f"{indent}for (int32_t a{depth} = 0; a{depth} < {extent}; ++a{depth})")
        indent += "    "
        terms.append(f"a{depth} * {stride}")
    lines.append(f"{indent}{{")
    lines.append(f"{indent}    const int8_t *p = x + {' + '.join(terms) or '0'};")
    if step == 1:
        lines.append(f"{indent}    {copy}(o, p, {n}); o += {n};")
    elif n <= UNROLL:
        lines += [f"{indent}    o[{k}] = p[{k * step}];" for k in range(n)] + [f"{indent}    o += {n};"]
    else:
        lines.append(f"{indent}    for (int32_t k = 0; k < {n}; ++k) *o++ = p[k * {step}];")
    lines.append(f"{indent}}}")
    symbol = em.sym(f"m4_transpose_{node.name}")
    em.helpers[symbol] = "\n".join([
        f"/* %{node.name}: TFLite's int8 TRANSPOSE {'x'.join(map(str, x.shape))} by {perm}: "
        f"{' x '.join(f'{e} (input stride {s})' for e, s in axes)} */",
        f'__attribute__((optimize("O2"), noinline)) static void {symbol}(const int8_t *x, int8_t *o)', "{",
        *lines, "}", ""])
    return [f"{symbol}({em.var(x_name)}, {em.var(node.name)});"]
