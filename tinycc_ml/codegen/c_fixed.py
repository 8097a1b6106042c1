"""C for fixed-point ops: the shared code table of precision "fixed" (C_CODE in emitter.py),
the exact counterpart of each op's integer semantics in the op registry.

Every product is formed as int32_t (an explicit cast: on AVR an int is 16 bits), shifts are
the same rounding shifts, and stores saturate through <prefix>_sat16 / <prefix>_sat8.
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.codegen import c_float, trees
from tinycc_ml.codegen.emitter import C_CODE, CHAIN_FALLBACK, CEmitter, ctype_of
from tinycc_ml.errors import CompileError
from tinycc_ml.ir.fixed import align_shifts, clip_bounds
from tinycc_ml.ir.graph import Node
from tinycc_ml.ir.ops.calibration import ovr_fraction_terms
from tinycc_ml.ir.ops.linalg import wsqdist_product_shift
from tinycc_ml.ir.ops.registry import node_output_shift


def rshift_c(expr: str, k: int) -> str:
    if not -31 <= k <= 31:  # only a hand-written graph gets here: int32 C cannot shift that far
        raise CompileError(f"a fixed-point shift by {k} bits does not fit int32 arithmetic")
    if k > 0:  # parenthesised whole: >> binds looser than the + or * it may sit in
        return f"((({expr}) + INT32_C({1 << (k - 1)})) >> {k})"
    if k < 0:
        return f"({expr}) * INT32_C({1 << -k})"
    return expr


def shift_c(em: CEmitter, expr: str, k: int, bound: int | None = None) -> str:
    """rshift_c for a value about to be stored, with a left shift (k < 0) that saturates at int32: the
    interpreter shifts in int64 and then saturates, which a plain int32 multiply could overflow (undefined
    in C, and wrong: 2^28 << 4 wraps to 0 where the interpreter saturates). Clamping at int32 first and
    then at the stored width gives the same value as the interpreter's one clamp. ``bound``: a proven
    largest |value| of expr, with which a shift that cannot overflow stays a plain multiply."""
    n = -k
    if k >= 0 or (bound is not None and n <= 31 and bound * 2**n <= 2**31 - 1):
        return rshift_c(expr, k)
    if n > 31:
        raise CompileError(f"a fixed-point shift by {k} bits does not fit int32 arithmetic")
    name = em.sym(f"shl{n}")
    if name not in em.helpers:
        top, low = (2**31 - 1) >> n, -(2 ** (31 - n))
        em.helpers[name] = (f"static inline int32_t {name}(int32_t v)\n{{\n"
                            f"    return v > INT32_C({top}) ? INT32_C(2147483647) : (v < INT32_C({low}) ? "
                            f"(-INT32_C(2147483647) - 1) : v * INT32_C({1 << n}));\n}}\n")
    return f"{name}({expr})"


def index_type(n: int) -> str:
    return "int" if n < 32767 else "int32_t"


def saturate_c(em: CEmitter, node: Node, expr: str) -> str:
    return saturate_bits_c(em, node.type.dtype.bits, expr)


def saturate_bits_c(em: CEmitter, bits: int, expr: str) -> str:
    if bits == 32:
        return expr
    name = em.sym(f"sat{bits}")
    if name not in em.helpers:
        top = 2 ** (bits - 1) - 1
        if em.target.inline_saturation:  # in range when the narrowed value is v; else the bound of v's sign
            em.helpers[name] = (
                f"static inline __attribute__((always_inline)) int{bits}_t {name}(int32_t v)\n{{\n"
                f"    return (int32_t)(int{bits}_t)v == v ? (int{bits}_t)v : (int{bits}_t)((v >> 31) ^ {top});\n}}\n")
            return f"{name}({expr})"
        em.helpers[name] = (
            f"static inline int{bits}_t {name}(int32_t v)\n"
            f"{{\n    return v > {top} ? {top} : (v < -{top + 1} ? -{top + 1} : (int{bits}_t)v);\n}}\n"
        )
    return f"{name}({expr})"


def store(em: CEmitter, node: Node, index: str | None, expr: str) -> str:
    chain = em.graph.analyses.fused.get(node.name)
    if chain and index is not None:
        em.stored_heads.add(node.name)
        return fused_store(em, node, chain, index, expr, saturated=False)
    target = em.var(node.name) if index is None or node.type.rank == 0 else f"{em.var(node.name)}[{index}]"
    return f"{target} = {saturate_c(em, node, expr)};"


def fused_store(em: CEmitter, head: Node, chain: list[str], index: str, value: str, saturated: bool = True) -> str:
    """One element of ``head`` (``value``: an int32 expression, already saturated to the head's type when
    ``saturated``) through its fused element-wise chain (plan_memory's ``fused``): each step in a local, as
    its own code computes it, saturated inline (a call to the shared helper per step costs more than the
    step at -Os), and only the last stored, in the head's slot (which the chain's last value shares).
    A step followed by a relu (a clip at 0 with no upper bound in int16) and a left shift by n is one step:
    sat16(max(sat16(e), 0) * 2^n) = min(max(e, 0) * 2^n, 32767) (0 where e <= 0; else monotone in e)."""
    names = [head.name] + chain
    parts, prev = [], head
    temps = {}
    k = 0
    while k < len(names):
        node = em.graph.node(names[k])
        t = f"t{k}"
        relu = _relu_shift(em, node, em.graph.node(names[k + 1])) if k + 1 < len(names) else None
        narrow = None
        if k:
            em.inline_values[prev.name] = temps[prev.name]
            try:
                if em.target.int16_arith:
                    narrow = _narrow_step(em, node, index, t, relu)
                value = ELEMENT[node.op](em, node)(index)
            finally:
                del em.inline_values[prev.name]
        if relu is not None:  # the relu's node is this step's result
            k += 1
            node = em.graph.node(names[k])
        ctype = ctype_of(node.type.dtype)
        bits = node.type.dtype.bits
        if narrow is not None:
            parts += narrow
            value = t
        elif relu is not None:
            parts += [f"int32_t {t} = {value};",
                      f"{t} = {t} < 0 ? 0 : ({t} > {32767 >> relu} ? 32767 : {t} * {1 << relu});"]
            value = f"({ctype}){t}"
        elif k or not saturated:
            top = 2 ** (bits - 1) - 1
            parts.append(f"int32_t {t} = {value};" if bits < 32 else f"const int32_t {t} = {value};")
            if bits < 32 and em.target.int16_arith:  # two compares of int32 constants: cheaper than narrowing there
                parts.append(f"{t} = {t} > {top} ? {top} : ({t} < -{top + 1} ? -{top + 1} : {t});")
            elif bits < 32:  # one compare of the narrowed value: it is the value unless it saturates
                parts.append(f"if (({ctype}){t} != {t}) {t} = ({t} >> 31) ^ {top};")
            value = f"({ctype}){t}"
        if k == len(chain):  # the chain's last value shares the head's slot (plan_memory)
            sums = em.target.offset_store(em, node.name)
            if sums:  # offset-binary for its reader kernel, which takes the sum too
                parts += [f"const uint16_t u = (uint16_t)((uint16_t){value} ^ 0x8000u);",
                          f"{em.var(head.name)}[{index}] = (int16_t)u;", f"{em.chain_sum or sums + '[0]'} += u;"]
            else:
                parts.append(f"{em.var(head.name)}[{index}] = {value};")
        else:
            temps[node.name] = f"f{k}"
            parts.append(f"const {ctype} f{k} = {value};")
        prev = node
        k += 1
    return "{ " + " ".join(parts) + " }"


def _relu_shift(em: CEmitter, node: Node, user: Node) -> int | None:
    """n when ``user`` (the next step after ``node``, both int16) is clip(node, 0, no bound in int16) with its
    result n bits finer (0 <= n <= 14); else None."""
    if user.op != "clip" or node.type.dtype.bits != 16 or user.type.dtype.bits != 16:
        return None
    lo, hi = clip_bounds(user.attrs["lo"], user.attrs["hi"], node.type.dtype)
    n = user.type.dtype.scale - node.type.dtype.scale
    if np.ndim(lo) or int(lo) != 0 or int(hi) < 32767 or not 0 <= n <= 14:
        return None
    return n


def _sat_shift16(t: str, s: str, n: int) -> str:
    """``t = sat16(s * 2^n)`` for an int16 ``s``, in 16-bit arithmetic (the compares before the shift)."""
    if n == 0:
        return f"{t} = {s};"
    return f"{t} = {s} > {32767 >> n} ? 32767 : ({s} < -{32768 >> n} ? (-32767 - 1) : (int16_t)({s} * {1 << n}));"


def _narrow_step(em: CEmitter, node: Node, index: str, t: str, relu: int | None = None) -> list[str] | None:
    """A fused chain step as int16 C (targets with ``int16_arith``) when it is an add/sub of two int16 values
    of one scale or a scalar clip of an int16 value, with a left shift (or none) to a 16-bit result; None
    otherwise. Exactly the op's semantics: sat16((a +- b) * 2^n) is the sign's bound when a +- b overflows
    int16 (its magnitude is then at least 2^15), else the 16-bit sum shifted with saturation. With ``relu``
    (= n2, see fused_store) the add/sub's relu and its shift too: min(max(a +- b, 0) * 2^(n + n2), 32767)."""
    g = em.graph
    if node.type.dtype.bits != 16 or any(g.type(i).dtype.bits != 16 for i in node.inputs):
        return None
    n = node.type.dtype.scale - scale_of(em, node.inputs[0])
    if not 0 <= n <= 14:
        return None
    if node.op in ("add", "sub"):
        a, b = node.inputs
        if scale_of(em, a) != scale_of(em, b):
            return None
        A, B = em.at(a, index), em.at(b, index)
        if node.op == "add":
            over, sign, value = "(b > 0 ? a > 32767 - b : a < (-32767 - 1) - b)", "b > 0", "a + b"
        else:
            over, sign, value = "(b < 0 ? a > 32767 + b : a < (-32767 - 1) + b)", "b < 0", "a - b"
        if relu is not None:
            if n + relu > 14:
                return None
            return [f"int16_t {t};", f"{{ const int16_t a = {A}, b = {B};",
                    f"if {over} {t} = {sign} ? 32767 : 0;",
                    f"else {{ const int16_t s = (int16_t)({value}); "
                    f"{t} = s < 0 ? 0 : (s > {32767 >> (n + relu)} ? 32767 : (int16_t)(s * {1 << (n + relu)})); }} }}"]
        return [f"int16_t {t};", f"{{ const int16_t a = {A}, b = {B};",
                f"if {over} {t} = {sign} ? 32767 : (-32767 - 1);",
                f"else {{ const int16_t s = (int16_t)({value}); {_sat_shift16(t, 's', n)} }} }}"]
    if node.op == "clip" and relu is None:
        (a,) = node.inputs
        lo, hi = clip_bounds(node.attrs["lo"], node.attrs["hi"], g.type(a).dtype)
        if np.ndim(lo) or lo > 32767 or hi < -32768:
            return None
        lo, hi = int(lo), int(hi)
        v = em.at(a, index)
        clamped = v
        if hi < 32767:
            clamped = f"({v} > {hi} ? {hi} : {clamped})"
        if lo > -32768:
            clamped = f"({v} < {lo} ? {lo} : {clamped})"
        return [f"int16_t {t};", f"{{ const int16_t s = (int16_t){clamped};", _sat_shift16(t, "s", n), "}"]
    return None


