"""backends/folded_epilogue.fold: a folded kernel epilogue it returns equals the fixed-point interpreter on
every input (hypothesis over matrices, biases, scales, relu or not, input bounds; rows at the corners that
drive each accumulator to its ends, so the layers saturate), and what it cannot prove it refuses."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tinycc_ml.codegen.folded_epilogue import fold
from tinycc_ml.ir.fixed import run_fixed
from tinycc_ml.ir.text import parse_graph


def emitter(g) -> SimpleNamespace:
    """What fold reads of a CEmitter: the graph and its memo."""
    return SimpleNamespace(graph=g, folded_epilogues={})

def layer(W, b, lo, hi, scales, relu: bool):
    """x -> clip -> W x (head) -> + b -> [relu]: the graph and its fused chain, as plan_memory fuses an MLP layer."""
    rows, cols = W.shape
    sw, sh, sz, sr = scales
    ints = lambda a: ", ".join(str(int(v)) for v in np.ravel(a))  # noqa: E731
    last = "r" if relu else "z"
    text = f"""graph g {{
  %x = input() {{name = "x"}} : fx16.0[{cols}]
  %xc = clip(%x) {{hi = {float(hi)}, lo = {float(lo)}}} : fx16.0[{cols}]
  %W = const() {{value = array<int16>({rows},{cols})[{ints(W)}]}} : fx16.{sw}[{rows},{cols}]
  %h = matvec(%W, %xc) : fx16.{sh}[{rows}]
  %b = const() {{value = array<int16>({rows})[{ints(b)}]}} : fx16.{sh}[{rows}]
  %z = add(%h, %b) : fx16.{sz}[{rows}]
"""
    if relu:
        text += f"  %r = clip(%z) {{hi = 3e+38, lo = 0.0}} : fx16.{sr}[{rows}]\n"
    text += f"  %p = argmax(%{last}) : idx[]\n  output scores = %{last}\n  output prediction = %p\n}}"
    g = parse_graph(text)
    g.analyses.fused = {"h": ["z", "r"] if relu else ["z"]}
    return g


def folded_value(ep, W, X):
    """E((W x + bias) >> shift) for rows X of clamped inputs: what the kernels compute."""
    y = (X @ W.T.astype(np.int64) + ep.bias[None, :]) >> ep.shift
    if ep.relu:
        return np.where(y < 0, 0, np.where(y > ep.hi, 32767, y << ep.n))
    return np.where(y < -(32768 >> ep.n), -32768, np.where(y > ep.hi, 32767, y << ep.n))


@settings(max_examples=60, deadline=None)
@given(rows=st.integers(1, 4), cols=st.integers(1, 6), seed=st.integers(0, 2**32 - 1),
       wbits=st.integers(4, 15), sh=st.integers(-2, 6), dz=st.integers(-1, 3), dr=st.integers(0, 2),
       relu=st.booleans(), bbits=st.integers(0, 15))
def test_a_folded_epilogue_equals_the_interpreter(rows, cols, seed, wbits, sh, dz, dr, relu, bbits):
    rng = np.random.default_rng(seed)
    W = rng.integers(-(2**wbits), 2**wbits, size=(rows, cols))
    b = rng.integers(-(2**bbits), 2**bbits, size=rows)
    lo, hi = sorted(rng.integers(-32768, 32768, size=2))
    sw = 10
    g = layer(W, b, lo, hi, (sw, sh, sh + dz, sh + dz + dr), relu)
    ep = fold(emitter(g), "h")
    if ep is None:
        return
    # random rows, and per output row the corners that drive its accumulator to either end
    corners = [np.where(W[r] > 0, s1, s2) for r in range(rows) for s1, s2 in ((hi, lo), (lo, hi))]
    X = np.concatenate([rng.integers(-32768, 32768, size=(8, cols)), np.array(corners)])
    want = run_fixed(g, X)["scores"]
    got = folded_value(ep, W, np.clip(X, lo, hi))
    np.testing.assert_array_equal(got, want)


def test_fold_proves_or_refuses():
    """An MLP-like layer folds (relu: its ends agree); the same add without the relu, where the head can
    saturate and the bias would then move it off the end, is refused; so is a coarser add (it rounds)."""
    W = np.array([[12000, -9000, 7000], [-3000, 2000, 15000]])
    b = np.array([300, -400])
    relu = fold(emitter(layer(W, b, -30000, 30000, (10, 2, 3, 4), True)), "h")
    assert relu is not None and relu.relu and relu.n == 2 and relu.shift == 8
    assert list(relu.bias) == [300 * 256 + 128, -400 * 256 + 128]
    assert fold(emitter(layer(W, b, -30000, 30000, (10, 2, 2, 2), False)), "h") is None
    assert fold(emitter(layer(W, b, -30000, 30000, (10, 2, 1, 1), True)), "h") is None
