"""Calibrated classifiers (scikit-learn's CalibratedClassifierCV).

CalibratedModel, over linear classifiers: each fold's classifier gives decision values t = W_f x + b_f (its
columns: one per class it saw, or one for two classes), each column goes through its calibrator (Platt's
sigmoid or an isotonic regression, ops in ``ir/ops/calibration.py``), each fold's columns become class
probabilities, and the scores are their mean over the folds: the probabilities themselves (rule
"probabilities"); the prediction is their argmax (the first maximum), as scikit-learn's predict.

All folds' mat-vecs are one stacked mat-vec, each fold's input scaling folded into its rows.

CalibratedFoldsModel, over any other classifier with a model here: each fold's model lowered to its graph, the
graphs composed on one input (``ir.graph.embed``), each read where scikit-learn reads it (its decision_function or
predict_proba, see RESPONSES), then the same calibrators and mean.

Float builds only (the calibrators are float functions); on the AVR in software float.
"""

from __future__ import annotations

import copy

import numpy as np

from tinycc_ml.errors import CompileError, ModelFileError
from tinycc_ml.ir.graph import Graph, embed
from tinycc_ml.ir.ops.calibration import (
    calibrated_mean_rows,
    isotonic_pq_rows,
    isotonic_rows,
    ovr_decision_rows,
    sigmoid_rows,
)
from tinycc_ml.models.base import MODEL_FAMILIES, Model
from tinycc_ml.models.lowering import add_const, add_input, add_matrix
from tinycc_ml.models.prototypes import squared_distances
from tinycc_ml.models.saved import check_array

METHODS = ("sigmoid", "isotonic")


