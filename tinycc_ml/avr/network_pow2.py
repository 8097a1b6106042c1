"""ATmega328P kernels for the project's network layers (fx16 and fx8 conv2d and fully_connected:
ir/ops/pow2_arith.py): each filter row inside the input a dot product in assembly, the weights read from flash
with LPM Z+ and the input with LD X+, the products formed from the hardware's 8 x 8 multiplies into a 32-bit
sum (int16: MUL, MULS and two MULSU per product, about 33 cycles; int8: one MULS, about 17), where libgcc's
16 x 16 -> 32 multiply costs about 65 cycles in the shared C.

Bit for bit the shared C's (codegen/c_network_pow2.py): the same int32 sums (the bias first, then the rows),
which the layer's overflow proof bounds in any order, the same rounding shift, saturation and clamp.
"""

from __future__ import annotations

from tinycc_ml.target import Node, clipped_taps, layer_store, require_computed, window_geometry, window_loops

# one product of int16 w (r19:r18) and x (r21:r20) added to the sum %A0..%D0: MULSU leaves the product's sign in
# the carry, which SBC takes from the top byte (the product's sign extension)
MAC16 = ["lpm r18, Z+", "lpm r19, Z+", "ld r20, X+", "ld r21, X+",
         "muls r19, r21", "add %C0, r0", "adc %D0, r1",
         "mul r18, r20", "add %A0, r0", "adc %B0, r1", "adc %C0, %[zero]", "adc %D0, %[zero]",
         "mulsu r19, r20", "sbc %D0, %[zero]", "add %B0, r0", "adc %C0, r1", "adc %D0, %[zero]",
         "mulsu r21, r18", "sbc %D0, %[zero]", "add %B0, r0", "adc %C0, r1", "adc %D0, %[zero]"]
# int8 w (r18) and x (r20): MULS's sign in the carry, taken from bytes 2 and 3
MAC8 = ["lpm r18, Z+", "ld r20, X+", "muls r18, r20", "sbc %C0, %[zero]", "sbc %D0, %[zero]",
        "add %A0, r0", "adc %B0, r1", "adc %C0, %[zero]", "adc %D0, %[zero]"]


def avr_layer(em, node: Node) -> bool:
    """A layer of the project's fixed point reading a computed input and constant weights."""
    g = em.graph
    return node.type.dtype.is_fixed and g.op(node.inputs[0]) not in ("const", "sparse_const") and \
        g.op(node.inputs[1]) == "const"


def dot(em, bits: int) -> str:
    """@avr_dot<bits>(w, x, n, acc): acc + the dot product of n weights in flash and n inputs."""
    symbol = em.sym(f"avr_dot{bits}")
    if symbol not in em.helpers:
        ctype = f"int{bits}_t"
        body = "".join(f'        "{line}\\n\\t"\n' for line in ["1:", *(MAC16 if bits == 16 else MAC8),
                                                                   "sbiw %[n], 1", "brne 1b",
                                                                   "clr __zero_reg__"])
        em.helpers[symbol] = (
            f"static int32_t {symbol}(const {ctype} *w, const {ctype} *x, uint16_t n, int32_t acc)\n{{\n"
            "    const uint8_t zero = 0;\n"
            "    if (!n)\n        return acc;\n"
            "    __asm__ volatile(\n"
            f"{body}"
            '        : "+r"(acc), "+z"(w), "+x"(x), [n] "+w"(n)\n'
            '        : [zero] "r"(zero)\n'
            '        : "r0", "r18", "r19", "r20", "r21");\n'
            "    return acc;\n}\n")
    return symbol


def conv2d(em, node: Node) -> list[str] | None:
    x_name, w_name, b_name = node.inputs
    out_c, kh, kw, in_c = em.graph.type(w_name).shape
    height, width, *_, dilation, _ = window_geometry(em, node, (kh, kw))
    if dilation[1] != 1:
        return None
    require_computed(em, node, x_name)
    bits = node.type.dtype.bits
    w = em.const_array(w_name)
    body = [*clipped_taps((kh, kw), height, width, dilation),
            f"for (int o = 0; o < {out_c}; ++o) {{",
            f"    int32_t acc = {em.at(b_name, 'o')};",
            "    for (int ky = ky0; ky < ky1; ++ky)",
            f"        acc = {dot(em, bits)}({w} + ((long)(o * {kh} + ky) * {kw} + kx0) * {in_c}, "
            f"{em.var(x_name)} + ((long)(b * {height} + iy0 + ky * {dilation[0]}) * {width} + ix0 + kx0) * {in_c}, "
            f"(uint16_t)((kx1 - kx0) * {in_c}), acc);",
            f"    {em.var(node.name)}[pos + o] = {layer_store(em, node)};",
            "}"]
    return window_loops(em, node, (kh, kw), out_c, body)


def fully_connected(em, node: Node) -> list[str] | None:
    x_name, w_name, b_name = node.inputs
    out_c, depth = em.graph.type(w_name).shape
    rows = em.graph.type(x_name).size // depth
    require_computed(em, node, x_name)
    w = em.const_array(w_name)
    return ["{",
            f"    for (int r = 0; r < {rows}; ++r)",
            f"    for (int o = 0; o < {out_c}; ++o) {{",
            f"        int32_t acc = {dot(em, node.type.dtype.bits)}({w} + (long)o * {depth}, "
            f"{em.var(x_name)} + (long)r * {depth}, {depth}, {em.at(b_name, 'o')});",
            f"        {em.var(node.name)}[(long)r * {out_c} + o] = {layer_store(em, node)};",
            "    }",
            "}"]