def fused_fallback(em: CEmitter, head: Node) -> list[str]:
    """The chain of a head whose code stored it without store() (a kernel writing its output itself):
    one loop from the head's stored elements, in place."""
    n = head.type.size
    value = f"{em.var(head.name)}[i]"
    chain = em.graph.analyses.fused[head.name]
    if identity_chain(em, chain):
        return [f"/* %{head.name}'s chain leaves its values as they are: no loop */"]
    return chain_sum_loop(em, head, f"for ({index_type(n)} i = 0; i < {n}; ++i) ",
                          lambda: [fused_store(em, head, chain, "i", value)])


def identity_chain(em: CEmitter, chain: list[str]) -> bool:
    """A chain of scales that leave every value as it is (identity_scale): nothing to compute or store."""
    return all(em.graph.op(m) == "scale" and identity_scale(em, em.graph.node(m)) for m in chain)


def chain_shift(em: CEmitter, head: Node) -> int | None:
    """The fused chain of ``head`` as one shift of its int16 elements, for a kernel that stores the chain's last
    value itself (then it adds the head to em.stored_heads): a single scale by a power of two, int16 to int16,
    not stored offset-binary: p > 0 is sat16(rshift(v, p)) (a rounding right shift, always in range), p < 0 is
    sat16(v * 2^-p); None for any other chain (or an identity one, which has no loop anyway)."""
    g = em.graph
    chain = g.analyses.fused.get(head.name)
    if not chain or len(chain) != 1 or g.op(chain[0]) != "scale" or identity_chain(em, chain):
        return None
    node = g.node(chain[0])
    p = _pow2_exponent(node.attrs["factor_q"])
    if p is None or node.type.dtype.bits != 16 or head.type.dtype.bits != 16 or em.target.offset_store(em, chain[0]):
        return None
    k = scale_of(em, head.name) + node.attrs["factor_scale"] - node.type.dtype.scale - p
    return k if k and -15 < k <= 15 else None


