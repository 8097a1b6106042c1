"""A single tree on the Cortex-M4 / M0 (chips with flash to spare: CTarget.tree_code_budget) is nested compares with
its thresholds as immediates, for predict's class tree and for the scores, where it walked the node table whatever
the budget (digits DT(depth 8) on the M4: 80 instructions a prediction; micromlgen's nested ifs 35). The ATmega328P
(no budget) keeps the table walk. Exact against the interpreters in QEMU."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_digits
from sklearn.tree import DecisionTreeClassifier

import tinycc_ml
from tests.conftest import require_target
from tinycc_ml.ir.fixed import quantise
from tinycc_ml.runtime.simulate import run_on_target
from tinycc_ml.testing import check_model


@pytest.fixture(scope="module")
def digits_tree():
    X, y = load_digits(return_X_y=True)
    return DecisionTreeClassifier(max_depth=8, random_state=0).fit(X[:1200], y[:1200]), X[:1200], X[1200:1400]


def tree_kernels(result) -> set:
    return {k["kernel"] for k in result.report["kernels"]
            if k.get("op") == "tree_ensemble" and k.get("entry") != "predict_float"}


def test_the_budget_chooses_code_for_a_single_tree(digits_tree):
    clf, X, _ = digits_tree
    for target in ("cortex-m4", "cortex-m0"):
        result = tinycc_ml.compile(clf, target=target, precision="int16", calibration=X)
        assert tree_kernels(result) == {"trees-straight", "trees-straight-class"}, target
    avr = tinycc_ml.compile(clf, target="avr", precision="int16", calibration=X)
    assert tree_kernels(avr) == {"trees-table", "trees-table-class"}


@pytest.mark.toolchain
def test_m4_tree_code_exact_and_about_micromlgens_instructions(digits_tree, tmp_path):
    require_target("cortex-m4")
    clf, X, X_te = digits_tree
    check_model("cortex-m4", clf, np.vstack([X_te[:40], np.where(np.eye(64, dtype=bool)[:20], np.nan, X_te[40:60])]),
                "int16", tmp_path / "exact", calibration=X)
    result = tinycc_ml.compile(clf, target="cortex-m4", precision="int16", calibration=X, name="m",
                               out_dir=tmp_path / "run")
    o = result.output
    run = run_on_target("cortex-m4", [str(tmp_path / "run" / "m.c")], str(tmp_path / "run" / "m.h"), "m",
                        quantise(X_te, o.input_scale, 16).astype(np.int16), o.n_scores, o.input_ctype, o.score_ctype)
    assert np.mean(run.instructions) <= 40  # the node table's walk: about 80