class CalibratedModel(Model):
    """Stacked decision rows ``W`` (R, D), ``b`` (R,); ``column_class`` (R,) the class of each row;
    ``fold_columns`` how many rows each fold has, in order; ``method`` "sigmoid" with ``ab`` (R, 2) or
    "isotonic" with knots ``knots_x``, ``knots_y`` (R, L) (non-decreasing x, padded by repeating the last)."""

    family = "calibrated"
    proba_rule = "probabilities"

    def __init__(self, W, b, column_class, fold_columns, n_classes: int, method: str, ab=None, knots_x=None,
                 knots_y=None, source: str = "calibrated model"):
        if method not in METHODS:
            raise ModelFileError(f"{source}: method {method!r} is not one of {', '.join(METHODS)}")
        if not isinstance(n_classes, int) or n_classes < 2:
            raise ModelFileError(f"{source}: n_classes is {n_classes!r}, expected an integer >= 2")
        self.W = check_array(W, "W", source, ndim=2)
        rows = self.W.shape[0]
        if 0 in self.W.shape:
            raise ModelFileError(f"{source}: W has shape {self.W.shape}")
        self.b = check_array(b, "b", source, shape=(rows,))
        self.column_class = [int(c) for c in check_array(column_class, "column_class", source, shape=(rows,))]
        self.fold_columns = [int(f) for f in check_array(fold_columns, "fold_columns", source, ndim=1)]
        self.n_class_count, self.method = n_classes, method
        if (sum(self.fold_columns) != rows or min(self.fold_columns, default=0) < 1
                or not all(0 <= c < n_classes for c in self.column_class)
                or (n_classes == 2 and any(f != 1 for f in self.fold_columns))):
            raise ModelFileError(f"{source}: fold_columns {self.fold_columns} and column_class do not describe the "
                                 f"{rows} rows of {n_classes}-class folds")
        self.ab = self.knots_x = self.knots_y = None
        if method == "sigmoid":
            self.ab = check_array(ab, "ab", source, shape=(rows, 2))
        else:
            self.knots_x = check_array(knots_x, "knots_x", source, ndim=2)
            self.knots_y = check_array(knots_y, "knots_y", source, shape=self.knots_x.shape)
            if self.knots_x.shape[0] != rows or self.knots_x.shape[1] == 0 or np.any(np.diff(self.knots_x) < 0):
                raise ModelFileError(f"{source}: knots_x has shape {self.knots_x.shape}, expected ({rows}, L) with "
                                     "non-decreasing rows")

    @property
    def input_dim(self) -> int:
        return self.W.shape[1]

    @property
    def n_outputs(self) -> int:
        return self.n_class_count

    def check_precision(self, precision: str) -> None:
        if precision != "float":
            raise CompileError(f"a calibrated classifier compiles at precision float only, not {precision}: its "
                               "calibrated probabilities are float functions (on the AVR in software float)")

    def describe(self) -> str:
        return (f"calibrated ({self.method}, {len(self.fold_columns)} fold(s) of linear decisions, "
                f"{self.n_class_count} classes)")

    def meta(self) -> dict:
        return {"n_classes": self.n_class_count, "method": self.method}

    def arrays(self) -> dict[str, np.ndarray]:
        out = {"W": self.W, "b": self.b, "column_class": np.asarray(self.column_class),
               "fold_columns": np.asarray(self.fold_columns)}
        if self.method == "sigmoid":
            out["ab"] = self.ab
        else:
            out["knots_x"], out["knots_y"] = self.knots_x, self.knots_y
        return out

    @classmethod
    def from_arrays(cls, arrays, meta, source) -> CalibratedModel:
        method = meta.get("method")
        needed = {"W", "b", "column_class", "fold_columns"} | ({"ab"} if method == "sigmoid" else
                                                                {"knots_x", "knots_y"})
        if sorted(needed - set(arrays)) or sorted(set(arrays) - needed):
            raise ModelFileError(f"{source}: arrays {sorted(arrays)}, expected {sorted(needed)}")
        if not isinstance(meta.get("n_classes"), int) or isinstance(meta.get("n_classes"), bool):
            raise ModelFileError(f"{source}: metadata 'n_classes' is {meta.get('n_classes')!r}")
        return cls(arrays["W"], arrays["b"], arrays["column_class"], arrays["fold_columns"], meta["n_classes"],
                   method, arrays.get("ab"), arrays.get("knots_x"), arrays.get("knots_y"), source=source)

    def with_input_map(self, A, c) -> CalibratedModel:
        """This model applied to ``A x + c`` (a scaler or PCA step before it): its decisions' mat-vec absorbs
        the map, exactly (in float64)."""
        model = copy.copy(self)
        model.W, model.b = self.W @ A, self.b + self.W @ c
        return model

    def calibrated(self, X) -> np.ndarray:
        """Each row's calibrated columns (n, R)."""
        t = self._check_input(X) @ self.W.T + self.b
        if self.method == "sigmoid":
            return sigmoid_rows(t, self.ab)
        return isotonic_rows(t, self.knots_x, self.knots_y)

    def scores(self, X) -> np.ndarray:
        return calibrated_mean_rows(self.calibrated(X), self._mean_attrs())

    def predict_index(self, X) -> np.ndarray:
        return np.argmax(self.scores(X), axis=1)

    def _mean_attrs(self) -> dict:
        return {"column_class": list(self.column_class), "fold_columns": list(self.fold_columns),
                "n_classes": self.n_class_count}

    def lower(self) -> Graph:
        g = Graph("calibrated")
        x = add_input(g, self.input_dim)
        t = g.add("matvec", [add_matrix(g, "W", self.W), x], name="decisions")
        t = g.add("add", [t, add_const(g, "b", self.b)], name="decisions_biased")
        if self.method == "sigmoid":
            p = g.add("sigmoid_calibrate", [t, add_const(g, "platt", self.ab)], name="calibrated")
        else:
            p = g.add("isotonic_calibrate", [t, add_const(g, "knots_x", self.knots_x),
                                             add_const(g, "knots_y", self.knots_y)], name="calibrated")
        scores = g.add("calibrated_mean", [p], self._mean_attrs(), name="probabilities")
        g.set_output("scores", scores)
        g.set_output("prediction", g.add("argmax", [scores], name="prediction"))
        return g


