"""Tree tables beyond the narrow types: feature indices past 32,767 (where a 16-bit entry's top bit
flags default-left nodes) and past 65,535, and sparse leaf runs past 32,767 entries. The ensembles are
built directly (complete trees in array form), so the C is compared with the model's own numpy walk."""

from __future__ import annotations

import numpy as np
import pytest

import tinycc_ml
from tinycc_ml.errors import CompileError
from tinycc_ml.models.trees import TreeEnsembleModel


def complete_trees(n_trees: int, depth: int, features, n_outputs: int, rng, leaf_nonzeros: int | None = None):
    """Arrays of ``n_trees`` complete trees of ``depth`` levels, each node testing one of ``features``
    with a random default side; vector leaves with ``leaf_nonzeros`` non-zero values (None: one scalar
    leaf per tree, all adding to output 0)."""
    per_tree = 2 ** (depth + 1) - 1
    n_inner = 2**depth - 1
    local = np.arange(per_tree)
    feature, threshold, left, right, default_left, value = [], [], [], [], [], []
    width = n_outputs if leaf_nonzeros else 1
    for t in range(n_trees):
        base = t * per_tree
        inner = local < n_inner
        feature.append(np.where(inner, rng.choice(features, per_tree), -1))
        threshold.append(np.where(inner, rng.normal(size=per_tree), 0.0))
        left.append(np.where(inner, base + 2 * local + 1, -1))
        right.append(np.where(inner, base + 2 * local + 2, -1))
        default_left.append(np.where(inner, rng.integers(0, 2, per_tree), 0))
        leaf = np.zeros((per_tree, width))
        for i in np.flatnonzero(~inner):
            cols = rng.choice(width, leaf_nonzeros, replace=False) if leaf_nonzeros else [0]
            leaf[i, cols] = rng.integers(1, 64, len(cols)) / 64.0
        value.append(leaf)
    roots = np.arange(n_trees) * per_tree
    tree_output = np.full(n_trees, -1 if leaf_nonzeros else 0)
    return dict(feature=np.concatenate(feature), threshold=np.concatenate(threshold), left=np.concatenate(left),
                right=np.concatenate(right), value=np.concatenate(value), roots=roots, tree_output=tree_output,
                base=np.zeros(n_outputs), default_left=np.concatenate(default_left))


def rows_on(features, input_dim: int, n: int, rng) -> np.ndarray:
    X = np.zeros((n, input_dim), dtype=np.float32)
    X[:, features] = rng.normal(size=(n, len(features)))
    X[::5, features[0]] = np.nan  # missing values take the default sides the table's flags hold
    return X


@pytest.mark.parametrize("features", [[3, 32768, 40000, 65535], [3, 40000, 65536, 69999]],
                         ids=["flag-bit-collides", "beyond-uint16"])
def test_feature_indices_past_the_narrow_flagged_entry_walk_the_right_feature(features):
    rng = np.random.default_rng(0)
    input_dim = 70000
    model = TreeEnsembleModel(**complete_trees(2, 6, features, 1, rng), input_dim=input_dim)
    X = rows_on(features, input_dim, 300, rng)
    result = tinycc_ml.compile(model, "host")
    assert [k["kernel"] for k in result.report["kernels"]] == ["trees-table"]
    np.testing.assert_allclose(result.load().decision_function(X)[:, 0], model.scores(X)[:, 0], atol=1e-5)
    assert "uint32_t" in result.files["trees.c"] or features[-1] < 65536


@pytest.mark.parametrize("precision", ["float", "int16"])
def test_sparse_leaf_runs_past_32767_entries_are_indexed_in_int32(precision):
    """(int16: the forest's own sums, whose leaf words name the runs' starts, all below 32,768.)"""
    rng = np.random.default_rng(1)
    features = [0, 1, 2, 3]
    # 41 trees x 8 leaves, 100 non-zero values each of 128: the last run starts at entry 32,700 (a
    # reference int16 holds) and ends at 32,799, past it
    model = TreeEnsembleModel(**complete_trees(41, 3, features, 128, rng, leaf_nonzeros=100), input_dim=4)
    X = rng.normal(size=(200, 4)).astype(np.float32)
    result = tinycc_ml.compile(model, "host", precision=precision, calibration=None if precision == "float" else X)
    (kernel,) = result.report["kernels"]
    assert kernel["leaves"].endswith("(output, value) runs")
    assert "int32_t leaf" in result.files["trees.c"]
    if precision == "float":
        np.testing.assert_allclose(result.load().decision_function(X), model.scores(X), atol=1e-4)
        return
    from tinycc_ml.ir.fixed import quantise, run_fixed

    Xq = quantise(X, result.output.input_scale, 16).astype(np.int16)
    want = run_fixed(result.graph, Xq)
    predictor = result.load()
    assert np.array_equal(predictor.scores(X), want["scores"])
    assert np.array_equal(predictor.predict_index(X), want["prediction"])


def trees_on(X: np.ndarray, compare: str, rng) -> TreeEnsembleModel:
    """Three depth-5 trees on X's features, their thresholds X's own values (decisions between real rows)."""
    arrays = complete_trees(3, 5, list(range(X.shape[1])), 1, rng)
    inner = arrays["feature"] >= 0
    rows = rng.integers(0, len(X), inner.size)
    arrays["threshold"] = np.where(inner, X[rows, np.maximum(arrays["feature"], 0)], 0.0)
    return TreeEnsembleModel(**arrays, input_dim=X.shape[1], compare=compare)


@pytest.mark.parametrize("compare", ["le", "lt"])
@pytest.mark.parametrize("size", [1e12, 1e-12])
def test_integer_tree_builds_give_each_feature_its_own_shift(size, compare):
    """Issue 36, item 7: the shifts were clipped to [-16, 24], so a feature of size 1e12 took 11 bits from
    every feature and one of 1e-12 rounded to 0. Each feature now keeps the shift its own range allows."""
    from tinycc_ml.ir.fixed import quantise

    rng = np.random.default_rng(2)
    X = rng.normal(size=(400, 4)) * np.array([size, 1.0, 1.0, 1.0])
    model = trees_on(X, compare, rng)
    result = tinycc_ml.compile(model, "host", precision="int16", calibration=X)
    shifts = np.asarray(result.output.input_scale)
    plain = tinycc_ml.compile(model, "host", precision="int16", calibration=X / [size, 1, 1, 1]).output.input_scale
    np.testing.assert_array_equal(shifts[1:], np.asarray(plain)[1:])
    assert abs(int(shifts[0]) - (int(plain[0]) - round(np.log2(size)))) <= 1
    # the build decides exactly as the model on the rows it receives (x_int 2^-s), and those are close to X
    received = quantise(X, shifts, 16) * 2.0**-shifts
    np.testing.assert_allclose(result.load().decision_function(X)[:, 0], model.scores(received)[:, 0], atol=1e-3)
    assert np.mean(model.scores(received)[:, 0] == model.scores(X)[:, 0]) > 0.97  # 16 bits of every feature


def test_a_feature_too_small_for_any_float32_shift_is_refused_by_name():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(100, 3)) * np.array([1.0, 1e-36, 1.0])
    with pytest.raises(CompileError, match="feature 1: its calibrated values reach only"):
        tinycc_ml.compile(trees_on(X, "le", rng), "host", precision="int16", calibration=X)
