"""Sparse mat-vec kernels (kernels_sparse): the run format and the cost model's choice, and every
build bit-exact with the fixed-point interpreter on simulated chips across sparsity patterns from
empty to full, with empty rows and columns, both weight widths, inputs that may be negative."""

from __future__ import annotations

import re

import numpy as np
import pytest

import tinycc_ml
from tests.conftest import require_target
from tinycc_ml.avr import cost as avr_cost
from tinycc_ml.avr.cost import avr_candidates, sparse_format_ok
from tinycc_ml.avr.sparse import sparse_image
from tinycc_ml.ir.fixed import quantise, run_fixed
from tinycc_ml.ir.graph import Graph
from tinycc_ml.ir.ops import dense_to_sparse_attrs
from tinycc_ml.ir.types import F32, TensorType
from tinycc_ml.models.base import Model
from tinycc_ml.runtime.simulate import run_on_target
from tinycc_ml.target import PAGE_COLS, choose_kernel


class TwoSparse(Model):
    """scores = W2 (W1 x), both matrices stored sparse whatever their density: the first reads the
    clamped input, the second a signed intermediate (the kernel's offset path)."""

    family = "two_sparse_test"

    def __init__(self, W1, W2):
        self.W1, self.W2 = W1, W2

    def arrays(self):
        return {"W1": self.W1, "W2": self.W2}

    input_dim = property(lambda self: self.W1.shape[1])
    n_outputs = property(lambda self: self.W2.shape[0])

    def scores(self, X):
        return self._check_input(X) @ self.W1.T @ self.W2.T

    def lower(self):
        g = Graph("two_sparse")
        x = g.add("input", attrs={"name": "x"}, type=TensorType((self.input_dim,), F32), name="x")
        w1 = g.add("sparse_const", attrs=dense_to_sparse_attrs(self.W1.astype(np.float32)), name="W1")
        w2 = g.add("sparse_const", attrs=dense_to_sparse_attrs(self.W2.astype(np.float32)), name="W2")
        h = g.add("matvec", [w1, x], name="h")
        s = g.add("matvec", [w2, h], name="s")
        g.set_output("scores", s)
        g.set_output("prediction", g.add("argmax", [s], name="pred"))
        return g


def random_sparse(rng, rows, cols, density, empty_rows=(), empty_cols=()):
    W = rng.normal(size=(rows, cols)) * (rng.random((rows, cols)) < density)
    W[list(empty_rows), :] = 0
    W[:, list(empty_cols)] = 0
    if not W.any():  # keep one weight so that scales can be chosen
        W[0, 0] = 1.0
    return W / np.sqrt(cols)


# (D, hidden, classes, density of W1, density of W2, signed inputs, empty columns in W1)
CASES = [
    (256, 25, 10, 0.3, 0.5, False, True),  # SeeDot's shape of W, two pages of columns
    (256, 25, 10, 0.3, 0.5, False, False),  # every column read: the clamp walks all columns
    (64, 9, 4, 0.02, 1.0, True, True),  # nearly empty, and a full matrix stored sparse
    (131, 6, 3, 1.0, 0.0, True, False),  # full first layer over a page boundary; an (almost) empty second one
    (300, 12, 5, 0.7, 0.3, False, True),  # three pages, odd column count
    (200, 40, 3, 0.1, 0.6, True, True),  # a second layer the sparse kernel takes (x offset, no clamp)
    (37, 1, 2, 0.5, 0.5, True, False),  # one hidden unit
]


def _build(model, X, precision, target, tmp_path, name="sk"):
    out = tmp_path / f"{name}_{precision}_{target}"
    return tinycc_ml.compile(model, target=target, precision=precision, calibration=X[:300], out_dir=out,
                             name=name), out


def _check(result, out, X, target):
    o = result.output
    Xq = quantise(X, o.input_scale, 16).astype(np.int16)
    want = run_fixed(result.graph, Xq)
    run = run_on_target(target, [str(out / f"{o.prefix}.c")], str(out / f"{o.prefix}.h"), o.prefix, Xq,
                        o.n_scores, o.input_ctype, o.score_ctype, extra_cflags=("-Werror",))
    np.testing.assert_array_equal(run.scores, want["scores"])
    np.testing.assert_array_equal(run.predictions, want["prediction"])
    return run


def case_data(case):
    """(W1, W2, X) of one CASES entry: empty rows and, with gaps, empty columns in W1."""
    D, hidden, classes, d1, d2, signed, gaps = case
    rng = np.random.default_rng(D + hidden)
    W1 = random_sparse(rng, hidden, D, d1, empty_rows=[hidden - 1] if hidden > 2 else (),
                       empty_cols=range(0, D, 7) if gaps else ())
    W2 = random_sparse(rng, classes, hidden, d2)
    X = rng.normal(size=(360, D)) if signed else rng.random((360, D)) * rng.uniform(0.2, 4, size=D)
    return W1, W2, X


