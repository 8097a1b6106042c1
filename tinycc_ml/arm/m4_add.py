"""Cortex-M4 / M33 kernel for TFLite's int8 ADD of two computed tensors of one shape (a residual connection), bit
for bit TFLite's (tinycc_ml/ir/ops/tensor_elementwise.py's tensor_add with TFLite's quantisation).

TFLite rescales each input's byte on its own ((x - zp) << 20, then its multiplier and shift), so a layer keeps
each input's rescaled value by byte in a table of 256 words (computed at compile time as TFLite does), stored
already shifted left by the output's left shift + 1 (SMMLAR's doubling). One asm loop per layer, two elements a
step: LDRB of each input byte and LDR of each table entry back to back (pipelined), then per element ADD, the
sign's correction added to the rounding nudge (which also carries the output zero point times 2^r), SMMLAR, SSAT
with ASR #r, the activation's bounds where narrower than int8, STRB: about 10 cycles an element against about 18
for the C loop it replaced (ResNet-8's three ADDs: 524 K modelled cycles before). The high product is exact only
for accumulators the int8 ranges bound (``m4_network.requant_bound``); other layers take the shared C. The
tables cost 2 KB of flash per layer: the default build (``optimize="size"``) takes the kernel only for tensors of
at least that many elements (a residual connection: ResNet-8's are 4 K to 16 K), so that the many small ADDs of an
unrolled recurrent network get a C loop of their own (each rescaling on SMMLAR, about 20 cycles an element);
``optimize="speed"`` takes the tables for every size.
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.arm.m4_network import minmax_helpers, requant_bound, requant_call, rq_helper, saturated
from tinycc_ml.target import Node, add_quantisation, multiply_by_quantized_multiplier

TABLE_BYTES = 2 * 256 * 4  # the two inputs' tables of 256 int32


def _unroll(size: int) -> int:
    return next(u for u in (4, 2, 1) if size % u == 0)


def rescaled_add(em, node: Node, q, bits: int, stem: str, comment: str) -> list[str]:
    """TFLite's ADD element by element, each input's rescaling and the sum's on SMMLAR (m4_network's m4_rq, proven
    exact by the caller from the tensors' ranges), in C: int8 (a small ADD: no tables) and int16 (m4_network16)."""
    (ma, sa), (mb, sb), (mo, so) = q.requants
    za, zb, zo = q.zero_points
    ctype = f"int{bits}_t"
    scale = rq_helper(em, wide=False)
    minmax_helpers(em)
    a, b = (em.var(n) for n in node.inputs)
    symbol = em.sym(f"{stem}_{node.name}")
    em.helpers[symbol] = "\n".join([
        f"/* %{node.name}: {comment} */",
        f'__attribute__((optimize("O2"))) static void {symbol}(const {ctype} *a, const {ctype} *b, {ctype} *out)',
        "{",
        f"    for (int32_t i = 0; i < {node.type.size}; ++i) {{",
        f"        const int32_t ra = {requant_call(scale, f'((int32_t)a[i] - {za}) * {1 << q.left_shift}', ma, sa)};",
        f"        const int32_t rb = {requant_call(scale, f'((int32_t)b[i] - {zb}) * {1 << q.left_shift}', mb, sb)};",
        f"        const int32_t v = {requant_call(scale, 'ra + rb', mo, so)} + {zo};",
        f"        out[i] = ({ctype}){saturated('v', q.lo, q.hi, bits)};".replace("@", em.prefix + "_"),
        "    }", "}", ""])
    return [f"{symbol}({a}, {b}, {em.var(node.name)});"]