def chain_sum_loop(em: CEmitter, head: Node, loop: str, body) -> list[str]:
    """``loop`` over the lines ``body()`` makes (the head's fused stores): when the chain's last value is stored
    offset-binary with its sum (CTarget.offset_store), the sum in a local, added to the scratch after the loop."""
    chain = em.graph.analyses.fused.get(head.name)
    sums = em.target.offset_store(em, chain[-1]) if chain else None
    if not sums:
        return [loop + " ".join(body())]
    em.chain_sum = "chain_sum"
    try:
        lines = body()
    finally:
        em.chain_sum = None
    return ["{", "    uint32_t chain_sum = 0;", f"    {loop}{{ " + " ".join(lines) + " }",
            f"    {sums}[0] += chain_sum;", "}"]


def shared_x_readers(em: CEmitter, x_name: str, ok) -> list[str]:
    """The matvec_at nodes reading x ``x_name`` on a kernel (``ok``), in schedule order: the first one prepares
    what the kernel needs from x (its offset sum, on the M0 also x + 2^15) in a scratch the others read (x is
    not written while they run: its slot stays live up to its last reader)."""
    g = em.graph
    here = set(em.emitting or g.order())  # readers in one function only (streaming's
    # finish() runs the tail without the run function's nodes)
    return [n for n in g.order() if g.op(n) == "matvec_at" and g.node(n).inputs[2] == x_name
            and n in here and ok(em, g.node(n))]


def node_kernels_only(em: CEmitter, name: str, ok) -> bool:
    """Every use of the vector ``name`` (not an output) is the x of a matvec_at on a target's node kernel
    (``ok``; Bonsai's node mat-vecs reading the clamped input): its producer may store what the kernels need
    from x (x + 2^15 and its sum) once for all of them."""
    g = em.graph
    users = g.users(name)
    return (bool(users) and g.type(name).rank == 1 and not any(name == n for _, n in g.outputs)
            and all(g.op(u) == "matvec_at" and g.node(u).inputs[2] == name and ok(em, g.node(u)) for u in users))


def scale_of(em: CEmitter, name: str) -> int:
    return em.graph.type(name).dtype.scale


def _matvec(em: CEmitter, node: Node) -> list[str]:
    a_name, x_name = node.inputs
    a = em.graph.node(a_name)
    rows, cols = a.type.shape
    h = int(node.attrs.get("shift", 0))
    out_shift = node_output_shift(em.graph, node.name)
    wtype = ctype_of(a.type.dtype)
    if a.op == "sparse_const":
        rd = em.target.read_const
        vals, rix, idx_type, cptr, ptr_type = em.sparse_arrays(a_name)
        it = index_type(int(a.attrs["col_ptr"][-1]) + 1)
        return [
            f"{{ {em.int32_accumulators(rows)}",
            f"for (int i = 0; i < {rows}; ++i) acc[i] = 0;",
            f"for (int j = 0; j < {cols}; ++j) {{",
            f"    const int32_t xj = {em.at(x_name, 'j')};",
            f"    for ({it} p = {rd(cptr, 'j', ptr_type)}; p < ({it}){rd(cptr, 'j + 1', ptr_type)}; ++p)",
            f"        acc[{rd(rix, 'p', idx_type)}] += {rshift_c('xj * ' + rd(vals, 'p', wtype), h)};",
            "}",
            f"for (int i = 0; i < {rows}; ++i) " + store(em, node, "i", shift_c(em, "acc[i]", out_shift)),
            "}",
        ]
    it = index_type(rows * cols)
    product = f"(int32_t){em.at(a_name, f'i * {cols} + k')} * {em.at(x_name, 'k')}"
    return [
        f"for ({it} i = 0; i < {rows}; ++i) {{",
        "    int32_t acc = 0;",
        f"    for ({it} k = 0; k < {cols}; ++k)",
        f"        acc += {rshift_c(product, h)};",
        "    " + store(em, node, "i", shift_c(em, "acc", out_shift)),
        "}",
    ]


def _matvec_at(em: CEmitter, node: Node) -> list[str]:
    m_name, k_name, x_name = node.inputs
    n, rows, cols = em.graph.type(m_name).shape
    h = int(node.attrs.get("shift", 0))
    out_shift = node_output_shift(em.graph, node.name)
    it = index_type(n * rows * cols)
    product = f"(int32_t){em.at(m_name, f'base + i * {cols} + k')} * {em.at(x_name, 'k')}"
    start = "0"
    if "bias_q" in node.attrs:
        bias = em.add_const_array(em.sym(f"{node.name}_bias"), np.asarray(node.attrs["bias_q"], np.int32), "int32_t",
                                  f"%{node.name}: each matrix's bias row at the accumulator's scale")
        start = em.target.read_const(bias, f"{em.at(k_name, '0')} * {rows} + i", "int32_t")
    return [
        "{",
        f"    const {it} base = ({it}){em.at(k_name, '0')} * {rows * cols};",
        f"    for ({it} i = 0; i < {rows}; ++i) {{",
        f"        int32_t acc = {start};",
        f"        for ({it} k = 0; k < {cols}; ++k)",
        f"            acc += {rshift_c(product, h)};",
        "        " + store(em, node, "i", shift_c(em, "acc", out_shift)),
        "    }",
        "}",
    ]


