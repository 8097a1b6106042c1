"""FrontEndModel: front-end steps (``tinycc_ml.features``) before any other model, compiled as one graph that takes
the raw samples: each step lowered onto the IR's float ops, the model's own graph composed after them
(``ir.graph.embed``). Float builds, and int16 builds through the fixed-point pipeline with the model (the steps'
ops have fixed-point forms: a block-scaled q15 FFT, log by table, integer square root). ``stream_hop`` is the samples
between the decisions of ``<name>_feed`` (default: a leading Framer's hop, else the whole window)."""

from __future__ import annotations

import numpy as np

from tinycc_ml import features
from tinycc_ml.errors import CompileError, FrontEndError, ModelFileError
from tinycc_ml.features.base import FrontEndStep
from tinycc_ml.features.stream import check_stream_hop
from tinycc_ml.ir.graph import Graph, embed
from tinycc_ml.models.base import MODEL_FAMILIES, Model
from tinycc_ml.models.lowering import add_input
from tinycc_ml.passes.input_scales import FEATURE_SCALE_RANGE, apply_feature_scales, feature_scales


def step_classes() -> dict[str, type]:
    return {name: cls for name, cls in vars(features).items()
            if isinstance(cls, type) and issubclass(cls, FrontEndStep) and cls is not FrontEndStep}


