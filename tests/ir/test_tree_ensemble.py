"""The tree_ensemble op's contracts (hypothesis):
- the integer threshold rule: a decision on a quantised input x_q equals the float decision on its
  real value x_q * 2^-S, for every float32 threshold, scale and int16 input ("le" and "lt");
- float32 thresholds of float64 ones decide as the float64 ones on every float32 input;
- whole ensembles: the integer walk reaches the same leaves as the float walk on the real values, and
  the missing code (-2^15, what the quantiser gives a NaN) the leaves a NaN reaches (default sides);
- the quantiser gives NaN the missing code and no real value that code;
- walks (kept per row under a canonical rule) reach the leaves a plain per-row walk reaches, also for a
  feature and its thresholds scaled by a power of two (as input_scales does), whose walk is the same one;
- distinct_rows is np.unique of the rows' bytes."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.ir.test_op_oracle import random_forest_attrs
from tinycc_ml.ir.fixed import quantise
from tinycc_ml.ir.ops import ensembles
from tinycc_ml.ir.ops.ensembles import (
    NodeDecisions,
    default_left,
    distinct_rows,
    float_decisions,
    missing_code,
    threshold_ints,
    walk,
)
from tinycc_ml.models.trees import float32_threshold

FLOAT32 = st.floats(width=32, allow_nan=False, allow_infinity=False)
PROPERTY = settings(max_examples=300, deadline=None)


def one_node(t: float, compare: str) -> dict:
    return {"feature": np.array([0], dtype=np.int32), "threshold": np.array([t], dtype=np.float32),
            "compare": compare}


@PROPERTY
@given(t=FLOAT32, scale=st.integers(-16, 24), xq=st.lists(st.integers(-2**15 + 1, 2**15 - 1), min_size=1, max_size=8),
       compare=st.sampled_from(["le", "lt"]), near=st.booleans())
def test_integer_threshold_decides_as_the_float_threshold_on_the_quantised_value(t, scale, xq, compare, near):
    if near:  # inputs right at the threshold's grid point and its neighbours
        centre = int(np.clip(np.floor(np.float64(t) * 2.0**scale), -2**15 + 1, 2**15 - 1))
        xq = [int(np.clip(centre + d, -2**15 + 1, 2**15 - 1)) for d in (-1, 0, 1, 2)]
    x = np.asarray(xq, dtype=np.int64)
    T = threshold_ints(one_node(t, compare), scale, 16)[0]
    real = x * 2.0**-scale
    t64 = float(np.float32(t))
    expected = real < t64 if compare == "lt" else real <= t64
    np.testing.assert_array_equal(x <= T, expected)
    assert -(2**15) <= T <= 2**15 - 1  # fits int16: the missing code -2^15 <= T, so x <= T sends it left


@PROPERTY
@given(t=st.floats(-1e30, 1e30, allow_nan=False), steps=st.lists(st.integers(-3, 3), min_size=1, max_size=7),
       compare=st.sampled_from(["le", "lt"]))
def test_float32_threshold_decides_as_the_float64_threshold_on_float32_inputs(t, steps, compare):
    t32 = float32_threshold(t, compare)
    assert t32.dtype == np.float32
    x = np.float32(t)
    for step in steps:  # float32 neighbours of t on both sides
        y = x
        for _ in range(abs(step)):
            y = np.nextafter(y, np.float32(np.inf if step > 0 else -np.inf))
        y64 = float(y)
        if compare == "le":
            assert (y64 <= t) == (y <= t32)
        else:
            assert (y64 < t) == (y < t32)


@settings(max_examples=100, deadline=None)
@given(data=st.data(), n=st.integers(1, 5), scale=st.integers(-4, 15))
def test_integer_walk_reaches_the_float_walks_leaves(data, n, scale):
    attrs = data.draw(random_forest_attrs(n, scale))
    M = missing_code(16)
    X = np.asarray(data.draw(st.lists(st.lists(st.one_of(st.integers(M + 1, 2**15 - 1), st.just(M)),
                                               min_size=n, max_size=n), min_size=1, max_size=6)), dtype=np.int64)
    T = threshold_ints(attrs, scale, 16)
    dl = default_left(attrs)
    fixed_leaves = walk(attrs, NodeDecisions(X, T, attrs["feature"], False, dl, M))
    real = np.where(X == M, np.nan, X * 2.0**-scale)  # the missing code stands for a NaN
    float_leaves = walk(attrs, NodeDecisions(real, attrs["threshold"].astype(np.float64), attrs["feature"],
                                       attrs["compare"] == "lt", dl))
    np.testing.assert_array_equal(fixed_leaves, float_leaves)
    # the op's fixed-point semantics walks the float rule on the real values (the float32-rounded form)
    np.testing.assert_array_equal(walk(attrs, float_decisions(attrs, real)), fixed_leaves)
    np.testing.assert_array_equal(fixed_leaves, plain_walk(attrs, real))


@PROPERTY
@given(x=st.lists(st.floats(allow_nan=True, allow_infinity=True, width=32), min_size=1, max_size=8),
       scale=st.integers(-8, 20), bits=st.sampled_from([8, 16]))
def test_quantiser_gives_nan_the_missing_code_and_no_real_value_that_code(x, scale, bits):
    x = np.asarray(x, dtype=np.float64)
    q = quantise(x, scale, bits)
    M = missing_code(bits)
    np.testing.assert_array_equal(q == M, np.isnan(x))
    assert np.all(q <= 2 ** (bits - 1) - 1)


def plain_walk(attrs, X) -> np.ndarray:
    """Each row down each tree one node at a time (NaN to the node's default side): the oracle of walk."""
    feature, dl = attrs["feature"], default_left(attrs)
    t = attrs["threshold"].astype(np.float64)
    out = np.zeros((len(X), len(attrs["roots"])), dtype=np.int64)
    for r, row in enumerate(np.asarray(X, dtype=np.float64)):
        for k, node in enumerate(attrs["roots"]):
            while feature[node] >= 0:
                v = row[feature[node]]
                left = dl[node] if np.isnan(v) else (v < t[node] if attrs["compare"] == "lt" else v <= t[node])
                node = attrs["left"][node] if left else attrs["right"][node]
            out[r, k] = node
    return out


@settings(max_examples=100, deadline=None)
@given(data=st.data(), n=st.integers(1, 5), scale=st.integers(-4, 15))
def test_a_walk_of_power_of_two_scaled_features_is_the_same_walk(data, n, scale):
    attrs = data.draw(random_forest_attrs(n, scale))
    rows = data.draw(st.lists(st.lists(st.one_of(FLOAT32, st.just(float("nan"))), min_size=n, max_size=n),
                              min_size=1, max_size=6))
    X = np.asarray(rows, dtype=np.float32).astype(np.float64)
    shifts = np.asarray(data.draw(st.lists(st.integers(-6, 6), min_size=n, max_size=n)))
    scaled = dict(attrs)
    scaled["threshold"] = (attrs["threshold"] * 2.0 ** shifts[np.maximum(attrs["feature"], 0)]).astype(np.float32)
    moved = X * 2.0**shifts
    exact = (np.array_equal(scaled["threshold"].astype(np.float64) * 2.0 ** -shifts[np.maximum(attrs["feature"], 0)],
                            attrs["threshold"].astype(np.float64))
             and np.array_equal(moved.astype(np.float32).astype(np.float64) * 2.0**-shifts, X, equal_nan=True))
    ensembles.RECENT_WALKS.clear()
    first = walk(attrs, float_decisions(attrs, X))
    np.testing.assert_array_equal(first, plain_walk(attrs, X))
    np.testing.assert_array_equal(walk(scaled, float_decisions(scaled, moved)), plain_walk(scaled, moved))
    if exact:  # the same decisions, in the same canonical form: one walk, kept
        a, b = float_decisions(attrs, X), float_decisions(scaled, moved)
        assert a.rule_fingerprint() == b.rule_fingerprint()
        assert a.row_keys() == b.row_keys()
        np.testing.assert_array_equal(plain_walk(attrs, X), plain_walk(scaled, moved))


@PROPERTY
@given(data=st.data(), n=st.integers(0, 60), width=st.integers(1, 5), dtype=st.sampled_from(["int64", "int8",
                                                                                             "float32", "float64"]))
def test_distinct_rows_is_unique_of_the_rows_bytes(data, n, width, dtype):
    values = st.integers(-2, 2) if "int" in dtype else st.sampled_from([0.0, -0.0, 1.5, float("nan"), -3.25])
    rows = np.asarray(data.draw(st.lists(st.lists(values, min_size=width, max_size=width), min_size=n, max_size=n)),
                      dtype=dtype).reshape(n, width)
    got = distinct_rows(rows)
    _, first, inverse = np.unique(rows.view(np.dtype((np.void, rows.itemsize * width))).reshape(-1),
                                  return_index=True, return_inverse=True)
    np.testing.assert_array_equal(got[1], first)
    np.testing.assert_array_equal(got[2], np.asarray(inverse).reshape(-1))
    assert got[0].tobytes() == rows[first].tobytes()


def ordered_sums(attrs, leaves, values) -> np.ndarray:
    """The sums in tree order, a row and a tree at a time (the definition leaf_sums keeps)."""
    out = np.zeros((leaves.shape[0], int(attrs["n_outputs"])), dtype=values.dtype)
    for r in range(leaves.shape[0]):
        for t in range(leaves.shape[1]):
            out[r] += values[leaves[r, t]]
    return out


@settings(max_examples=60, deadline=None)
@given(data=st.data(), n_trees=st.integers(1, 40), rows=st.integers(1, 30),
       leaf=st.sampled_from(["one_hot", "dyadic", "tenths", "ints"]))
def test_leaf_sums_of_repeated_leaf_rows_are_the_sums_in_tree_order(data, n_trees, rows, leaf):
    """Forests whose leaves repeat a few rows (a fully grown classifier's pure leaves: one-hot) are summed as
    counts times the distinct rows where every partial sum is exact; the result is the ordered sums' bit for
    bit, and values whose sums round (tenths over many trees) take the ordered sums."""
    k = data.draw(st.integers(1, 4))
    distinct = {"one_hot": np.eye(k), "dyadic": np.array([[0.5, -0.25, 0.75, 1.0][:k], [2.0**-30] * k]),
                "tenths": np.array([[0.1] * k, [0.3] * k]), "ints": np.array([[3] * k, [-7] * k])}[leaf]
    per_tree = 6  # leaves per tree, each a row of ``distinct``
    value = distinct[np.array(data.draw(st.lists(st.integers(0, len(distinct) - 1), min_size=n_trees * per_tree,
                                                 max_size=n_trees * per_tree)))]
    attrs = {"feature": np.full(n_trees * per_tree, -1), "value": value.astype(np.float32),
             "tree_output": np.full(n_trees, -1), "n_outputs": k}
    leaves = np.array(data.draw(st.lists(st.integers(0, per_tree - 1), min_size=rows * n_trees,
                                         max_size=rows * n_trees))).reshape(rows, n_trees) + per_tree * np.arange(
        n_trees)
    values = attrs["value"].astype(np.int64 if leaf == "ints" else np.float64)
    want = ordered_sums(attrs, leaves, values)
    got = ensembles.leaf_sums(attrs, leaves, values)
    assert got.dtype == want.dtype
    assert got.tobytes() == want.tobytes()


def test_exact_in_any_order_is_the_float64_sums_exactness():
    assert ensembles.exact_in_any_order(np.eye(26), 10**6)  # one-hot rows: counts up to 10^6, integers
    assert ensembles.exact_in_any_order(np.array([[2.0**-40, 1.0]]), 2**12)  # 2^12 + 2^-28: 41 bits
    assert not ensembles.exact_in_any_order(np.array([[2.0**-40, 1.0]]), 2**14)  # 2^14 and 2^-40: 55 bits
    assert ensembles.exact_in_any_order(np.array([[0.1]]), 2)  # 0.1 + 0.1 is exact
    assert not ensembles.exact_in_any_order(np.array([[0.1]]), 3)  # 0.1 + 0.1 + 0.1 rounds
    assert ensembles.exact_in_any_order(np.array([[2**40]], dtype=np.int64), 2**12)
    assert not ensembles.exact_in_any_order(np.array([[2**40]], dtype=np.int64), 2**13)
    assert not ensembles.exact_in_any_order(np.array([[1.0]], dtype=np.float32), 2)  # float64 or int64 only


def test_a_forests_scores_are_scikit_learns_probabilities_times_its_trees():
    from sklearn.ensemble import RandomForestClassifier

    from tinycc_ml.api import as_model

    rng = np.random.default_rng(0)
    X = rng.integers(0, 4, size=(400, 3)).astype(np.float64)  # repeated rows with other labels: impure leaves too
    y = (X[:, 0] + rng.integers(0, 3, 400)) % 5
    forest = RandomForestClassifier(30, random_state=0).fit(X, y)
    model = as_model(forest)
    np.testing.assert_allclose(model.scores(X) / 30, forest.predict_proba(X), rtol=0, atol=1e-12)
    pure = RandomForestClassifier(30, random_state=0).fit(X, X[:, 0] + 2 * X[:, 1])  # pure leaves: one-hot
    np.testing.assert_allclose(as_model(pure).scores(X) / 30, pure.predict_proba(X), rtol=0, atol=1e-12)
