"""The input bound of float builds: rows a float build is not proven to compute exactly get no answer.

A float build computes in float32 where the model computes in float64. Over the inputs compile checked (the
calibration rows' range, the declared input_range, else [-1, 1]) interval analysis proves every value stays
within float32; beyond, a value can overflow where the model's does not (GaussianNB's squared distances at
|x| = 1e20, a cubic kernel at 1e13) and the float32 answer would silently differ. ``api.float_input_bound``
widens the checked range as far as the proof holds (``graph.analyses.input_bound``): a bound R on every
|x[k]|, or the checked range per feature where no such R covers it. A row with a feature beyond it, or NaN, or
an infinity, gets no answer: ``<prefix>_predict`` returns -1, the scores (and the probabilities, the
value) are NaN; the host predictor raises DataError naming the row and feature.

The uniform test reads the float's bits (sign cleared, compared as an unsigned integer: NaN and infinities
lie above every finite bound), integer operations only, so it costs soft-float chips no float library call.
"""

from __future__ import annotations

import numpy as np

NAN_BITS = "0x7fc00000u"


def outside(bound: dict | None, X) -> np.ndarray:
    """(n, d) bool: the features of rows X (as float32, the C's input) beyond ``bound`` (NaN and inf too)."""
    with np.errstate(over="ignore"):
        X32 = np.asarray(X, dtype=np.float32).reshape(len(X), -1)
    if bound is None:
        return np.zeros(X32.shape, dtype=bool)
    with np.errstate(invalid="ignore"):
        if "bound" in bound:
            return ~(np.abs(X32) <= np.float32(bound["bound"]))
        lo, hi = (np.asarray(bound[k], dtype=np.float32) for k in ("lo", "hi"))
        return ~((X32 >= lo) & (X32 <= hi))


def rows_beyond(bound: dict | None, X) -> np.ndarray:
    """(n,) bool: the rows a build with ``bound`` answers no class for."""
    return np.any(outside(bound, X), axis=1)


def has_bound(graph) -> bool:
    return graph.analyses.input_bound is not None


def beyond_function(em, api) -> str:
    """static int <prefix>_beyond(const float *x): 1 when x is outside the build's bound."""
    name = api.sym("beyond")
    if name in em.helpers:
        return name
    bound = em.graph.analyses.input_bound
    if "bound" in bound:
        limit = int(np.float32(bound["bound"]).view(np.uint32))
        # no early exit: a branch-free test of every feature vectorises on the host
        test = ["        union { float f; uint32_t u; } v;", "        v.f = x[k];",
                f"        beyond |= (v.u & 0x7fffffffu) > 0x{limit:08x}u; "
                f"/* |x[k]| > {float(bound['bound']):g}, NaN, inf */"]
        what = f"a NaN, an infinity or a value beyond +-{float(bound['bound']):g}"
    else:
        lo = em.add_const_array(api.sym("bound_lo"), np.asarray(bound["lo"], dtype=np.float32), "float",
                                "the input bound: lowest value of each feature")
        hi = em.add_const_array(api.sym("bound_hi"), np.asarray(bound["hi"], dtype=np.float32), "float",
                                "the input bound: highest value of each feature")
        read_lo, read_hi = em.target.read_const(lo, "k", "float"), em.target.read_const(hi, "k", "float")
        test = [f"        beyond |= !(x[k] >= {read_lo} && x[k] <= {read_hi}); /* NaN fails both */"]
        what = "a NaN or a value outside its feature's checked range"
    em.helpers[name] = "\n".join([
        f"/* 1 when x holds {what}: inputs this float build is not proven to compute within float32 for */",
        f"static int {name}(const float *x)", "{", "    int beyond = 0;",
        f"    for (int k = 0; k < {api.input_dim}; ++k) {{", *test, "    }", "    return beyond;", "}", ""])
    return name


def no_answer_function(em, api) -> str:
    """static int <prefix>_no_answer(float *scores): NaN scores, prediction -1."""
    name = api.sym("no_answer")
    if name not in em.helpers:
        em.helpers[name] = "\n".join([
            "/* a row beyond the input bound: no class (-1), NaN scores */",
            f"static int {name}(float *scores)", "{",
            "    union { float f; uint32_t u; } nan;", f"    nan.u = {NAN_BITS};",
            f"    for (int i = 0; i < {api.n_scores}; ++i)", "        scores[i] = nan.f;", "    return -1;", "}", ""])
    return name


def value_beyond(em, api, value: str, index: str) -> str:
    """C testing one fed value (feature ``index``) against the bound (streaming's feed)."""
    bound = em.graph.analyses.input_bound
    beyond_function(em, api)  # declares the box's arrays where the bound is per feature
    if "bound" in bound:
        limit = int(np.float32(bound["bound"]).view(np.uint32))
        return f"{api.sym('bits_beyond')}({value}, 0x{limit:08x}u)"
    lo = em.target.read_const(api.sym("bound_lo"), index, "float")
    hi = em.target.read_const(api.sym("bound_hi"), index, "float")
    return f"!({value} >= {lo} && {value} <= {hi})"


def streaming_guard(em, api) -> tuple[list[str], list[str], list[str], list[str]]:
    """(state, begin's, feed's and finish's lines): a fed value beyond the bound marks the row, which then
    gets no answer."""
    if not has_bound(em.graph):
        return [], [], [], []
    flag = api.sym("stream_beyond")
    if "bound" in em.graph.analyses.input_bound:
        em.helpers.setdefault(api.sym("bits_beyond"), "\n".join([
            f"static int {api.sym('bits_beyond')}(float value, uint32_t limit)", "{",
            "    union { float f; uint32_t u; } v;", "    v.f = value;", "    return (v.u & 0x7fffffffu) > limit;",
            "}", ""]))
    return ([f"static uint8_t {flag};"], [f"    {flag} = 0;"],
            [f"    if ({value_beyond(em, api, 'value', 'i')})", f"        {flag} = 1;"],
            [f"    if ({flag})", f"        return {no_answer_function(em, api)}(scores);"])


def run_guard(em, api) -> list[str]:
    """The first lines of <prefix>_run: rows beyond the bound get no answer."""
    if not has_bound(em.graph):
        return []
    return [f"    if ({beyond_function(em, api)}(x))", f"        return {no_answer_function(em, api)}(scores);"]


def header_lines(api, bound: dict | None) -> list[str]:
    if bound is None:
        return []
    where = (f"|x[k]| <= {float(bound['bound']):g} for every k" if "bound" in bound
             else "every x[k] within its feature's checked range")
    return [f"/* Float build, proven to compute within float32 for inputs with {where}:",
            f" * for a row with a feature beyond, a NaN or an infinity, {api.sym('predict')} returns -1 and the",
            " * scores are NaN (float32 could overflow where the model's float64 does not). */", ""]
