"""What every front-end step shares: parameter checks that refuse by name, the scikit-learn transformer protocol
(fit records the row width, transform works in float64 numpy), and the IR helpers the steps lower onto.

A front-end step reads each row as a flat vector; a step that works per frame names its frame's width in its own
parameters (``frame_length``, ``n_fft``, ``n_inputs``) and the row holds whole frames of it, one after another.
``lower(graph, node)`` writes the step as float32 IR ops reading the rank-1 node ``node`` (the row) and returns
the rank-1 node of its output row.
"""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from tinycc_ml.errors import FrontEndError
from tinycc_ml.ir.graph import Graph
from tinycc_ml.ir.types import F32, TensorType
from tinycc_ml.models.lowering import add_const, add_matrix


def need_int(name: str, value, least: int = 1) -> int:
    """``value`` as an int of at least ``least``; FrontEndError naming the parameter otherwise."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < least:
        raise FrontEndError(f"{name}={value!r}: expected an integer >= {least}")
    return int(value)


def need_positive(name: str, value) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.number)) \
            or not np.isfinite(value) or value <= 0:
        raise FrontEndError(f"{name}={value!r}: expected a finite number > 0")
    return float(value)


def need_choice(name: str, value, choices) -> str:
    if value not in choices:
        raise FrontEndError(f"{name}={value!r}: expected one of {', '.join(map(repr, choices))}")
    return value


def need_power_of_two(name: str, value, least: int = 4, most: int = 1 << 14) -> int:
    value = need_int(name, value, 1)
    if value & (value - 1) or not least <= value <= most:
        raise FrontEndError(f"{name}={value}: the FFT length must be a power of two in [{least}, {most}]")
    return value


class FrontEndStep(TransformerMixin, BaseEstimator):
    """Base of the front-end transformers: ``fit`` checks the parameters and records the row width
    (``n_features_in_``) and the output width (``n_features_out_``); ``transform`` maps each row."""

    # how many values one sample of the raw signal has (a multi-axis sensor: its axes), for the first step
    def values_per_sample(self) -> int:
        return 1

    def check_params(self) -> None:
        """FrontEndError naming a parameter that cannot work."""

    def output_width(self, width: int) -> int:
        """The output row's width for input rows of ``width`` values (FrontEndError when they cannot be read)."""
        raise NotImplementedError

    def integer_refusal(self) -> str | None:
        """Why the step has no int16 form (None: its ops all have fixed-point semantics)."""
        return None

    def transform_rows(self, X: np.ndarray) -> np.ndarray:
        """The float64 transform of (n, n_features_in_) rows."""
        raise NotImplementedError

    def lower(self, g: Graph, x: str) -> str:
        """The step as float32 IR ops on the rank-1 row node ``x``; the rank-1 output node."""
        raise NotImplementedError

    def lower_scaled(self, g: Graph, x: str, factors: np.ndarray) -> str:
        """``lower``, each output value times its power of two in ``factors`` (an integer build's feature scales: every
        feature then spans the 16 bits its scale gives, whatever its units). Default: one product after the step;
        a step whose output joins parts of different ranges scales each part before joining them."""
        return scaled(g, self.lower(g, x), factors)

    def fit(self, X, y=None):
        X = validate_data(self, X, reset=True, dtype=np.float64)
        self.check_params()
        self.n_features_out_ = self.output_width(X.shape[1])
        return self

    def transform(self, X):
        check_is_fitted(self, "n_features_out_")
        X = validate_data(self, X, reset=False, dtype=np.float64)
        return self.transform_rows(X)

    def get_feature_names_out(self, input_features=None):
        check_is_fitted(self, "n_features_out_")
        name = type(self).__name__.lower()
        return np.asarray([f"{name}{i}" for i in range(self.n_features_out_)], dtype=object)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = False
        return tags