def _sqdist(em: CEmitter, node: Node) -> list[str]:
    x_name, m_name = node.inputs
    k, m = em.graph.type(m_name).shape
    h = int(node.attrs.get("shift", 0))
    out_shift = 2 * (scale_of(em, x_name) - h) - node.type.dtype.scale
    mt = em.const_transposed(m_name)
    it = index_type(k * m)
    elem = em.target.read_const(mt, f"j * {k} + k", ctype_of(em.graph.type(m_name).dtype))
    return [
        f"for ({it} j = 0; j < {m}; ++j) {{",
        "    int32_t acc = 0;",
        f"    for ({it} k = 0; k < {k}; ++k) {{",
        f"        int32_t d = (int32_t){elem} - {em.at(x_name, 'k')};",
        *([f"        d = {rshift_c('d', h)};"] if h else []),
        "        acc += d * d;",
        "    }",
        "    " + store(em, node, "j", shift_c(em, "acc", out_shift)),
        "}",
    ]


def wsqdist_out(em: CEmitter, acc: str, shift: int) -> str:
    """The int32 expression of a wsqdist's 64-bit sum (>= 0) at the result's scale, before the store's
    saturation: rounded, then capped at INT32_MAX (min(min(v, 2^31 - 1), 2^15 - 1) is the store's min(v, 2^15 - 1))."""
    if shift > 0:
        acc = f"(({acc} + INT64_C({1 << (shift - 1)})) >> {shift})"
    elif shift < 0:
        acc = f"({acc} > INT64_C({(2**31 - 1) >> -shift}) ? INT64_C(2147483647) : {acc} * {1 << -shift})"
    return f"(int32_t)({acc} > INT64_C(2147483647) ? INT64_C(2147483647) : {acc})"


def _wsqdist(em: CEmitter, node: Node) -> list[str]:
    x_name, w_name, _ = node.inputs
    g = em.graph
    k = wsqdist_product_shift([g.type(i) for i in node.inputs])
    col, w, t, end, ends = c_float.wsqdist_arrays(em, node)
    rd = em.target.read_const
    it = index_type(ends[-1] + 1 if ends else 1)
    wt = ctype_of(g.type(w_name).dtype)
    ct = "uint8_t" if g.type(x_name).size <= 256 else "uint16_t"
    return [
        "{",
        f"    {it} i = 0;",
        f"    for ({index_type(len(ends))} c = 0; c < {len(ends)}; ++c) {{",
        "        int64_t acc = 0;",
        f"        for (; i < {rd(end, 'c', 'uint16_t')}; ++i) {{",
        f"            const int32_t p = (int32_t){rd(w, 'i', wt)} * {em.at(x_name, rd(col, 'i', ct))};",
        f"            int32_t e = {rshift_c('p', k)} - {rd(t, 'i', 'int16_t')};",
        "            e = e > 32767 ? 32767 : (e < -32768 ? -32768 : e);",
        "            acc += e * e;",
        "        }",
        "        " + store(em, node, "c", wsqdist_out(em, "acc", node_output_shift(g, node.name))),
        "    }",
        "}",
    ]


def _loop(em: CEmitter, node: Node, make) -> list[str]:
    if node.type.rank == 0:
        return [store(em, node, None, make("0"))]
    return [f"for ({index_type(node.type.size)} i = 0; i < {node.type.size}; ++i) " + store(em, node, "i", make("i"))]


def _aligned(em: CEmitter, a: str, b: str):
    c, la, lb = align_shifts(scale_of(em, a), scale_of(em, b))
    return c, (lambda i: rshift_c(f"(int32_t){em.at(a, i)}", -la)), (lambda i: rshift_c(f"(int32_t){em.at(b, i)}", -lb))


def _value_bound(em: CEmitter, name: str) -> int:
    """The largest |int| a value of ``name``'s type can hold."""
    return 2 ** (em.graph.type(name).dtype.bits - 1)


def _addsub_element(sign: str):
    def element(em: CEmitter, node: Node):
        a, b = node.inputs
        c, fa, fb = _aligned(em, a, b)
        _, la, lb = align_shifts(scale_of(em, a), scale_of(em, b))
        bound = _value_bound(em, a) * 2 ** max(la, 0) + _value_bound(em, b) * 2 ** max(lb, 0)
        return lambda i: shift_c(em, f"{fa(i)} {sign} {fb(i)}", c - node.type.dtype.scale, bound)
    return element


def _mul_element(em: CEmitter, node: Node):
    a, b = node.inputs
    k = scale_of(em, a) + scale_of(em, b) - node.type.dtype.scale
    bound = _value_bound(em, a) * _value_bound(em, b)
    return lambda i: shift_c(em, f"(int32_t){em.at(a, i)} * {em.at(b, i)}", k, bound)


def _pow2_exponent(fq) -> int | None:
    """p when the integer factor is 2^p, else None."""
    fq = int(fq)
    return fq.bit_length() - 1 if fq > 0 and fq & (fq - 1) == 0 else None


