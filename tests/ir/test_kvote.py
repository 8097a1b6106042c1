"""kvote's vectorised votes equal the definition: the k smallest distances by a stable sort (equal
distances: the lower index first), per row of a batch."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tinycc_ml.ir.ops import kvote_counts
from tinycc_ml.passes.fixed_pipeline import MIN_PROFILE_ROWS, profile_rows


def by_definition(d, labels, k, n_classes):
    nearest = np.argsort(d, kind="stable")[:k]
    return np.bincount(labels[nearest], minlength=n_classes).astype(np.float64)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 40), st.integers(1, 5), st.integers(1, 6), st.integers(0, 2**32 - 1), st.booleans())
def test_votes_are_the_stable_k_smallest(m, n_classes, rows, seed, few_values):
    rng = np.random.default_rng(seed)
    k = int(rng.integers(1, m + 1))
    labels = rng.integers(0, n_classes, m)
    # few distinct values: many ties at the k-th distance
    D = rng.integers(0, 3, size=(rows, m)) if few_values else rng.integers(-2**31, 2**31, size=(rows, m))
    got = kvote_counts(D, labels, k, n_classes)
    want = np.stack([by_definition(row, labels, k, n_classes) for row in D])
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(kvote_counts(D[0], labels, k, n_classes), want[0])
    assert np.all(got.sum(axis=1) == k)


def test_big_models_profile_a_seeded_subset_of_the_calibration():
    from tinycc_ml.models.prototypes import PrototypeModel

    rng = np.random.default_rng(0)
    refs = rng.normal(size=(20000, 16))
    graph = PrototypeModel(refs, rng.integers(0, 3, 20000), 3, 3).lower()
    X = rng.normal(size=(9000, 16))
    picked = profile_rows(graph, X)
    assert MIN_PROFILE_ROWS <= len(picked) < len(X)
    np.testing.assert_array_equal(picked, profile_rows(graph, X))  # the same rows every compile
    assert len(profile_rows(graph, X[:500])) == 500  # few rows: all of them
