"""Model families (parameter containers that lower to the IR) and their scikit-learn estimators.

    from tinycc_ml.models import ProtoNNClassifier, BonsaiClassifier, SNCClassifier, \\
        NearestPrototypeClassifier, KNNClassifier, ProtoNNRegressor, BonsaiRegressor

The estimators are imported on first use, so importing the compiler does not load the trainers.
"""

from __future__ import annotations

import importlib

_ESTIMATORS = {
    "ProtoNNClassifier": "tinycc_ml.models.protonn_trainer",
    "BonsaiClassifier": "tinycc_ml.models.bonsai_trainer",
    "SNCClassifier": "tinycc_ml.models.snc",
    "NearestPrototypeClassifier": "tinycc_ml.models.npc",
    "KNNClassifier": "tinycc_ml.models.knn",
    "ProtoNNRegressor": "tinycc_ml.models.regressors",
    "BonsaiRegressor": "tinycc_ml.models.regressors",
}

__all__ = sorted(_ESTIMATORS)


def __getattr__(name: str):
    if name in _ESTIMATORS:
        return getattr(importlib.import_module(_ESTIMATORS[name]), name)
    raise AttributeError(f"module 'tinycc_ml.models' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
