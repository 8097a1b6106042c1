"""What every model family provides: a parameter container that validates, saves, has a numpy
float reference (independent of the IR, so the IR and the backends can be checked against it) and
lowers itself to the IR."""

from __future__ import annotations

import math
from pathlib import Path
from typing import ClassVar

import numpy as np

from tinycc_ml.errors import DataError, ModelFileError
from tinycc_ml.models.proba import INPUT_RULES, proba_from_inputs, proba_from_scores
from tinycc_ml.models.saved import save_model_file
from tinycc_ml.plugins import Registry

FAMILY_GROUP = "tinycc_ml.families"
BUILTIN_FAMILIES = {
    "protonn": "tinycc_ml.models.protonn:ProtoNNModel",
    "bonsai": "tinycc_ml.models.bonsai:BonsaiModel",
    "prototype": "tinycc_ml.models.prototypes:PrototypeModel",
    "linear": "tinycc_ml.models.linear:LinearModel",
    "trees": "tinycc_ml.models.trees:TreeEnsembleModel",
    "mlp": "tinycc_ml.models.mlp:MLPModel",
    "gaussian_nb": "tinycc_ml.models.naive_bayes:GaussianNBModel",
    "svm": "tinycc_ml.models.svm:SVMModel",
    "calibrated": "tinycc_ml.models.calibrated:CalibratedModel",
    "calibrated_folds": "tinycc_ml.models.calibrated:CalibratedFoldsModel",
    "front_end": "tinycc_ml.models.front_end:FrontEndModel",
}
# Model files name their family; this finds its class (plug-ins: entry-point group tinycc_ml.families).
MODEL_FAMILIES = Registry("model family", FAMILY_GROUP, BUILTIN_FAMILIES)

CLASSES_META_KEY = "classes"


def _integral(v) -> bool:
    """An int, or a float with an integer value (ints beyond float's range included)."""
    return isinstance(v, int) or (math.isfinite(v) and float(v).is_integer())


def check_classes(classes, n_classes: int, source: str = "model") -> np.ndarray:
    """Class labels as an int64 array or a str array, one per class, all distinct.

    Integer-valued floats and booleans become integers; any other kind of label is refused
    because the model file and the generated C only hold integers and strings."""
    values = np.asarray(classes).tolist() if isinstance(classes, np.ndarray) else classes
    if not isinstance(values, (list, tuple)) or len(values) != n_classes:
        count = len(values) if isinstance(values, (list, tuple)) else "no list of"
        raise ModelFileError(f"{source}: {count} class labels for a model with {n_classes} classes")
    if all(isinstance(v, str) for v in values):
        nul = [v for v in values if "\x00" in v]
        if nul:  # a C string ends at its first NUL: the label would be cut short in the generated code
            raise ModelFileError(f"{source}: class label {nul[0]!r:.40} contains a NUL character, which a C string "
                                 "cannot hold")
        array = np.asarray(values, dtype=str)
    elif all(isinstance(v, (int, float)) and _integral(v) for v in values):
        wide = [v for v in values if not -(2**63) <= v <= 2**63 - 1]
        if wide:
            raise ModelFileError(f"{source}: class label {wide[0]!r:.40} is beyond int64, the widest label type "
                                 "of the model file and the generated C")
        array = np.asarray([int(v) for v in values], dtype=np.int64)  # bools and 1.0 become ints
    else:
        raise ModelFileError(f"{source}: class labels {list(values)[:5]} are neither all integers nor all strings")
    if len(set(array.tolist())) != array.size:
        raise ModelFileError(f"{source}: class labels repeat a value ({array.tolist()})")
    return array

CLASSIFICATION = {"kind": "classification"}


def check_task(task, source: str = "model") -> dict:
    """Validate what a model's scores mean (see ``Model.task``); errors name ``source``."""
    if task is None:
        return dict(CLASSIFICATION)
    kind = task.get("kind") if isinstance(task, dict) else None
    if kind in ("classification", "regression"):
        return {"kind": kind}
    if kind == "multilabel":
        rule = task.get("rule")
        if rule == "threshold" and isinstance(task.get("threshold"), (int, float)) and np.isfinite(task["threshold"]):
            return {"kind": kind, "rule": rule, "threshold": float(task["threshold"])}
        if rule == "top_k" and isinstance(task.get("k"), int) and task["k"] >= 1:
            return {"kind": kind, "rule": rule, "k": int(task["k"])}
    raise ModelFileError(f"{source}: task {task!r} is not classification, regression, or multilabel with rule "
                         "'threshold' (a finite threshold) or 'top_k' (k >= 1)")


def multilabel_indicator(scores: np.ndarray, task: dict) -> np.ndarray:
    """0/1 matrix from (n, L) scores by the task's rule; top-k breaks ties towards the lower label."""
    scores = np.asarray(scores)
    if task["rule"] == "threshold":
        return (scores > task["threshold"]).astype(np.int64)
    k = min(task["k"], scores.shape[1])
    top = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    out = np.zeros(scores.shape, dtype=np.int64)
    np.put_along_axis(out, top, 1, axis=1)
    return out


def register_family(cls):
    """Class decorator: make a Model subclass loadable by its ``family`` name at run time."""
    MODEL_FAMILIES.register(cls.family, cls)
    return cls