def _scale_element(em: CEmitter, node: Node):
    (a,) = node.inputs
    k = scale_of(em, a) + node.attrs["factor_scale"] - node.type.dtype.scale
    fq = node.attrs["factor_q"]
    bound = _value_bound(em, a) * abs(int(fq))
    p = _pow2_exponent(fq)
    if p is not None:  # rshift(v 2^p, k) = shift(v, k - p) exactly (v 2^p is a multiple of 2^k when k <= p)
        s = k - p
        if em.graph.type(a).dtype.bits == 16 and 1 <= s <= 15:  # in int (16 bits on AVR): v >> s plus the rounding bit
            return lambda i: f"(int32_t)(((int){em.at(a, i)} >> {s}) + (((int){em.at(a, i)} >> {s - 1}) & 1))"
        if em.graph.type(a).dtype.bits == 16 and node.type.dtype.bits <= 16 and -15 <= s <= -1:
            # saturated where v 2^-s leaves int16 (the store saturates to node's type after)
            hi, lo = 32767 >> -s, -(32768 >> -s)
            return lambda i: (f"({em.at(a, i)} > {hi} ? INT32_C(32767) : ({em.at(a, i)} < {lo} ? INT32_C(-32768) : "
                              f"(int32_t)(int16_t)(uint16_t)((uint16_t){em.at(a, i)} << {-s})))")
        return lambda i: shift_c(em, f"(int32_t){em.at(a, i)}", k - p, bound)
    return lambda i: shift_c(em, f"(int32_t){em.at(a, i)} * {fq}", k, bound)


def identity_scale(em: CEmitter, node: Node) -> bool:
    """A scale that leaves every value as it is (factor 2^p undone by its shift, no narrower type): sigma = 1
    in Bonsai's tanh(sigma V z) at equal scales."""
    (a,) = node.inputs
    p = _pow2_exponent(node.attrs["factor_q"])
    k = scale_of(em, a) + node.attrs["factor_scale"] - node.type.dtype.scale
    return p is not None and k == p and node.type.dtype.bits >= em.graph.type(a).dtype.bits


def _elementwise(element):
    def code(em: CEmitter, node: Node) -> list[str]:
        if em.target.int16_arith and node.type.rank and not em.graph.analyses.fused.get(node.name):
            narrow = _narrow_step(em, node, "i", "t")  # 16-bit arithmetic (see CTarget.int16_arith)
            if narrow is not None:
                return [f"for ({index_type(node.type.size)} i = 0; i < {node.type.size}; ++i) {{ "
                        + " ".join(narrow) + f" {em.var(node.name)}[i] = t; }}"]
        return _loop(em, node, element(em, node))
    return code


def clamp_expr(expr: str, lo: int, hi: int, bits: int = 32) -> str:
    """Clamp to [lo, hi]; a bound at the edge of the operand's type is left out (it cannot bind)."""
    top = 2 ** (bits - 1)
    if lo > top - 1 or hi < -top:  # a bound past the far end of the operand's range: the clamp is that bound
        return f"INT32_C({lo if lo > top - 1 else hi})"
    out = f"(int32_t){expr}"
    if hi < top - 1:
        out = f"({expr} > {hi} ? INT32_C({hi}) : {out})"
    if lo > -top:
        out = f"({expr} < {lo} ? INT32_C({lo}) : {out})"
    return out


def _clip_element(em: CEmitter, node: Node):
    """Scalar bounds only (the element-wise form plan_memory may fuse)."""
    (a,) = node.inputs
    dtype = em.graph.type(a).dtype
    lo, hi = clip_bounds(node.attrs["lo"], node.attrs["hi"], dtype)
    shift = dtype.scale - node.type.dtype.scale
    top = 2 ** (dtype.bits - 1)  # the operand's range: the result lies in [clamp(-top), clamp(top - 1)]
    ends = [min(max(v, int(lo)), int(hi)) for v in (-top, top - 1)]
    bound = max(abs(ends[0]), abs(ends[1]))
    return lambda i: shift_c(em, clamp_expr(em.at(a, i), int(lo), int(hi), dtype.bits), shift, bound)


def _clip(em: CEmitter, node: Node) -> list[str]:
    (a,) = node.inputs
    dtype = em.graph.type(a).dtype
    lo, hi = clip_bounds(node.attrs["lo"], node.attrs["hi"], dtype)
    shift = dtype.scale - node.type.dtype.scale
    if lo.ndim == 0:
        return _loop(em, node, _clip_element(em, node))
    # one bound per element, kept in flash
    ctype = ctype_of(dtype)
    lo_sym = em.add_const_array(em.sym(f"{node.name}_lo"), lo, ctype, f"%{node.name}: lower bound of each element")
    hi_sym = em.add_const_array(em.sym(f"{node.name}_hi"), hi, ctype, f"%{node.name}: upper bound of each element")
    rd = em.target.read_const
    n = node.type.size
    return [
        f"for ({index_type(n)} i = 0; i < {n}; ++i) {{",
        f"    const int32_t v = {em.at(a, 'i')}, lo = {rd(lo_sym, 'i', ctype)}, hi = {rd(hi_sym, 'i', ctype)};",
        "    " + store(em, node, "i", shift_c(em, "(v < lo ? lo : (v > hi ? hi : v))", shift,
                                          int(max(np.max(np.abs(lo)), np.max(np.abs(hi)))))),
        "}",
    ]


def _tanh_clamp(em: CEmitter, node: Node) -> list[str]:
    (a,) = node.inputs
    w = max(scale_of(em, a), 0)  # see the op's integer semantics: sign(x) at a negative input scale
    one = 1 << w
    bits = em.graph.type(a).dtype.bits
    return _loop(em, node, lambda i: shift_c(em, clamp_expr(em.at(a, i), -one, one, bits), w - node.type.dtype.scale,
                                             one))


def tanh_lut_lines(em: CEmitter, node: Node, final) -> list[str]:
    """The body computing element i of a tanh_lut (table with linear interpolation) in int32 C; ``final``
    turns the value (before saturation) into the last line (a store, or a local of the fused loop)."""
    (a,) = node.inputs
    at = node.attrs
    table = em.add_const_array(em.sym(f"{node.name}_tanh"), at["table"], "int16_t",
                               f"%{node.name}: tanh table, scale 2^-{at['table_scale']}")
    drop, top = at["drop_bits"], at["in_max_q"]
    rd = em.target.read_const
    last = len(at["table"]) - 1
    after = "t + 1" if (top >> drop) + 1 <= last else f"(t < {last} ? t + 1 : {last})"  # t + 1 always an entry?
    return [
        f"    const int32_t v = {em.at(a, 'i')};",
        f"    const int32_t mag = v < 0 ? -v : v, a = mag < {top} ? mag : INT32_C({top});",
        f"    const int32_t t = a >> {drop}, f = a & {(1 << drop) - 1};",
        f"    const int32_t y0 = {rd(table, 't', 'int16_t')};",
        f"    const int32_t y1 = {rd(table, after, 'int16_t')};",
        f"    const int32_t y = y0 + ({rshift_c('(y1 - y0) * f', drop)});",
        "    " + final(shift_c(em, "v < 0 ? -y : y", at["table_scale"] - node.type.dtype.scale,
                              bound=int(np.max(np.abs(at["table"].astype(np.int64)), initial=0)))),
    ]