@pytest.mark.parametrize("case", CASES, ids=[f"D{c[0]}-h{c[1]}-{c[3]}-{c[4]}-{'gaps' if c[6] else 'all'}"
                                             for c in CASES])
@pytest.mark.parametrize("precision", ["int16", "int8"])
@pytest.mark.parametrize("target", ["avr", "cortex-m0"])
def test_sparse_kernel_bit_exact(case, precision, target, tmp_path):
    require_target(target)
    D, hidden = case[:2]
    W1, W2, X = case_data(case)
    result, out = _build(TwoSparse(W1, W2), X, precision, target, tmp_path)
    kernels = {k["matrix"]: k for k in result.report["kernels"]}
    assert set(kernels) == {"W1_q", "W2_q"}
    chip = "avr" if target == "avr" else "m0"
    for k in kernels.values():  # the cheapest predicted candidate within the CSC (or the dense kernel's) flash
        limit = max(c["flash"] for n, c in k["candidates"].items()
                    if "cycles" in c and n in ("csc-c", f"{chip}-dense-asm"))
        fits = {n: c for n, c in k["candidates"].items() if "cycles" in c and c["flash"] <= limit}
        assert k["kernel"] == min(fits, key=lambda n: fits[n]["cycles"])
    assert {f"{chip}-sparse-asm", f"{chip}-dense-asm"} & {k["kernel"] for k in kernels.values()}
    if (D, hidden) == (256, 25):  # SeeDot's shape: the sparse kernel wins
        assert kernels["W1_q"]["kernel"] == f"{chip}-sparse-asm"
    _check(result, out, X[300:], target)


@pytest.mark.parametrize("target", ["avr", "cortex-m0"])
def test_sparse_kernel_extremes(target, tmp_path):
    # full-scale weights (|w| = 2^15 and 2^7 after quantisation), inputs at the clamp bounds and beyond
    require_target(target)
    rng = np.random.default_rng(7)
    W1 = random_sparse(rng, 5, 140, 0.25)
    W1[2, 3], W1[3, 139] = 5.0, -5.0
    W2 = random_sparse(rng, 3, 5, 0.8)
    X = rng.normal(size=(340, 140))
    X[300:] *= 40  # far outside the calibration range: clamped
    for precision in ("int16", "int8"):
        result, out = _build(TwoSparse(W1, W2), X, precision, target, tmp_path)
        assert {"avr-sparse-asm", "m0-sparse-asm"} & {k["kernel"] for k in result.report["kernels"]}
        _check(result, out, X[280:], target)


@pytest.mark.parametrize("case", [CASES[0], CASES[3], CASES[5]], ids=["seedot", "full-131", "offset"])
def test_loop_kernel_bit_exact(case, monkeypatch, tmp_path):
    # the AVR kernel that reads the runs' counts from flash (taken when the driver kernel's code would be
    # too long): forced here on shapes the driver kernel takes by default
    require_target("avr")
    monkeypatch.setattr(avr_cost, "DRIVER_MAX_CALLS", 0)
    monkeypatch.setattr(avr_cost, "avr_sparse_code", lambda *a: 0)  # its code's size: chosen all the same
    W1, W2, X = case_data(case)
    for precision in ("int16", "int8"):
        result, out = _build(TwoSparse(W1, W2), X, precision, "avr", tmp_path)
        assert "avr-sparse-asm" in {k["kernel"] for k in result.report["kernels"]}
        assert re.search(r"sk_spmv\d+_\d+x\d", result.files["sk.c"])  # the loop kernel's name: rows x pages
        _check(result, out, X[300:], "avr")


def test_own_x_buffer_dropped_when_the_ram_is_short(tmp_path):
    # SeeDot's W then a small W2 at int8: W2's sparse kernel would need an aligned x buffer of its own, which
    # (with its padding) takes the firmware past the ATmega328P's 2 KB: the build is redone without it
    require_target("avr")
    W1, W2, X = case_data(CASES[0])
    result, _ = _build(TwoSparse(W1, W2), X, "int8", "avr", tmp_path)
    kernels = {k["matrix"]: k for k in result.report["kernels"]}
    assert kernels["W1_q"]["kernel"] == "avr-sparse-asm"  # its x is the clamp's arena slot
    assert kernels["W2_q"]["kernel"] != "avr-sparse-asm" and "would not fit" in kernels["W2_q"]["note"]
    assert "xpage" not in result.files["sk.c"] and result.report["fit"]["ram_bytes"] <= 2048


def test_format_that_cannot_hold_the_matrix_falls_back_and_says_so(tmp_path):
    # 300 positive weights in one row overflow the kernel's 24-bit partial sums: another kernel, noted
    rng = np.random.default_rng(3)
    W1 = np.zeros((3, 320))
    W1[0, :300] = rng.uniform(0.1, 1, 300)
    W1[1, ::9] = rng.normal(size=36)
    assert "row 0 has 300 positive weights" in sparse_format_ok(np.sign(W1).astype(np.int64), 16)
    W2 = rng.normal(size=(2, 3))
    X = rng.random((340, 320))
    result, out = _build(TwoSparse(W1, W2), X, "int16", "avr", tmp_path)
    k = next(k for k in result.report["kernels"] if k["matrix"] == "W1_q")
    assert k["kernel"] != "avr-sparse-asm" and "positive weights" in k["note"]
    require_target("avr")
    _check(result, out, X[300:], "avr")