# What scikit-learn calibrates of a fold's classifier (its _get_response_values: decision_function when the
# classifier has one, else predict_proba; two classes: one column, the second class's), read from the fold's
# model: "scores" (its scores), "decision" (an SVM's pair decisions), "ovr" (an SVC's one-vs-rest
# decision_function from them), "softmax" / "logistic" (its probabilities from its scores), "votes" (a
# nearest-neighbour model's k votes per class, k = 1 too); then times
# ``factor`` (a forest's mean of its trees, a k-vote's fraction), then its ``columns`` in order.
ISOTONIC_JUMP = 1e-4  # a jump of the calibrated probability a float build must reproduce (the stated bound)
RESPONSES = ("scores", "decision", "ovr", "softmax", "logistic", "votes")


def check_response(spec, n_scores: int, source: str) -> dict:
    """A fold's response ({"kind", "factor", "columns"}) validated against its model's ``n_scores`` values."""
    kind = spec.get("kind") if isinstance(spec, dict) else None
    columns, factor = (spec.get("columns"), spec.get("factor")) if isinstance(spec, dict) else (None, None)
    if (kind not in RESPONSES or not isinstance(factor, (int, float)) or isinstance(factor, bool)
            or not np.isfinite(factor) or not isinstance(columns, list) or not columns
            or not all(isinstance(c, int) and not isinstance(c, bool) and 0 <= c < n_scores for c in columns)):
        raise ModelFileError(f"{source}: response {spec!r:.200} is not one of {', '.join(RESPONSES)} with a finite "
                             f"factor and columns among its {n_scores} values")
    return {"kind": kind, "factor": float(factor), "columns": list(columns)}


def softmax_rows(s: np.ndarray) -> np.ndarray:
    e = np.exp(s - np.max(s, axis=1, keepdims=True))
    return e / np.sum(e, axis=1, keepdims=True)