def _tanh_lut(em: CEmitter, node: Node) -> list[str]:
    if fused_tanh(em, node):
        unused = [f"(void){em.var(node.name)};"] if node.name in em.graph.analyses.memory_plan else []
        return [f"/* computed in the loop of %{em.graph.users(node.name)[0]} (tanh and product fused) */", *unused]
    n = node.type.size
    return [f"for ({index_type(n)} i = 0; i < {n}; ++i) {{",
            *tanh_lut_lines(em, node, lambda value: store(em, node, "i", value)), "}"]


def tanh_of_mul(em: CEmitter, node: Node) -> tuple[Node, str] | None:
    """(the tanh_lut, the other operand) when the element-wise product ``node`` multiplies a computed vector by
    a tanh_lut used by nothing else (Bonsai's W z * tanh(sigma V z)): one loop computes both, the tanh of
    each element in a local, never stored."""
    g = em.graph
    if node.op != "mul" or node.type.rank != 1:
        return None
    outputs = {n for _, n in g.outputs}
    for j, name in enumerate(node.inputs):
        other = node.inputs[1 - j]
        if (g.op(name) == "tanh_lut" and name not in outputs and g.users(name) == [node.name] and other != name
                and g.type(name).shape == node.type.shape and g.type(other).shape == node.type.shape
                and g.op(other) not in ("const", "sparse_const")
                and _next_in_schedule(g, name, node.name) and _in_step(g, node.name, g.node(name).inputs[0])):
            return g.node(name), other
    return None


def _next_in_schedule(g, first: str, then: str) -> bool:
    """``then`` runs right after ``first``: nothing in between may take the slot of a value ``first`` read last
    (the fused loop reads it when ``then`` runs)."""
    order = [n for n in g.order() if g.op(n) not in ("input", "const", "sparse_const")]
    return order.index(then) == order.index(first) + 1


def _in_step(g, out: str, read: str) -> bool:
    """Element i of ``out`` may be written once element i of ``read`` is read: their slots do not overlap or
    start together (the plan may give ``out`` the slot of a value dead after the tanh read it)."""
    plan = g.analyses.memory_plan
    a, b = plan.get(out), plan.get(read)
    if a is None or b is None or a.arena != b.arena:
        return True
    return a.offset == b.offset or a.offset + a.length <= b.offset or b.offset + b.length <= a.offset


def fused_tanh(em: CEmitter, node: Node) -> bool:
    """The tanh_lut ``node`` is computed in its product's loop (tanh_of_mul): it has no code of its own."""
    users = em.graph.users(node.name)
    if len(users) != 1:
        return False
    found = tanh_of_mul(em, em.graph.node(users[0]))
    return found is not None and found[0].name == node.name


def add_of_mul(em: CEmitter, node: Node) -> Node | None:
    """The sum that takes the fused product ``node`` (tanh_of_mul) in the same loop: Bonsai's path score, the
    previous levels' sum + this node's, when it runs right after the product, adds a computed vector and its
    slot does not overlap the tanh's input or the product's other operand at another offset."""
    g = em.graph
    found = tanh_of_mul(em, node)
    users = g.users(node.name)
    if found is None or len(users) != 1 or any(node.name == n for _, n in g.outputs):
        return None
    add = g.node(users[0])
    if (add.op != "add" or add.inputs.count(node.name) != 1 or add.type.shape != node.type.shape
            or any(g.op(i) in ("const", "sparse_const") or g.type(i).shape != node.type.shape for i in add.inputs)):
        return None
    # the tanh's input and the product's other operand are dead when the sum runs: its slot may be theirs
    if not (_next_in_schedule(g, node.name, add.name) and _in_step(g, add.name, found[0].inputs[0])
            and _in_step(g, add.name, found[1])):
        return None
    return add


def fused_add(em: CEmitter, node: Node) -> bool:
    """The add ``node`` is computed in the loop of its fused product (add_of_mul): it has no code of its own."""
    g = em.graph
    for name in node.inputs:
        if g.op(name) == "mul" and g.users(name) == [node.name]:
            add = add_of_mul(em, g.node(name))
            if add is not None and add.name == node.name:
                return True
    return False


def tanh_mul_loop(em: CEmitter, node: Node, tanh_lines, value, sum_value=None) -> list[str]:
    """One loop over the elements of the product ``node`` = w * tanh(v): ``tanh_lines(em, tanh, final)`` the
    tanh's body, its saturated value left in the local th; ``value(i)`` the product's saturated element (its
    operands read through em.at, the tanh from th), stored, or added to the sum that takes it (add_of_mul;
    ``sum_value(add)``: a target's element function for that sum, or None for the shared one)."""
    tanh, _ = tanh_of_mul(em, node)
    ctype = ctype_of(tanh.type.dtype)
    at = tanh.attrs
    # interpolation stays between table entries and a rounding right shift shrinks it: no saturation needed
    in_range = (at["table_scale"] >= tanh.type.dtype.scale
                and int(np.max(np.abs(np.asarray(at["table"], np.int64)), initial=0)) < 2 ** (tanh.type.dtype.bits - 1))
    body = tanh_lines(em, tanh, lambda v: f"const {ctype} th = "
                      f"{f'({ctype})({v})' if in_range else saturate_c(em, tanh, v)};")
    add = add_of_mul(em, node)
    em.inline_values[tanh.name] = "th"
    try:
        if add is None:  # value() is saturated to the product's type already
            last = ([f"{em.var(node.name)}[i] = {value('i')};"] if not em.graph.analyses.fused.get(node.name)
                    else [store(em, node, "i", value("i"))])
        else:
            em.inline_values[node.name] = "pm"
            try:
                half = _half_sum(em, add)
                own = None if sum_value is None or half is not None else sum_value(add)
                last = [f"const {ctype_of(node.type.dtype)} pm = {value('i')};",
                        f"{em.var(add.name)}[i] = {half('i')};" if half is not None
                        else f"{em.var(add.name)}[i] = {own('i')};" if own is not None
                        else store(em, add, "i", ELEMENT["add"](em, add)("i"))]
            finally:
                del em.inline_values[node.name]
    finally:
        del em.inline_values[tanh.name]
    n = node.type.size
    unused = [f"(void){em.var(node.name)}; /* the sum takes each element */"] if (
        add is not None and node.name in em.graph.analyses.memory_plan) else []
    return [*unused, f"for ({index_type(n)} i = 0; i < {n}; ++i) {{", *body, *("    " + ln for ln in last), "}"]