def tensor_add(em, node: Node) -> list[str] | None:
    g = em.graph
    a_name, b_name = node.inputs
    if any(g.op(i) in ("const", "sparse_const") for i in node.inputs) or g.type(a_name).shape != g.type(b_name).shape:
        return None
    q = add_quantisation(g, node)
    (ma, sa), (mb, sb), (mo, so) = q.requants
    bound_a = requant_bound(255 << q.left_shift, ma, sa)
    bound_b = requant_bound(255 << q.left_shift, mb, sb)
    if bound_a is None or bound_b is None or requant_bound(bound_a + bound_b, mo, so) is None:
        return None
    za, zb, zo = q.zero_points
    if node.type.size < TABLE_BYTES and g.analyses.optimize != "speed":
        return rescaled_add(em, node, q, 8, "m4_addc", f"TFLite's int8 ADD of {node.type.size} elements, rescaled "
                            "on SMMLAR")  # the tables would outweigh the tensor
    left, right = max(so, 0), max(-so, 0)
    byte = np.arange(256).astype(np.uint8).view(np.int8).astype(np.int64)  # a byte's int8 value, by its uint8
    tables = [em.add_const_array(em.sym(f"{node.name}_m4{side}"), (multiply_by_quantized_multiplier(
        (byte - z) << q.left_shift, m, s) << (left + 1)).astype(np.int32), "int32_t",
        f"%{node.name}: input {side}'s rescaled value by its byte, shifted left by {left + 1}")
        for side, z, m, s in (("a", za, ma, sa), ("b", zb, mb, sb))]
    # SMMLAR's addend: the rounding nudge of the shift right by r and the output zero point, both times 2^r
    # pre-added; the sign correction (TFLite rounds half away from zero) added per element where r > 0
    addend = ((1 << (right - 1)) if right else 0) + (zo << right)
    def finish(x: str, y: str) -> list[str]:
        """The requantisation of the sum in register x (y a scratch register), its clamp and store."""
        lines = [f"add %[{y}], %[k], %[{x}], asr #31", f"smmlar %[{y}], %[{x}], %[m], %[{y}]",
                 f"ssat %[{y}], #8, %[{y}], asr #{right}"] if right else \
            [f"smmlar %[{y}], %[{x}], %[m], %[k]", f"ssat %[{y}], #8, %[{y}]"]
        if q.lo > -128:
            lines += [f"cmp %[{y}], %[lo]", "it lt", f"movlt %[{y}], %[lo]"]
        if q.hi < 127:
            lines += [f"cmp %[{y}], %[hi]", "it gt", f"movgt %[{y}], %[hi]"]
        return lines + [f"strb %[{y}], [%[o]], #1"]

    def elements(count: int) -> list[str]:
        """``count`` (1 or 2) elements: every byte load, then every table load (back to back, pipelined)."""
        regs = [("x", "y"), ("u", "v")][:count]
        loads = [f"ldrb %[{r}], [%[{p}]], #1" for x, y in regs for r, p in ((x, "a"), (y, "b"))]
        loads += [f"ldr %[{r}], [%[{t}], %[{r}], lsl #2]" for x, y in regs for r, t in ((x, "ta"), (y, "tb"))]
        return loads + [line for x, y in regs for line in [f"add %[{x}], %[{x}], %[{y}]", *finish(x, y)]]

    bounds = [f'[{name}] "r"((int32_t){value})' for name, value, narrower in
              (("lo", q.lo, q.lo > -128), ("hi", q.hi, q.hi < 127)) if narrower]
    unroll = _unroll(node.type.size)
    body = [line for _ in range(unroll // 2) for line in elements(2)] if unroll > 1 else elements(1)
    body += ["subs %[n], %[n], #1", "bne 1b"]
    symbol = em.sym(f"m4_add_{node.name}")
    em.helpers[symbol] = "\n".join([
        f"/* %{node.name}: TFLite's int8 ADD of {node.type.size} elements, {unroll} a step */",
        f"__attribute__((noinline)) static void {symbol}(const uint8_t *a, const uint8_t *b, int8_t *o)",
        "{",
        f"    int32_t n = {node.type.size // unroll}, x, y, u, v;",
        "    __asm__ volatile(",
        '        "1:\\n\\t"',
        *(f'        "{line}\\n\\t"' for line in body[:-1]),
        f'        "{body[-1]}"',
        '        : [a] "+&r"(a), [b] "+&r"(b), [o] "+&r"(o), [n] "+&r"(n), [x] "=&r"(x), [y] "=&r"(y), '
        '[u] "=&r"(u), [v] "=&r"(v)',
        f'        : [ta] "r"({tables[0]}), [tb] "r"({tables[1]}), [m] "r"((int32_t){mo}), '
        f'[k] "r"((int32_t){addend}){"".join(", " + b for b in bounds)}',
        '        : "cc", "memory");',
        "}", ""])
    return [f"{symbol}((const uint8_t *){em.var(a_name)}, (const uint8_t *){em.var(b_name)}, "
            f"{em.var(node.name)});"]