class CalibratedFoldsModel(Model):
    """CalibratedClassifierCV over any classifier with a model here: ``folds`` the fold classifiers' models,
    ``responses`` what of each is calibrated (see ``RESPONSES``), ``column_class`` per fold the class of each
    calibrated column, ``ab`` per fold (C_f, 2) Platt constants or ``knots`` per fold a pair (knots_x, knots_y)
    (C_f, L_f); ``transform`` / ``offset``: a map A x + c in front of every fold (a scaler or PCA step before the
    calibrated classifier). The probabilities are as CalibratedModel's (ops in ``ir/ops/calibration.py``)."""

    family = "calibrated_folds"
    proba_rule = "probabilities"

    def __init__(self, folds: list[Model], responses: list[dict], column_class: list[list[int]], n_classes: int,
                 method: str, ab=None, knots=None, transform=None, offset=None, source: str = "calibrated model"):
        if method not in METHODS:
            raise ModelFileError(f"{source}: method {method!r} is not one of {', '.join(METHODS)}")
        if not isinstance(n_classes, int) or isinstance(n_classes, bool) or n_classes < 2:
            raise ModelFileError(f"{source}: n_classes is {n_classes!r}, expected an integer >= 2")
        if not folds or not (len(folds) == len(responses) == len(column_class)):
            raise ModelFileError(f"{source}: {len(folds)} folds, {len(responses)} responses and {len(column_class)} "
                                 "column_class lists, expected one each per fold (at least one)")
        calibrators = ab if method == "sigmoid" else knots
        if not isinstance(calibrators, (list, tuple)) or len(calibrators) != len(folds):
            raise ModelFileError(f"{source}: {method} calibrators for {len(folds)} folds expected, one list each")
        if not all(isinstance(cc, (list, tuple)) and all(isinstance(c, (int, np.integer)) and not isinstance(c, bool)
                                                         for c in cc) for cc in column_class):
            raise ModelFileError(f"{source}: column_class is not one list of class indices per fold")
        self.folds, self.n_class_count, self.method = list(folds), n_classes, method
        self.responses = [check_response(r, self._n_values(m, r, source), source) for m, r in zip(folds, responses)]
        self.column_class = [[int(c) for c in cc] for cc in column_class]
        dims = {m.input_dim for m in folds}
        if len(dims) != 1:
            raise ModelFileError(f"{source}: the folds take inputs of sizes {sorted(dims)}, expected one size")
        for r, cc in zip(self.responses, self.column_class):
            if (len(cc) != len(r["columns"]) or not all(0 <= c < n_classes for c in cc)
                    or (n_classes == 2 and cc != [1])):
                raise ModelFileError(f"{source}: column_class {cc} does not give a class below {n_classes} to each of "
                                     f"a fold's {len(r['columns'])} columns (two classes: one column, class 1)")
        self.ab, self.knots = None, None
        if method == "sigmoid":
            self.ab = [check_array(a, "ab", source, shape=(len(r["columns"]), 2)) for a, r in zip(ab, self.responses)]
        else:
            self.knots = []
            for (kx, ky), r in zip(knots, self.responses):
                kx = check_array(kx, "knots_x", source, ndim=2)
                ky = check_array(ky, "knots_y", source, shape=kx.shape)
                if kx.shape[0] != len(r["columns"]) or kx.shape[1] == 0 or np.any(np.diff(kx) < 0):
                    raise ModelFileError(f"{source}: knots_x has shape {kx.shape}, expected ({len(r['columns'])}, L) "
                                         "with non-decreasing rows")
                self.knots.append((kx, ky))
        self.transform = self.offset = None
        if transform is not None:
            self.transform = check_array(transform, "transform", source, shape=(self.folds[0].input_dim, None))
            self.offset = check_array(offset, "offset", source, shape=(self.transform.shape[0],))

    @staticmethod
    def _n_values(model: Model, spec, source: str = "calibrated model") -> int:
        """How many values the fold's response is read from (before its columns are chosen)."""
        kind = spec.get("kind") if isinstance(spec, dict) else None
        if kind in ("decision", "ovr"):
            if not hasattr(model, "decision") or (kind == "ovr" and model.n_class_count < 3):
                raise ModelFileError(f"{source}: response {kind!r} needs an SVM fold (ovr: of 3 classes or more), not "
                                     f"{model.describe()}")
            return model.n_class_count if kind == "ovr" else len(model.intercept)
        if kind == "votes" and not hasattr(model, "prototypes"):
            raise ModelFileError(f"{source}: response 'votes' needs a nearest-neighbour fold, not a {model.family} "
                                 "model")
        return model.n_classes if kind == "votes" else model.n_outputs

    @property
    def input_dim(self) -> int:
        return self.folds[0].input_dim if self.transform is None else self.transform.shape[1]

    @property
    def n_outputs(self) -> int:
        return self.n_class_count

    def check_precision(self, precision: str) -> None:
        CalibratedModel.check_precision(self, precision)
        if self.knots is None:
            return
        for i, (kx, ky) in enumerate(self.knots):
            snap = self._snap(i)
            for row, (x, y) in enumerate(zip(kx, ky)):
                # neighbouring knots that float32 values (the response, computed in float32) cannot tell apart,
                # between which the calibrated probability jumps: probabilities saturated near 0 or 1, sums of
                # trees' leaves that float64 rounding alone separates
                gap, jump = np.diff(x), np.abs(np.diff(y))
                if snap is not None:
                    resolution = 2 * snap[row]
                elif self._complemented(i):  # above 1/2 through 1 - x, where scikit-learn's float64 p is 2^-53 apart
                    near = np.minimum(np.minimum(x[:-1], 1.0 - x[:-1]), np.minimum(x[1:], 1.0 - x[1:]))
                    resolution = np.maximum(4 * np.spacing(np.abs(near).astype(np.float32)),
                                            np.where(x[1:] > 0.5, 2.0**-53 / ISOTONIC_JUMP, 0.0))
                else:
                    resolution = 4 * np.spacing(np.maximum(np.abs(x[:-1]), np.abs(x[1:])).astype(np.float32))
                close = np.flatnonzero((gap > 0) & (gap <= resolution) & (jump > ISOTONIC_JUMP))
                if close.size:
                    j = int(close[0])
                    raise CompileError(
                        f"fold {i}'s isotonic calibrator of column {row} reads a {self.folds[i].family} model's "
                        f"response at knots {float(x[j])!r} and {float(x[j + 1])!r}, closer than a float build tells "
                        f"apart (float32; near 1, scikit-learn's float64 too), and its probability jumps from "
                        f"{y[j]:.4g} to {y[j + 1]:.4g} between them: a float build cannot reproduce it "
                        "(method='sigmoid' can be compiled)")

    def describe(self) -> str:
        kinds = sorted({m.family for m in self.folds})
        return (f"calibrated ({self.method}, {len(self.folds)} fold(s) of {', '.join(kinds)} models, "
                f"{self.n_class_count} classes)")

    def meta(self) -> dict:
        return {"n_classes": self.n_class_count, "method": self.method,
                "folds": [{"family": m.family, "meta": m.meta(), "response": r, "column_class": cc}
                          for m, r, cc in zip(self.folds, self.responses, self.column_class)]}

    def arrays(self) -> dict[str, np.ndarray]:
        out = {}
        for i, model in enumerate(self.folds):
            out.update({f"f{i}.{k}": v for k, v in model.arrays().items()})
            if self.method == "sigmoid":
                out[f"c{i}.ab"] = self.ab[i]
            else:
                out[f"c{i}.knots_x"], out[f"c{i}.knots_y"] = self.knots[i]
        if self.transform is not None:
            out["transform"], out["offset"] = self.transform, self.offset
        return out

    @classmethod
    def from_arrays(cls, arrays, meta, source) -> CalibratedFoldsModel:
        folds_meta = meta.get("folds")
        if not isinstance(folds_meta, list) or not all(isinstance(f, dict) for f in folds_meta):
            raise ModelFileError(f"{source}: metadata 'folds' is not a list of fold descriptions")
        method = meta.get("method")
        folds, ab, knots = [], [], []
        for i, fold in enumerate(folds_meta):
            family = fold.get("family")
            if family not in MODEL_FAMILIES or family in (cls.family, CalibratedModel.family):
                raise ModelFileError(f"{source}: fold {i} has family {family!r}, not a classifier family")
            own = {k[len(f"f{i}."):]: v for k, v in arrays.items() if k.startswith(f"f{i}.")}
            folds.append(MODEL_FAMILIES.load(family).from_arrays(own, fold.get("meta") or {}, f"{source} fold {i}"))
            names = ("ab",) if method == "sigmoid" else ("knots_x", "knots_y")
            if any(f"c{i}.{n}" not in arrays for n in names):
                raise ModelFileError(f"{source}: fold {i} has no calibrator arrays {', '.join(names)}")
            if method == "sigmoid":
                ab.append(arrays[f"c{i}.ab"])
            else:
                knots.append((arrays[f"c{i}.knots_x"], arrays[f"c{i}.knots_y"]))
        known = {k for k in arrays if k.split(".", 1)[0] in {f"f{i}" for i in range(len(folds))}
                 | {f"c{i}" for i in range(len(folds))}} | {"transform", "offset"}
        if set(arrays) - known or ("transform" in arrays) != ("offset" in arrays):
            raise ModelFileError(f"{source}: unexpected arrays {sorted(set(arrays) - known)[:5]}")
        if not isinstance(meta.get("n_classes"), int) or isinstance(meta.get("n_classes"), bool):
            raise ModelFileError(f"{source}: metadata 'n_classes' is {meta.get('n_classes')!r}")
        return cls(folds, [f.get("response") for f in folds_meta], [f.get("column_class") or [] for f in folds_meta],
                   meta["n_classes"], method, ab or None, knots or None, arrays.get("transform"), arrays.get("offset"),
                   source=source)

    def with_input_map(self, A, c) -> CalibratedFoldsModel:
        """This model applied to ``A x + c``: the map composed with its own front map (one mat-vec before the
        folds)."""
        model = copy.copy(self)
        if self.transform is None:
            model.transform, model.offset = np.asarray(A, dtype=np.float64), np.asarray(c, dtype=np.float64)
        else:
            model.transform, model.offset = self.transform @ A, self.transform @ c + self.offset
        return model

    def _snap(self, i: int) -> np.ndarray | None:
        """Fold i's isotonic snap per column (see ``isotonic_rows``): for responses of a few discrete values (sums
        of trees' leaves, votes) that float32 computes a little beside the float64 knots, 2^-16 of the knots'
        largest magnitude (the float32 rounding of a sum of leaves); None for continuous responses."""
        model, kind = self.folds[i], self.responses[i]["kind"]
        if self.knots is None or not (kind == "votes" or (kind == "scores" and model.family == "trees")):
            return None
        return np.max(np.abs(self.knots[i][0]), axis=1) * 2.0**-18

    def response(self, i: int, X) -> np.ndarray:
        """Fold i's response on the fold's input rows (n, C_i): what its calibrators read."""
        model, spec = self.folds[i], self.responses[i]
        kind = spec["kind"]
        if kind in ("decision", "ovr"):
            r = model.decision(X)
            if kind == "ovr":
                r = ovr_decision_rows(r, model.n_class_count)
        elif kind == "votes":  # the k nearest, equal distances in index order (kvote's rule)
            nearest = np.argsort(squared_distances(model.embed(X), model.prototypes), axis=1, kind="stable")
            r = np.zeros((len(X), model.n_classes))
            np.add.at(r, (np.arange(len(X))[:, None], model.labels[nearest[:, :model.k]]), 1.0)
        else:
            r = model.scores(X)
            if kind == "softmax":
                r = softmax_rows(r)
            elif kind == "logistic":
                r = 1.0 / (1.0 + np.exp(-r))
        return (r * spec["factor"])[:, spec["columns"]]

    def _complemented(self, i: int) -> bool:
        """Fold i's isotonic calibrators read probabilities with their complements (isotonic_calibrate_pq)."""
        return self.knots is not None and self.responses[i]["kind"] in ("softmax", "logistic")

    def complement(self, i: int, X) -> np.ndarray:
        """1 - fold i's response, computed as the other classes' probabilities (accurate near 1)."""
        model, spec = self.folds[i], self.responses[i]
        s = model.scores(X)
        if spec["kind"] == "logistic":
            q = 1.0 / (1.0 + np.exp(s))
        else:
            p = softmax_rows(s)
            q = p @ (1.0 - np.eye(p.shape[1]))
        return (q * spec["factor"])[:, spec["columns"]]

    def calibrated(self, X) -> np.ndarray:
        X = self._check_input(X)
        if self.transform is not None:
            X = X @ self.transform.T + self.offset
        parts = []
        for i in range(len(self.folds)):
            t = self.response(i, X)
            if self.method == "sigmoid":
                parts.append(sigmoid_rows(t, self.ab[i]))
            elif self._complemented(i):
                kx, ky = self.knots[i]
                parts.append(isotonic_pq_rows(t, self.complement(i, X), kx, 1.0 - kx, ky))
            else:
                parts.append(isotonic_rows(t, *self.knots[i], self._snap(i)))
        return np.hstack(parts)

    def scores(self, X) -> np.ndarray:
        return calibrated_mean_rows(self.calibrated(X), self._mean_attrs())

    def predict_index(self, X) -> np.ndarray:
        return np.argmax(self.scores(X), axis=1)

    def _mean_attrs(self) -> dict:
        return {"column_class": [c for cc in self.column_class for c in cc],
                "fold_columns": [len(cc) for cc in self.column_class], "n_classes": self.n_class_count}

    def _fold_node(self, g: Graph, i: int, x: str) -> str:
        """Fold i's calibrated columns in ``g`` (its model's graph embedded, reading ``x``)."""
        model, spec = self.folds[i], self.responses[i]
        sub = model.lower()
        base = sub.output("scores")
        if spec["kind"] in ("decision", "ovr") and sub.op(base) in ("ovo_votes", "ovr_decision"):
            base = sub.node(base).inputs[0]  # the pair decisions the votes count
        if spec["kind"] == "votes":  # the distances (k = 1 compares per-class nearest ones: a vote instead)
            (base,) = [n for n in sub.order() if sub.op(n) == "sqdist"]
        (sub_x,) = sub.inputs()
        r = embedded = embed(g, sub, [base], {sub_x: x}, prefix=f"fold{i}_")[base]
        if spec["kind"] == "votes":
            r = g.add("kvote", [r], {"k": int(model.k), "n_classes": int(model.n_classes),
                                     "labels": model.labels.astype(np.int32)}, name=f"fold{i}_votes")
        elif spec["kind"] == "ovr":
            r = g.add("ovr_decision", [r], {"n_classes": model.n_class_count}, name=f"fold{i}_ovr")
        elif spec["kind"] == "softmax":
            r = g.add("softmax", [r], {"beta": 1.0}, name=f"fold{i}_proba")
        elif spec["kind"] == "logistic":  # 1 / (1 + exp(-s))
            r = g.add("sigmoid_calibrate", [r, add_const(g, f"fold{i}_logistic", [[-1.0, 0.0]])],
                      name=f"fold{i}_proba")
        q = None
        if self._complemented(i):  # 1 - p as the other classes' probabilities: near 1, float32 still resolves it
            if spec["kind"] == "logistic":
                q = g.add("sigmoid_calibrate", [embedded, add_const(g, f"fold{i}_complement", [[1.0, 0.0]])],
                          name=f"fold{i}_complement")
            else:
                others = 1.0 - np.eye(g.type(r).shape[0])
                q = g.add("matvec", [add_matrix(g, f"fold{i}_others", others), r], name=f"fold{i}_complement")
        n, columns = g.type(r).shape[0], spec["columns"]
        if columns != list(range(n)) or spec["factor"] != 1.0:  # chosen and scaled by one mat-vec: exact picks
            pick = np.zeros((len(columns), n))
            pick[np.arange(len(columns)), columns] = spec["factor"]
            r = g.add("matvec", [add_matrix(g, f"fold{i}_pick", pick), r], name=f"fold{i}_response")
            if q is not None:
                q = g.add("matvec", [add_matrix(g, f"fold{i}_pick", pick), q], name=f"fold{i}_response_complement")
        if q is not None:
            kx, ky = self.knots[i]
            return g.add("isotonic_calibrate_pq", [r, q, add_const(g, f"fold{i}_knots_x", kx),
                                                   add_const(g, f"fold{i}_knots_q", 1.0 - kx),
                                                   add_const(g, f"fold{i}_knots_y", ky)], name=f"fold{i}_calibrated")
        if self.method == "sigmoid":
            return g.add("sigmoid_calibrate", [r, add_const(g, f"fold{i}_platt", self.ab[i])],
                         name=f"fold{i}_calibrated")
        kx, ky = self.knots[i]
        snap = self._snap(i)
        return g.add("isotonic_calibrate", [r, add_const(g, f"fold{i}_knots_x", kx),
                                            add_const(g, f"fold{i}_knots_y", ky)],
                     {} if snap is None else {"snap": snap}, name=f"fold{i}_calibrated")

    def lower(self) -> Graph:
        g = Graph("calibrated")
        x = add_input(g, self.input_dim)
        if self.transform is not None:
            x = g.add("matvec", [add_matrix(g, "front", self.transform), x], name="mapped")
            if np.any(self.offset != 0):
                x = g.add("add", [x, add_const(g, "front_offset", self.offset)], name="mapped_offset")
        p = None
        for i in range(len(self.folds)):
            q = self._fold_node(g, i, x)
            p = q if p is None else g.add("concatenation", [p, q], {"axis": 0}, name="calibrated")
        scores = g.add("calibrated_mean", [p], self._mean_attrs(), name="probabilities")
        g.set_output("scores", scores)
        g.set_output("prediction", g.add("argmax", [scores], name="prediction"))
        return g