def _half_sum(em: CEmitter, node: Node):
    """rshift(a + b, 1) of two int16 values at one scale, in int (16-bit arithmetic on AVR) and never out of
    int16's range: (a >> 1) + (b >> 1) + ((a | b) & 1); None for any other add (or one heading a fused chain)."""
    a, b = node.inputs
    g = em.graph
    c, la, lb = align_shifts(scale_of(em, a), scale_of(em, b))
    if (la or lb or c - node.type.dtype.scale != 1 or node.name in g.analyses.fused
            or any(g.type(v).dtype.bits != 16 for v in (a, b, node.name))):
        return None
    return lambda i: (f"(int16_t)((((int){em.at(a, i)} >> 1) + ((int){em.at(b, i)} >> 1)) + "
                      f"(((int){em.at(a, i)} | (int){em.at(b, i)}) & 1))")


def _add(em: CEmitter, node: Node) -> list[str]:
    if node.name in em.kernel_stored:
        return ["/* stored by the mat-vec kernel (its bias in the kernel's row constants) */"]
    if fused_add(em, node):
        return ["/* computed in the loop of the product it adds (tanh, product and sum fused) */"]
    return _elementwise(ELEMENT["add"])(em, node)


def _mul(em: CEmitter, node: Node) -> list[str]:
    if tanh_of_mul(em, node) is not None:
        element = _mul_element(em, node)
        return tanh_mul_loop(em, node, tanh_lut_lines, lambda i: saturate_c(em, node, element(i)))
    return _elementwise(_mul_element)(em, node)


def exp_tables(em: CEmitter, node: Node) -> tuple[str, str]:
    """The two int16 tables of an exp_lut node, as constant arrays: (high bits, low bits)."""
    at = node.attrs
    t_hi = em.add_const_array(em.sym(f"{node.name}_exp_hi"), at["table_hi"], "int16_t",
                              f"%{node.name}: e^x table over high bits, scale 2^-{at['hi_scale']}")
    t_lo = em.add_const_array(em.sym(f"{node.name}_exp_lo"), at["table_lo"], "int16_t",
                              f"%{node.name}: e^x table over low bits, scale 2^-{at['lo_scale']}")
    return t_hi, t_lo


def _exp_lut(em: CEmitter, node: Node) -> list[str]:
    return exp_lut_lines(em, node, lambda value: store(em, node, "i", value))


def exp_lut_lines(em: CEmitter, node: Node, final) -> list[str]:
    """The loop of an exp_lut (two tables, the product shifted): ``final(value)`` the statement taking each
    element's value before saturation (a store, or a kernel's offset input and its sum)."""
    (a,) = node.inputs
    at = node.attrs
    t_hi, t_lo = exp_tables(em, node)
    k, mask = at["low_bits"], (1 << at["low_bits"]) - 1
    rd = em.target.read_const
    shift = at["hi_scale"] + at["lo_scale"] - node.type.dtype.scale
    product_bound = int(np.max(np.abs(at["table_hi"].astype(np.int64)), initial=0)
                        * np.max(np.abs(at["table_lo"].astype(np.int64)), initial=0))

    def make(i):
        hi = rd(t_hi, f"t_{i} >> {k}", "int16_t")
        lo = rd(t_lo, f"t_{i} & {mask}", "int16_t")
        return shift_c(em, f"(int32_t){hi} * {lo}", shift, bound=product_bound)

    n = node.type.size
    it = index_type(n)
    clamped = clamp_expr(em.at(a, "i"), at["lo_q"], at["hi_q"], em.graph.type(a).dtype.bits)
    t_expr = rshift_c(f"{clamped} - INT32_C({at['lo_q']})",
                      at["drop_bits"])
    return [
        f"for ({it} i = 0; i < {n}; ++i) {{",
        f"    const int32_t t_i = {t_expr};",
        "    " + final(make("i")),
        "}",
    ]


def _sum(em: CEmitter, node: Node) -> list[str]:
    (a,) = node.inputs
    h = int(node.attrs.get("shift", 0))
    n = em.graph.type(a).size
    return [
        "{",
        "    int32_t acc = 0;",
        f"    for ({index_type(n)} i = 0; i < {n}; ++i) acc += {rshift_c('(int32_t)' + em.at(a, 'i'), h)};",
        "    " + store(em, node, None, shift_c(em, "acc", node_output_shift(em.graph, node.name))),
        "}",
    ]


def _segment_min(em: CEmitter, node: Node) -> list[str]:
    shift = scale_of(em, node.inputs[0]) - node.type.dtype.scale
    bound = 2 ** (em.graph.type(node.inputs[0]).dtype.bits - 1)
    return c_float.segment_min(em, node, lambda c: store(em, node, c, shift_c(em, "(int32_t)best", shift, bound)))


def _max(em: CEmitter, node: Node) -> list[str]:
    shift = scale_of(em, node.inputs[0]) - node.type.dtype.scale
    bound = 2 ** (em.graph.type(node.inputs[0]).dtype.bits - 1)
    return c_float.largest(em, node, lambda: store(em, node, None, shift_c(em, "(int32_t)best", shift, bound)))