def frames_of(step, width: int, frame: int, what: str = "frame_length") -> int:
    """How many frames of ``frame`` values a row of ``width`` holds; FrontEndError when it is not a whole number."""
    if width < frame or width % frame:
        raise FrontEndError(f"{type(step).__name__}: rows of {width} values are not whole frames of {what}={frame}")
    return width // frame


# ---------------------------------------------------------------- IR helpers

def reshape(g: Graph, x: str, shape) -> str:
    shape = [int(d) for d in shape]
    if list(g.type(x).shape) == shape:
        return x
    return g.add("reshape", [x], {"shape": shape}, name="front_reshape")


def flat(g: Graph, x: str) -> str:
    return reshape(g, x, [g.type(x).size])


def per_frame_linear(g: Graph, x: str, frames: int, matrix: np.ndarray, name: str) -> str:
    """Each of ``frames`` frames of ``x`` (rank 1) times ``matrix`` (out, in): one mat-vec when there is one frame
    (the matrix stored sparse when that is smaller: a filter bank is mostly zeros), else TFLite's
    fully-connected layer on (frames, in) rows with the matrix stored once. The rank-1 (frames * out) result."""
    matrix = np.asarray(matrix, dtype=np.float64)
    if frames == 1:
        return g.add("matvec", [add_matrix(g, name, matrix), flat(g, x)], name=f"{name}_out")
    weights = g.add("const", attrs={"value": matrix.astype(np.float32)}, type=TensorType(matrix.shape, F32, "OI"),
                    name=name)
    bias = add_const(g, f"{name}_bias", np.zeros(matrix.shape[0]))
    rows = g.add("fully_connected", [reshape(g, x, [frames, matrix.shape[1]]), weights, bias],
                 {"activation": "none"}, name=f"{name}_out")
    return flat(g, rows)


# the functions with a fixed-point form: the square as a product, the others their own ops (ir/ops/front_end/)
OWN_FUNCTIONS = ("sqrt", "log", "abs")


def elementwise(g: Graph, function: str, x: str) -> str:
    """A function of every element: "square", "sqrt", "log", "abs" (which integer builds compute), or another of
    TFLite's float32 functions (float_unary: "rsqrt"; float builds only)."""
    if function == "square":
        return g.add("mul", [x, x], name="square")
    if function in OWN_FUNCTIONS:
        return g.add(function, [x], name=function)
    return g.add("float_unary", [x], {"function": function}, name=function)


def reduce(g: Graph, op: str, x: str, axis: int, keep: bool = False) -> str:
    """reduce_sum / reduce_max / reduce_min over one axis."""
    return g.add(op, [x], {"axes": [axis], "keep_dims": int(keep)}, name=op)


def mean_over(g: Graph, x: str, axis: int, keep: bool = False) -> str:
    count = g.type(x).shape[axis]
    return g.add("scale", [reduce(g, "reduce_sum", x, axis, keep)], {"factor": 1.0 / count}, name="mean")


def scaled(g: Graph, x: str, factors: np.ndarray | None) -> str:
    """``x`` times ``factors`` (its shape, powers of two: exact), or ``x`` when there are none or all are 1."""
    if factors is None or np.all(np.asarray(factors) == 1.0):
        return x
    factors = np.asarray(factors, dtype=np.float64).reshape(g.type(x).shape)
    return g.add("tensor_mul", [x, add_const(g, "feature_scales", factors)], {"activation": "none"}, name="scaled")


def concatenate(g: Graph, parts: list[str], factors: np.ndarray | None = None) -> str:
    """The parts' values one after another; with ``factors`` (one per value), each part scaled by its own before
    they join (a fixed-point concatenation holds one scale: small parts would round away after it)."""
    start, out = 0, None
    for part in parts:
        size = g.type(part).size
        part = scaled(g, flat(g, part), None if factors is None else np.asarray(factors)[start:start + size])
        start += size
        out = part if out is None else g.add("concatenation", [out, part], {"axis": 0}, name="features")
    return out
