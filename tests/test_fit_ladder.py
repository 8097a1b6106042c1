"""fit's ladders propose only sizes a model can have, its failures read plainly, and its screens rank families
as their fully trained models do."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.datasets import make_classification
from sklearn.linear_model import LogisticRegression
from sklearn.neural_network import MLPClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from tinycc_ml.api import as_model
from tinycc_ml.codegen.backend import get_backend
from tinycc_ml.search.candidates import FAMILIES, FAMILY_ORDER, Ladder
from tinycc_ml.search.fit import _Search, run_candidate
from tinycc_ml.search.limits import Limits
from tinycc_ml.search.measure import measure
from tinycc_ml.search.pareto import Candidate, not_measured


def _climbed(ladder: Ladder) -> list[int]:
    """Every size the ladder plans: rung 0, the rungs planned from it (measured at its nominal cost), the
    refinements."""
    for p in ladder.precisions:
        size = ladder.sizes[0]
        flash = ladder.predicted_flash(p, size)
        ladder.learn(p, size, max(1, int(flash - ladder.cost[p].code)), int(flash))
    ladder.extend()
    while ladder.refine():
        pass
    return ladder.sizes


@settings(max_examples=60, deadline=None)
@given(family=st.sampled_from(FAMILY_ORDER), n_features=st.integers(1, 80), n_classes=st.integers(2, 30),
       n_rows=st.integers(60, 20000), flash=st.sampled_from([2048, 16384, 32768 - 4096, 131072]),
       rungs=st.integers(1, 5))
def test_every_proposed_size_is_one_the_model_can_have(family, n_features, n_classes, n_rows, flash, rungs):
    fam = FAMILIES[family]
    ladder = Ladder(fam, ("int16", "int8"), flash, 1024, n_features, n_classes, n_rows, rungs)
    for size in _climbed(ladder):
        assert size >= 1
        s = fam.settings(size, 0, n_features, n_classes)
        if family == "protonn" and "projection_dim" in s:  # d̂ projects the D features: never wider
            assert s["projection_dim"] <= n_features
        if family == "snc":
            assert n_classes <= s["n_prototypes"] <= n_rows
        if family == "nearest-prototype":
            assert s["prototypes_per_class"] * n_classes <= n_rows
        if family == "mlp":
            assert s["hidden_layer_sizes"][0] >= 1


def test_protonn_on_letter_shaped_data_projects_at_most_its_16_features():
    ladder = Ladder(FAMILIES["protonn"], ("int8",), 1e9, 1024, 16, 26, 16000, 4)
    widths = [FAMILIES["protonn"].settings(s, 0, 16, 26).get("projection_dim") for s in _climbed(ladder)]
    assert 16 in widths and all(d is None or d <= 16 for d in widths)


def test_a_build_too_big_for_the_chip_is_said_without_model_model_and_whole():
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(40, 3000)), np.arange(40) % 10
    model = as_model(LogisticRegression(max_iter=50).fit(X, y))
    m, _ = measure(model, "avr", "int16", X[:8], X[:8], y[:8], X[:2], name="model")
    assert m.misfit == "chip"
    assert "model model" not in m.error
    assert m.error.startswith("does not fit the ATmega328P: its constants alone need at least ")
    assert m.error.endswith("searches the sizes that fit")  # the whole message, the advice at its end


def test_what_was_not_measured_is_said_by_a_whole_clause():
    c = Candidate(0, "snc", {"n_prototypes": 40}, "int8", status="failed",
                  note="40 prototypes cannot cover 50 classes (one per class at least); more words")
    assert not_measured([c]) == ["failed: 40 prototypes cannot cover 50 classes (one per class at least) (snc 1)"]


def _screen_accuracies(X, y, families):
    """Each family's screening size trained on the screening rows and measured (host, float): family -> the
    validation accuracy, and the search (for its split)."""
    classes, index = np.unique(y, return_inverse=True)
    backend = get_backend("host")
    limits = Limits.make("host", backend, None, None, None, None)
    search = _Search(X, y, index, classes, backend, limits, ("float",), families, None, 0, 4, 0.2, 8, "model")
    assert search.screen_index is not None
    accuracy = {}
    for family in families:
        ladder = search.ladders[family]
        plan = search.plan(family, ladder, ladder.sizes[0], 0)
        assert plan.screen_rows == len(search.screen_index)
        outcome = run_candidate(search.task(plan))
        assert outcome.status == "measured", outcome.note
        accuracy[family] = outcome.measurements[0].accuracy
    return accuracy, search


def test_a_screen_ranks_the_mlp_no_lower_than_a_model_it_beats_trained_fully():
    # ten classes on twelve informative features: the MLP trained on every row beats logistic regression and
    # naive Bayes by far more than the validation rows' noise
    X, y = make_classification(n_samples=3000, n_features=16, n_informative=12, n_redundant=0, n_classes=10,
                               n_clusters_per_class=1, class_sep=1.5, random_state=1)
    screened, search = _screen_accuracies(X, y, ("linear", "mlp", "naive-bayes"))
    full_mlp = make_pipeline(StandardScaler(), MLPClassifier((32,), max_iter=500, random_state=0))
    by_hand = full_mlp.fit(search.X_fit, search.y_fit).score(search.X_val, search.val_index)  # classes 0-9
    for other in ("linear", "naive-bayes"):
        assert by_hand > screened[other] + 0.04  # clear-cut: the MLP is the better family here
        assert screened["mlp"] >= screened[other], screened