def _kvote(em: CEmitter, node: Node) -> list[str]:
    vote = rshift_c("votes[c]", -node.type.dtype.scale)
    return c_float.kvote(em, node, lambda out: f"{out}[c] = {saturate_c(em, node, vote)};")


def _sqdist_kvote(em: CEmitter, node: Node) -> list[str]:
    x_name, m_name = node.inputs
    r, m = em.graph.type(m_name).shape
    h = int(node.attrs.get("shift", 0))
    bits = int(node.attrs["dist_bits"])
    out_shift = node_output_shift(em.graph, node.name)
    mt = em.const_transposed(m_name)
    it = index_type(r * m)
    elem = em.target.read_const(mt, f"(j) * {r} + i", ctype_of(em.graph.type(m_name).dtype))

    def distance(j):
        return ["int32_t acc = 0;",
                f"for ({it} i = 0; i < {r}; ++i) {{",
                f"    int32_t t = (int32_t){elem.replace('(j)', f'({j})')} - {em.at(x_name, 'i')};",
                *([f"    t = {rshift_c('t', h)};"] if h else []),
                "    acc += t * t;",
                "}",
                f"const int{bits}_t dj = {saturate_bits_c(em, bits, shift_c(em, 'acc', out_shift))};"]

    vote = rshift_c("votes[c]", -node.type.dtype.scale)
    return c_float.sqdist_kvote(em, node, lambda out: f"{out}[c] = {saturate_c(em, node, vote)};", distance,
                                f"int{bits}_t")


def _ovo_votes(em: CEmitter, node: Node) -> list[str]:
    vote = rshift_c("votes[c]", -node.type.dtype.scale)
    return c_float.ovo_votes(em, node, lambda out: f"{out}[c] = {saturate_c(em, node, vote)};")


def _ovr_decision(em: CEmitter, node: Node) -> list[str]:
    """Votes and exact summed confidences in int64, the confidence term s / (3 (|s| + 1)) one rounded division
    (ovr_decision's fixed semantics)."""
    (d,) = node.inputs
    k, so = int(node.attrs["n_classes"]), node.type.dtype.scale
    a, e, f, b = ovr_fraction_terms(em.graph.type(d).dtype.scale, so)
    votes = (f"(int64_t)votes[c] * INT64_C({1 << so})" if so >= 0
             else f"(((int64_t)votes[c] + INT64_C({1 << (-so - 1)})) >> {-so})")
    value = "(int32_t)(v > INT32_MAX ? INT32_MAX : v < INT32_MIN ? INT32_MIN : v)"
    return [
        "{",
        f"    int32_t votes[{k}];",
        f"    int64_t total[{k}];",
        "    int p = 0;",
        f"    for (int c = 0; c < {k}; ++c) {{ votes[c] = 0; total[c] = 0; }}",
        f"    for (int i = 0; i < {k}; ++i)",
        f"        for (int j = i + 1; j < {k}; ++j, ++p) {{",
        f"            const int32_t d = {em.at(d, 'p')};",
        "            total[i] += d;",
        "            total[j] -= d;",
        "            ++votes[d >= 0 ? i : j];",
        "        }",
        f"    for (int c = 0; c < {k}; ++c) {{",
        f"        const int64_t num = total[c] * INT64_C({1 << a});",
        "        const int64_t mag = num < 0 ? -num : num;",
        f"        const int64_t den = INT64_C(3) * ((total[c] < 0 ? -total[c] : total[c]) * INT64_C({1 << e})"
        f" + INT64_C({1 << f})) * INT64_C({1 << b});",
        "        const int64_t q = (2 * mag + den) / (2 * den);",
        f"        const int64_t v = {votes} + (num < 0 ? -q : q);",
        f"        {em.var(node.name)}[c] = {saturate_c(em, node, value)};",
        "    }",
        "}",
    ]


# the element expression (before saturation) of each op plan_memory may fuse into its operand's store
ELEMENT = {"add": _addsub_element("+"), "sub": _addsub_element("-"), "mul": _mul_element, "scale": _scale_element,
           "clip": _clip_element}

CHAIN_FALLBACK["fixed"] = fused_fallback
C_CODE["fixed"].update({
    "matvec": _matvec, "sqdist": _sqdist, "wsqdist": _wsqdist, "add": _add,
    "sub": _elementwise(ELEMENT["sub"]), "mul": _mul, "scale": _elementwise(_scale_element),
    "clip": _clip, "tanh_clamp": _tanh_clamp, "exp_lut": _exp_lut, "tanh_lut": _tanh_lut,
    "sum": _sum, "max": _max, "argmax": c_float.argmax, "segment_min": _segment_min, "kvote": _kvote,
    "sqdist_kvote": _sqdist_kvote,
    "ovo_votes": _ovo_votes, "ovr_decision": _ovr_decision,
    "matvec_at": _matvec_at, "branch": c_float.branch,
    "tree_ensemble": lambda em, node: trees.ensemble_code(em, node, (rshift_c, saturate_c)),
})


# ---- graph queries the targets' kernels share (which node may hand a kernel its input prepared)


def sole_vector_user(em: CEmitter, name: str, matvec_ok, sqdist_ok) -> str | None:
    """"matvec" / "sqdist" when the only use of the vector ``name`` (not an output) is as x of a mat-vec
    or the point of a distance that the given predicates accept; else None."""
    g = em.graph
    if any(name == n for _, n in g.outputs) or g.type(name).rank != 1:
        return None
    users = g.users(name)
    if len(users) != 1:
        return None
    user = g.node(users[0])
    if user.op == "matvec" and user.inputs[1] == name and matvec_ok(em, user):
        return "matvec"
    if user.op == "sqdist" and user.inputs[0] == name and sqdist_ok(em, user):
        return "sqdist"
    return None


def chain_last(em: CEmitter, name: str) -> bool:
    """``name`` is the last value of a fused element-wise chain (computed in its head's store) that computes
    something (a chain of identity scales stores nothing: c_fixed.identity_chain)."""

    return any(chain and chain[-1] == name and not identity_chain(em, chain)
               for chain in em.graph.analyses.fused.values())
