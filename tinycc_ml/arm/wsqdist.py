"""GaussianNB's weighted squared distances (wsqdist) on the Cortex-M0 and M4: the shared C's term loop as a
function of its own, so that the cost model's prediction has a measurement beside it (the profile charges a
node the functions it calls). M4: SSAT for the saturation, SMLAL for the 64-bit sum, 11 instructions a term,
near the floor. M0: the 64-bit sum as two words with the carry by hand (a 64-bit product would call
libgcc), 36 instructions a term: GCC spills the sum and the five array bases out of the eight low registers;
an asm kernel could take about half. Costs are instructions (QEMU -icount / unicorn), per term, class and
call, fitted on GaussianNBs on digits, breast_cancer and wine (within 0.2%: benchmarks/naive_bayes_cycles.py)."""

from __future__ import annotations

from tinycc_ml.target import (
    KernelCost,
    index_type,
    node_output_shift,
    rshift_c,
    store,
    wsqdist_arrays,
    wsqdist_out,
    wsqdist_product_shift,
    wsqdist_terms,
)

# instructions: per term, per class, per call
COSTS = {"m0": {"term": 36.0, "class": 48.0, "call": 7.0},
         "m4": {"term": 11.0, "class": 20.0, "call": 9.0}}


def _ok(em, node) -> bool:
    g = em.graph
    x_name, w_name, t_name = node.inputs
    return (g.op(x_name) not in ("const", "sparse_const") and g.op(w_name) == "const" and g.op(t_name) == "const"
            and g.type(x_name).dtype.bits == 16 and g.type(w_name).dtype.bits in (8, 16))


def _cost(chip: str):
    def cost(em, node) -> KernelCost:
        g = em.graph
        W, T = (g.node(i).attrs["value"] for i in node.inputs[1:])
        cols = wsqdist_terms(W, T)
        terms = sum(len(c) for c in cols)
        c = COSTS[chip]
        return KernelCost(round(c["call"] + c["class"] * len(cols) + c["term"] * terms),
                          5 * terms + 2 * len(cols) + 120)
    return cost


def _kernel(em, node, m4: bool) -> list[str] | None:
    if not _ok(em, node):
        return None
    g = em.graph
    x_name = node.inputs[0]
    k = wsqdist_product_shift([g.type(i) for i in node.inputs])
    col, w, t, end, ends = wsqdist_arrays(em, node)
    C = len(ends)
    name = em.sym(f"wsqdist_{node.name}")
    out = em.sym("wout")
    em.scratch(out, "int32_t", C)
    it = index_type(ends[-1] + 1 if ends else 1)
    if name not in em.helpers:
        if m4:  # SSAT and SMLAL
            body = ["            e = __ssat(e, 16);", "            acc += (int64_t)e * e;"]
            sums, total = ["        int64_t acc = 0;"], "acc"
        else:  # the 64-bit sum as two words with the carry by hand: GCC keeps them in registers
            body = ["            e = e > 32767 ? 32767 : (e < -32768 ? -32768 : e);",
                    "            const uint32_t sq = (uint32_t)(e * e);",
                    "            lo += sq;", "            hi += lo < sq;"]
            sums, total = ["        uint32_t lo = 0, hi = 0;"], "acc"
        em.helpers[name] = "\n".join([
            f"/* %{node.name}: every class's sum of squared terms, at the result's scale, capped at INT32_MAX */",
            f"static void __attribute__((noinline)) {name}(const int16_t *x, int32_t *out)", "{",
            f"    {it} i = 0;",
            f"    for ({index_type(C)} c = 0; c < {C}; ++c) {{",
            *sums,
            f"        for (; i < {end}[c]; ++i) {{",
            f"            const int32_t p = (int32_t){w}[i] * x[{col}[i]];",
            f"            int32_t e = {rshift_c('p', k)} - {t}[i];",
            *body,
            "        }",
            *([] if m4 else ["        const int64_t acc = (int64_t)(((uint64_t)hi << 32) | lo);"]),
            f"        out[c] = {wsqdist_out(em, total, node_output_shift(g, node.name))};",
            "    }", "}", ""]) + "\n"
    return ["{", f"    {name}({em.var(x_name)}, {out});",
            f"    for ({index_type(C)} c = 0; c < {C}; ++c) " + store(em, node, "c", f"{out}[c]"), "}"]


m0_wsqdist_cost = _cost("m0")
m4_wsqdist_cost = _cost("m4")
def kernel_wsqdist_m0(em, node) -> list[str] | None:
    return _kernel(em, node, False)


def kernel_wsqdist_m4(em, node) -> list[str] | None:
    """With SSAT (arm_acle.h's __ssat) for the saturation and SMLAL for the 64-bit sum."""
    return _kernel(em, node, True)
wsqdist_ok = _ok
