"""`tinycc_ml.fit` with the scikit-learn families: an MLP (hidden units as the size knob) and Gaussian
naive Bayes (one size); both are trained, compiled and measured like the others."""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.datasets import load_iris
from sklearn.model_selection import train_test_split

import tinycc_ml
from tests.conftest import require_target
from tinycc_ml.search.candidates import FAMILIES, FAMILY_ORDER, describe_settings


def test_mlp_and_naive_bayes_families_are_searched():
    require_target("host")
    X, y = load_iris(return_X_y=True)
    X, Xt, y, yt = train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # MLP convergence on 100 rows
        res = tinycc_ml.fit(X, y, target="host", max_flash=2000, families="mlp,naive-bayes", sizes_per_family=2,
                            time_budget=None, X_test=Xt, y_test=yt)
    measured = [c for c in res.candidates if c.status == "measured"]
    assert {c.family for c in measured} == {"mlp", "naive-bayes"}
    assert res.chosen.family in ("mlp", "naive-bayes") and res.verification["accuracy"] >= 0.85
    sizes = sorted({c.settings["hidden_layer_sizes"][0] for c in measured if c.family == "mlp"})
    assert len(sizes) == 2 and sizes[0] >= 4
    assert np.mean(res.compiled.load().predict(Xt) == yt) == res.verification["accuracy"]
    assert describe_settings("mlp", {"hidden_layer_sizes": (8,)}) == "8 hidden units"
    assert {"mlp", "naive-bayes"} <= set(FAMILY_ORDER) and FAMILIES["naive-bayes"].fixed_size
