"""FrontEndModel: front-end steps (``tinycc_ml.features``) before any other model, compiled as one graph that takes the
raw samples: each step lowered onto the IR's float ops, the model's own graph composed after them
(``ir.graph.embed``). Float builds, and int16 builds through the fixed-point pipeline with the model (the steps' ops
have fixed-point forms: a block-scaled q15 FFT, log by table, integer square root; a PowerSpectrum, MelFilterBank and
Log in a row become the one ``log_mel_power`` op, which keeps each frame's block exponent up to the log).
``stream_hop`` is the samples between the decisions of ``<name>_feed`` (default: a leading Framer's hop, else the
whole window).

Before a network (``compile(network, front_end=...)``): the features are the network's input tensor's elements in order
(frames x bins, frame-major, as an NHWC (1, frames, bins, 1) or an NCHW (1, 1, frames, bins) input holds them). A float
network takes them as they are; a TFLite int8 network takes them quantised with its input's scale and zero point (the
``quantize`` op: TFLite's AffineQuantize on the float32 features), as ``network.scores(front_end.transform(X))``
computes in Python."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from tinycc_ml.errors import CompileError, FrontEndError, ModelFileError
from tinycc_ml.ir.graph import Graph, embed
from tinycc_ml.ir.types import TensorType
from tinycc_ml.models.base import MODEL_FAMILIES, Model
from tinycc_ml.models.lowering import add_input
from tinycc_ml.models.network import NetworkModel
from tinycc_ml.passes.input_scales import FEATURE_SCALE_RANGE, apply_feature_scales, feature_scales

# tinycc_ml.features (scikit-learn transformers: importing it imports scikit-learn and SciPy) is imported where a front
# end is built or read, so that compiling any other model does not import them
if TYPE_CHECKING:
    from tinycc_ml.features.base import FrontEndStep


def step_classes() -> dict[str, type]:
    # deferred: tinycc_ml.features imports scikit-learn and SciPy, which compiling any other model does not need
    from tinycc_ml import features
    from tinycc_ml.features.base import FrontEndStep

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
        if isinstance(model, NetworkModel):
            check_network_after_front_end(model, width, source)
        elif width != model.input_dim:
            raise CompileError(f"{source}: the front end gives {width} features but the {model.family} model takes "
                               f"{model.input_dim}")
        self.steps, self.model = list(steps), model
        self.task, self.proba_rule, self.proba_constants = model.task, model.proba_rule, model.proba_constants
        self._classes = model._classes
        self.feature_scales: np.ndarray | None = None  # integer builds: 2^s_k per feature (``for_calibration``)
        # deferred: tinycc_ml.features imports scikit-learn and SciPy, which compiling any other model does not need
        from tinycc_ml.features.stream import check_stream_hop

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

    @property
    def network(self) -> NetworkModel | None:
        """The network after the front end (None: another model)."""
        return self.model if isinstance(self.model, NetworkModel) else None

    def with_model(self, model: Model) -> FrontEndModel:
        """The same front end before ``model`` (a network quantised from the front end's features)."""
        return FrontEndModel(self.steps, model, self.stream_hop, "front end")

    def check_precision(self, precision: str) -> None:
        net = self.network
        if net is not None:  # the front end in float32, the network in float32 or in TFLite's integers
            own = net.reference if net.is_quantised else "int8"
            how = "as its file defines" if net.is_quantised else "quantised to TFLite's int8 from the calibration rows"
            if precision not in ("float", own):
                raise CompileError(f"a front end before {net.describe()} compiles at precision float or {own} (the "
                                   f"front end in float32, the network {how}); precision {precision} is not built "
                                   "for a front end before a network")
            return
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
        if self.network is not None:  # the network's quantisation is its own (or quantise_network's)
            return self
        features = self.features(calibration)
        scales = feature_scales(self.model.lower_for("int16"), features)
        copy = FrontEndModel(self.steps, self.model, self.stream_hop)
        copy.feature_scales = np.clip(scales, *FEATURE_SCALE_RANGE)
        return copy

    def lower(self) -> Graph:
        return self.lower_for("float")

    def lower_for(self, precision: str) -> Graph:
        # deferred: tinycc_ml.features imports scikit-learn and SciPy, which compiling any other model does not need
        from tinycc_ml.features.base import scaled
        from tinycc_ml.features.spectral import fuses_log_mel, lower_log_mel

        g = Graph("front_end")
        node = add_input(g, self.input_dim)
        scales = self.feature_scales if precision != "float" else None
        i = 0
        while i < len(self.steps):
            step = self.steps[i]
            fused = precision == "int16" and fuses_log_mel(self.steps[i:i + 3])
            last = i + (3 if fused else 1) == len(self.steps)
            if fused:  # each frame's block exponent kept up to the log (ir/ops/front_end/log_mel_power.py)
                node = lower_log_mel(g, node, *self.steps[i:i + 3])
                node = scaled(g, node, 2.0**scales) if last and scales is not None else node
                i += 3
                continue
            node = step.lower_scaled(g, node, 2.0**scales) if last and scales is not None else step.lower(g, node)
            i += 1
        inner = self.model.lower_for(precision)
        net = self.network
        if net is not None and net.is_quantised:  # the float32 features quantised as TFLite's QUANTIZE does
            (inner_input,) = inner.inputs()
            node = g.add("quantize", [node], {}, type=TensorType((net.input_dim,), inner.type(inner_input).dtype),
                         name="features_quantised")
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
        if self.network is not None:
            raise ModelFileError(f"{self.describe()}: a front end before a network is compiled from the network's "
                                 "file and the fitted front end (compile(network, front_end=...)); it has no .npz form")
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


def front_end_steps(front_end) -> list[FrontEndStep]:
    """The fitted steps of ``front_end``: a scikit-learn Pipeline of tinycc_ml.features steps only, a list of them,
    or one step; CompileError naming what else it holds."""
    # deferred: tinycc_ml.features imports scikit-learn and SciPy, which compiling any other model does not need
    from sklearn.pipeline import Pipeline

    # deferred: tinycc_ml.features imports scikit-learn and SciPy, which compiling any other model does not need
    from tinycc_ml.features.base import FrontEndStep

    if isinstance(front_end, FrontEndStep):
        steps = [front_end]
    elif isinstance(front_end, Pipeline):
        steps = [step for _, step in front_end.steps if step not in (None, "passthrough")]
    elif isinstance(front_end, (list, tuple)):
        steps = list(front_end)
    else:
        raise CompileError(f"front_end={type(front_end).__name__}: expected a fitted Pipeline of tinycc_ml.features "
                           "steps (Framer, Window, PowerSpectrum, MelFilterBank, Log, DCT, ...), a list of them or one")
    others = [type(step).__name__ for step in steps if not isinstance(step, FrontEndStep)]
    if others or not steps:
        raise CompileError(f"front_end: {', '.join(others) or 'no steps'}: a front end before a network holds "
                           "tinycc_ml.features steps only (the network is the model)")
    return steps


def check_network_after_front_end(net: NetworkModel, width: int, source: str) -> None:
    """CompileError naming what makes ``net`` unable to take a front end's ``width`` float features as its input."""
    if len(net.input_parts) != 1 or len(net.output_parts) != 1:
        raise CompileError(f"{source}: {net.describe()} has {len(net.input_parts)} inputs and "
                           f"{len(net.output_parts)} outputs; a front end feeds a network of one input and one output")
    if net.graph.states():
        raise CompileError(f"{source}: {net.describe()} keeps state between calls; a front end's stream runs the "
                           "network on each window as a whole (compile the network without the front end)")
    dtype = net.graph.type(net.input_name).dtype
    if not (dtype.is_float or dtype.is_quantised):
        raise CompileError(f"{source}: {net.describe()} takes plain {dtype} integers (samples or indices), not "
                           "features: a front end's features go to a float or a TFLite-quantised input")
    if width != net.input_dim:
        raise CompileError(f"{source}: the front end gives {width} features but {net.describe()} takes an input "
                           f"of shape {list(net.input_shape)} ({net.input_dim} values)")


def _plain(value):
    """get_params() in JSON's types (tuples as lists, numpy scalars as numbers)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, np.ndarray)):
        return [_plain(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value