class Model:
    """Base class of trained-model parameter containers (not estimators)."""

    family: ClassVar[str] = ""
    _classes: np.ndarray | None = None
    # What the scores mean: classification (argmax), regression (scores[0] is the value) or
    # multilabel (a 0/1 vector by a threshold or top-k rule); saved in the model file's metadata.
    task: dict = CLASSIFICATION
    # How the scores give class probabilities (models/proba.py: "softmax", "logistic",
    # "logistic_each"), None: the model defines none (predict_proba refuses, no <prefix>_proba).
    proba_rule: str | None = None
    proba_constants: dict | None = None  # what the rule needs beyond the scores ("platt_coupled": a, b, n_classes)

    # --- to be provided by each family ---
    def arrays(self) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def meta(self) -> dict:
        return {}

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray], meta: dict, source: str) -> Model:
        """Build and validate from saved arrays; errors name ``source``."""
        raise NotImplementedError

    @classmethod
    def directory_match(cls, names: set[str]) -> int:
        """Optional: how surely a folder holding the files ``names`` is a model of this family saved by
        another tool (EdgeML): 0 for not at all; load_model picks the family with the highest."""
        return 0

    @classmethod
    def from_directory(cls, path: Path) -> Model:
        """Load such a folder (when directory_match says so)."""
        raise NotImplementedError

    @property
    def input_dim(self) -> int:
        raise NotImplementedError

    @property
    def n_outputs(self) -> int:
        """Length of the score vector."""
        raise NotImplementedError

    def scores(self, X) -> np.ndarray:
        """Float64 reference scores, shape (n, n_outputs), computed with numpy alone."""
        raise NotImplementedError

    def lower(self):
        """Return the model as an IR Graph (float32)."""
        raise NotImplementedError

    def lower_for(self, precision: str):
        """The graph compiled at ``precision`` (default: ``lower()``'s at every precision)."""
        return self.lower()

    def for_calibration(self, calibration: np.ndarray) -> Model:
        """The model whose integer graph (``lower_for`` at int16/int8) suits these calibration rows (default: itself;
        a front end chooses the power-of-two scales of its features from them). Called only where a family
        defines it: other models' builds check their calibration rows later (after the constants' fit)."""
        return self

    def check_precision(self, precision: str) -> None:
        """CompileError when builds at ``precision`` cannot compute what the model means (default: all can)."""

    @property
    def reference(self) -> str:
        """What ``scores``/``predict`` compute, which builds are compared with: "float" (a float model, builds
        agree to within their precision), or "int8" (an int8 network, a .tflite file's: its own arithmetic,
        which every build gives bit for bit; it needs no calibration rows)."""
        return "float"

    # --- shared ---
    @property
    def n_classes(self) -> int:
        """Number of classes the prediction chooses among (a binary sign model has one score)."""
        return self.n_outputs

    @property
    def classes(self) -> np.ndarray:
        """The class label of each class index: integers or strings (0..L-1 unless set)."""
        return np.arange(self.n_classes) if self._classes is None else self._classes

    def set_classes(self, classes, source: str = "model") -> Model:
        """Attach class labels (see :func:`check_classes`); None keeps 0..L-1. Returns self."""
        self._classes = None if classes is None else check_classes(classes, self.n_classes, source)
        return self

    def predict_index(self, X) -> np.ndarray:
        """Class index 0..L-1 per row: what the compiled ``<prefix>_predict`` returns."""
        return np.argmax(self.scores(X), axis=1)

    def predict(self, X) -> np.ndarray:
        """Class label per row; regression: the value; multilabel: the 0/1 label matrix."""
        if self.task["kind"] == "regression":
            return self.scores(X)[:, 0]
        if self.task["kind"] == "multilabel":
            return multilabel_indicator(self.scores(X), self.task)
        return self.classes[self.predict_index(X)]

    def size_advice(self, room_bytes: int, constant_bytes: int, value_bytes: int) -> str | None:
        """When a build does not fit: the settings of this family under which the model's constants take at
        most ``room_bytes`` (they take ``constant_bytes`` now, ``value_bytes`` per stored value at the build's
        precision), in the words of the library that trained it; None when the family has no such knob."""
        return None

    def predict_proba(self, X) -> np.ndarray:
        """Class probabilities by the model's own rule (``proba_rule``); (n, n_classes)."""
        if self.proba_rule is None:
            raise DataError(f"a {self.family} model defines no class probabilities")
        if self.proba_rule in INPUT_RULES:
            return proba_from_inputs(self._check_input(X), self.proba_rule, self.proba_constants)
        return proba_from_scores(self.scores(X), self.proba_rule, self.proba_constants)

    def with_task(self, task) -> Model:
        """This model, its scores read as ``task`` (see ``check_task``). Returns self."""
        self.task = check_task(task, f"{self.family} model")
        return self

    def save(self, path) -> Path:
        meta = dict(self.meta())
        meta[CLASSES_META_KEY] = self.classes.tolist()
        if self.task["kind"] != "classification":
            meta["task"] = self.task
        return save_model_file(path, self.family, self.arrays(), meta)

    def describe(self) -> str:
        shapes = ", ".join(f"{k}{tuple(v.shape)}" for k, v in self.arrays().items())
        return f"{self.family} ({shapes})"

    def _check_input(self, X) -> np.ndarray:
        X = np.asarray(X, dtype=np.float64)
        if X.ndim == 1:
            X = X[None, :]
        if X.ndim != 2 or X.shape[1] != self.input_dim:
            raise DataError(f"input has shape {X.shape}, expected (n, {self.input_dim})")
        return X