def test_run_format_layout():
    # hand-checked: row 0 has +3 at column 1 and -2 at column 130 (page 1, byte offset 4); row 1 is empty
    A = np.zeros((2, 131), np.int64)
    A[0, 1], A[0, 130] = 3, -2
    img = list(sparse_image(A, 16, offset=False))
    assert img == [1, 2, 3, 0, 0,  # page 0: one positive (offset 2, |w| = 3), no negative
                   0, 1, 4, 2, 0,  # page 1: no positive, one negative (offset 4, |w| = 2)
                   0, 0, 0, 0]  # row 1: four empty runs
    assert len(img) == 14
    img = list(sparse_image(A, 8, offset=True))
    k0 = (-(1 << 15)) % (1 << 32)  # -2^15 * (3 - 2), after the row's runs
    assert img[:8] == [1, 2, 3, 0, 0, 1, 4, 2]
    assert img[8:12] == [k0 & 255, (k0 >> 8) & 255, (k0 >> 16) & 255, k0 >> 24]
    assert img[12:] == [0, 0, 0, 0] + [0, 0, 0, 0]  # row 1: four empty runs, K = 0
    assert PAGE_COLS == 128
    # the driver kernel's form: the same entries without the count bytes (its code holds them)
    assert list(sparse_image(A, 16, offset=False, counts=False)) == [2, 3, 0, 4, 2, 0]
    assert list(sparse_image(A, 8, offset=True, counts=False)) == [2, 3, 4, 2] + img[8:12] + [0, 0, 0, 0]


def test_cost_model_prefers_dense_when_full_and_sparse_when_sparse():
    rng = np.random.default_rng(0)
    full = rng.integers(-100, 100, size=(10, 64))
    full[full == 0] = 1
    cands = avr_candidates(full, 16, offset=False, clamp="all")
    assert choose_kernel(cands, "csc-c") == "avr-dense-asm"  # no bigger than CSC, and faster
    sparse = full * (rng.random((10, 64)) < 0.2)
    cands = avr_candidates(sparse, 16, offset=False, clamp="all")
    assert choose_kernel(cands, "csc-c") == "avr-sparse-asm"
    assert cands["avr-sparse-asm"].flash <= cands["avr-dense-asm"].flash  # its code counted


@pytest.mark.parametrize("target", ["avr", "cortex-m0"])
def test_no_density_cliff_the_cost_model_sees_dense_constants(target, tmp_path):
    # W 60% dense is lowered as a dense constant (above lowering.SPARSE_DENSITY): the cost model still weighs
    # the sparse kernel for it, and the chosen build (the input clamp fused either way) is bit-exact
    from tinycc_ml.models.linear import LinearModel
    from tinycc_ml.models.lowering import SPARSE_DENSITY

    require_target(target)
    rng = np.random.default_rng(5)
    W = random_sparse(rng, 6, 140, 0.6)
    assert np.count_nonzero(W) >= SPARSE_DENSITY * W.size
    X = rng.random((320, 140)) * 3
    chip = "avr" if target == "avr" else "m0"
    result, out = _build(LinearModel(W), X, "int16", target, tmp_path)
    assert result.graph.op(result.graph.node("weighted").inputs[0]) == "const"
    (k,) = result.report["kernels"]
    assert set(k["candidates"]) == {f"{chip}-sparse-asm", f"{chip}-dense-asm"}
    cands = k["candidates"]
    fits = [n for n, c in cands.items() if "cycles" in c and c["flash"] <= cands[f"{chip}-dense-asm"]["flash"]]
    assert k["kernel"] == min(fits, key=lambda n: cands[n]["cycles"])
    _check(result, out, X[300:], target)


def test_sparse_matrix_run_dense_has_the_clamp_in_asm(tmp_path):
    # a sparse constant the Cortex-M0 cost model sends to the dense kernel: the input clamp is the fused asm
    # clamp (storing x + 2^15 and its sum), as for a dense constant, not a C loop
    require_target("cortex-m0")
    rng = np.random.default_rng(6)
    W1 = random_sparse(rng, 18, 100, 0.48)
    W2 = random_sparse(rng, 3, 18, 1.0)
    X = rng.random((320, 100)) * 3
    result, out = _build(TwoSparse(W1, W2), X, "int16", "cortex-m0", tmp_path)
    kernels = {k["matrix"]: k["kernel"] for k in result.report["kernels"]}
    assert kernels["W1_q"] == "m0-dense-asm"
    src = result.files["sk.c"]
    assert re.search(r"sk_clamp100_\w+\(x, \(uint16_t \*\)", src)
    _check(result, out, X[300:], "cortex-m0")