class FrontEndModel(Model):
    family = "front_end"

    def __init__(self, steps: list[FrontEndStep], model: Model, stream_hop: int | None = None,
                 source: str = "front end"):
        if not steps or model.family == self.family:
            raise CompileError(f"{source}: a front end needs one step or more before a model that is not a front end")
        width = None
        for i, step in enumerate(steps):
            if not hasattr(step, "n_features_out_"):
                raise CompileError(f"{source}: front-end step {i} ({type(step).__name__}) is not fitted")
            if width is not None and step.n_features_in_ != width:
                raise CompileError(f"{source}: front-end step {i} ({type(step).__name__}) reads {step.n_features_in_} "
                                   f"values but the step before it gives {width}")
            width = step.n_features_out_
        if width != model.input_dim:
            raise CompileError(f"{source}: the front end gives {width} features but the {model.family} model takes "
                               f"{model.input_dim}")
        self.steps, self.model = list(steps), model
        self.task, self.proba_rule, self.proba_constants = model.task, model.proba_rule, model.proba_constants
        self._classes = model._classes
        self.feature_scales: np.ndarray | None = None  # integer builds: 2^s_k per feature (``for_calibration``)
        self.stream_hop = check_stream_hop(self.default_hop() if stream_hop is None else stream_hop,
                                           self.window_samples)

    @property
    def values_per_sample(self) -> int:
        return self.steps[0].values_per_sample()

    @property
    def window_samples(self) -> int:
        return self.input_dim // self.values_per_sample

    def default_hop(self) -> int:
        first = self.steps[0]
        return int(first.hop_length) if hasattr(first, "hop_length") else self.window_samples

    def with_stream_hop(self, hop) -> FrontEndModel:
        copy = FrontEndModel(self.steps, self.model, hop)
        copy.feature_scales = self.feature_scales
        return copy

    @property
    def input_dim(self) -> int:
        return int(self.steps[0].n_features_in_)

    @property
    def n_outputs(self) -> int:
        return self.model.n_outputs

    @property
    def n_classes(self) -> int:
        return self.model.n_classes

    def features(self, X) -> np.ndarray:
        X = self._check_input(X)
        for step in self.steps:
            X = step.transform(X)
        return X

    def scores(self, X) -> np.ndarray:
        return self.model.scores(self.features(X))

    def check_precision(self, precision: str) -> None:
        if precision == "float":
            return
        if precision != "int16":
            raise CompileError(f"a front end ({', '.join(type(s).__name__ for s in self.steps)}) compiles at precision "
                               f"float or int16 (16-bit fixed point); precision {precision} is not built for it")
        for step in self.steps:
            refusal = step.integer_refusal()
            if refusal is not None:
                raise CompileError(f"{type(step).__name__}: {refusal}; precision int16 is not built for this front end")

    def for_calibration(self, calibration: np.ndarray) -> FrontEndModel:
        """A copy whose integer graph gives each feature its own power-of-two scale, from the calibrated features
        (the model's input_scales rule: each feature's finest 16-bit scale where the model's first ops absorb a
        factor per feature: mat-vecs, weighted distances, tree thresholds; none otherwise). The features are scaled
        by 2^s_k as the front end's last step makes them and the model's graph takes them so."""
        features = self.features(calibration)
        scales = feature_scales(self.model.lower_for("int16"), features)
        copy = FrontEndModel(self.steps, self.model, self.stream_hop)
        copy.feature_scales = np.clip(scales, *FEATURE_SCALE_RANGE)
        return copy

    def lower(self) -> Graph:
        return self.lower_for("float")

    def lower_for(self, precision: str) -> Graph:
        g = Graph("front_end")
        node = add_input(g, self.input_dim)
        scales = self.feature_scales if precision != "float" else None
        for i, step in enumerate(self.steps):
            last = i == len(self.steps) - 1
            node = step.lower_scaled(g, node, 2.0**scales) if last and scales is not None else step.lower(g, node)
        inner = self.model.lower_for(precision)
        if scales is not None:
            inner = apply_feature_scales(inner, scales)
        (inner_input,) = inner.inputs()
        mapping = embed(g, inner, [n for _, n in inner.outputs], {inner_input: node}, prefix="model_")
        for label, name in inner.outputs:
            g.set_output(label, mapping[name])
        return g

    def describe(self) -> str:
        return (f"front end ({' -> '.join(type(s).__name__ for s in self.steps)}, {self.input_dim} values in) then "
                f"{self.model.describe()}")

    def meta(self) -> dict:
        return {"steps": [{"class": type(s).__name__, "params": _plain(s.get_params()), "width": int(s.n_features_in_)}
                          for s in self.steps],
                "stream_hop": self.stream_hop, "model_family": self.model.family, "model_meta": self.model.meta(),
                "model_task": self.model.task}

    def arrays(self) -> dict[str, np.ndarray]:
        return {f"model.{k}": v for k, v in self.model.arrays().items()}

    @classmethod
    def from_arrays(cls, arrays, meta, source) -> FrontEndModel:
        family, steps_meta = meta.get("model_family"), meta.get("steps")
        if family not in MODEL_FAMILIES or family == cls.family:
            raise ModelFileError(f"{source}: model_family {family!r} is not a model family")
        if not isinstance(steps_meta, list) or not steps_meta:
            raise ModelFileError(f"{source}: metadata 'steps' is not a list of front-end steps")
        classes, steps = step_classes(), []
        for i, spec in enumerate(steps_meta):
            if not isinstance(spec, dict) or spec.get("class") not in classes or not isinstance(spec.get("params"),
                                                                                                 dict):
                raise ModelFileError(f"{source}: front-end step {i} is not one of {', '.join(sorted(classes))}")
            try:
                step = classes[spec["class"]](**spec["params"]).fit(np.zeros((1, int(spec["width"]))))
            except (TypeError, ValueError, KeyError) as exc:
                raise ModelFileError(f"{source}: front-end step {i} ({spec['class']}): {exc}") from None
            steps.append(step)
        own = {k[len("model."):]: v for k, v in arrays.items() if k.startswith("model.")}
        model = MODEL_FAMILIES.load(family).from_arrays(own, meta.get("model_meta") or {}, source)
        if meta.get("model_task"):
            model.with_task(meta["model_task"])
        try:
            return cls(steps, model, meta.get("stream_hop"), source)
        except (CompileError, FrontEndError) as exc:
            raise ModelFileError(str(exc)) from None


def _plain(value):
    """get_params() in JSON's types (tuples as lists, numpy scalars as numbers)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, np.ndarray)):
        return [_plain(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value
