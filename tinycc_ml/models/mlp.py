"""Dense feed-forward networks (scikit-learn's MLPClassifier / MLPRegressor, ONNX dense networks).

h_0 = (x - mean) / std,  h_i = act(W_i h_{i-1} + b_i) for the hidden layers,
scores = W_k h_{k-1} + b_k (the output layer's pre-activation: logits, or the regression value).

Hidden activations: relu, tanh, logistic, identity: one for all hidden layers (scikit-learn), or per
layer a chain of them applied in order (ONNX networks mixing activations; the output layer's chain, if
any, makes the scores: e.g. Gemm, Tanh, Softmax has scores tanh(W h + b)).
The output activation says what the scores mean: "softmax" (classes: argmax; probabilities the
softmax of the scores), "logistic" (one score: class 1 where it is > 0, i.e. probability > 0.5; several:
multilabel, each label where its score is > 0) or "identity" (regression).

Lowered onto the existing ops, so every target's mat-vec kernels serve it (integer builds: 16-bit
weights and activations, or 8-bit weights with 16-bit activations at precision int8):
relu = clip(x, 0, FLOAT32_MAX) (exact), tanh = the tanh op (fixed point: the tanh_approx pass's
interpolated table, max error 2^-9 over the calibrated range by default, reported per node),
logistic(x) = 0.5 tanh(x / 2) + 0.5 (the same table: error at most half the table's).
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.errors import ModelFileError
from tinycc_ml.ir.graph import Graph
from tinycc_ml.models.base import Model
from tinycc_ml.models.lowering import absorb_normalisation, add_const, add_input, add_matrix, add_normalisation
from tinycc_ml.models.saved import check_array, check_normalisation

ACTIVATIONS = ("relu", "tanh", "logistic", "identity")
OUTPUTS = ("softmax", "logistic", "identity")
RELU_TOP = 3.0e38  # relu as clip(x, 0, RELU_TOP): finite in float32, beyond any int32 bound
MAX_LAYERS = 64


def activation(name: str, z: np.ndarray) -> np.ndarray:
    """The numpy reference of a hidden activation."""
    if name == "relu":
        return np.maximum(z, 0.0)
    if name == "tanh":
        return np.tanh(z)
    if name == "logistic":
        return 0.5 * np.tanh(0.5 * z) + 0.5  # = 1 / (1 + e^-z), without overflow
    return z


def _chains(activation, n_layers: int, source) -> list[tuple[str, ...]]:
    """Per layer the activations applied in order after its bias ("identity" dropped): ``activation`` is one
    name for every hidden layer (none after the output layer), or one entry per layer, each a name or a
    sequence of names."""
    if isinstance(activation, str):
        per_layer = [[activation]] * (n_layers - 1) + [[]]
    else:
        per_layer = list(activation) if isinstance(activation, (list, tuple)) else None
        if per_layer is None or len(per_layer) != n_layers:
            raise ModelFileError(f"{source}: activations {activation!r:.80} must be one name or one entry per layer "
                                 f"({n_layers})")
        per_layer = [[a] if isinstance(a, str) else a for a in per_layer]
    chains = []
    for i, chain in enumerate(per_layer):
        if not isinstance(chain, (list, tuple)) or len(chain) > 8:
            raise ModelFileError(f"{source}: activations of layer {i} are {chain!r:.80}, expected up to 8 names")
        for name in chain:
            if name not in ACTIVATIONS:
                raise ModelFileError(f"{source}: activation {name!r:.40} (layer {i}) is not supported; supported: "
                                     f"{', '.join(ACTIVATIONS)}")
        chains.append(tuple(a for a in chain if a != "identity"))
    return chains


class MLPModel(Model):
    """Layers ``weights[i]`` (out_i, in_i) and ``biases[i]`` (out_i,), a hidden ``activation`` (one name for
    every hidden layer, or per layer a name or chain of names: see ``_chains``), an ``output`` activation,
    optional input ``mean`` / ``std``."""

    family = "mlp"
    # the activation the source file applies to the scores last ("Softmax", "Sigmoid": an ONNX file's output is then
    # the probabilities, importers/onnx.onnx_outputs), None: the file outputs the scores
    file_applies: str | None = None
    # an ONNX file's chain read again as a float network (importers/onnx.py): its build in TFLite's int8 dialect
    network_form = None

    def __init__(self, weights, biases, activation="relu", output: str = "softmax", mean=None, std=None,
                 source: str = "MLP model"):
        if isinstance(activation, str) and activation not in ACTIVATIONS:
            raise ModelFileError(f"{source}: hidden activation {activation!r} is not supported; supported: "
                                 f"{', '.join(ACTIVATIONS)}")
        if output not in OUTPUTS:
            raise ModelFileError(f"{source}: output activation {output!r} is not supported; supported: "
                                 f"{', '.join(OUTPUTS)}")
        weights, biases = list(weights), list(biases)
        if not 1 <= len(weights) <= MAX_LAYERS or len(biases) != len(weights):
            raise ModelFileError(f"{source}: {len(weights)} weight matrices and {len(biases)} bias vectors; expected "
                                 f"the same number, 1 to {MAX_LAYERS}")
        self.weights, self.biases = [], []
        width = None
        for i, (W, b) in enumerate(zip(weights, biases)):
            W = check_array(W, f"W{i}", source, ndim=2)
            if 0 in W.shape or (width is not None and W.shape[1] != width):
                raise ModelFileError(f"{source}: W{i} has shape {W.shape}, expected ({'*'}, {width or '*'}) with no "
                                     "empty dimension (each layer takes the previous layer's outputs)")
            self.weights.append(W)
            self.biases.append(check_array(b, f"b{i}", source, shape=(W.shape[0],)))
            width = W.shape[0]
        self.chains = _chains(activation, len(self.weights), source)
        hidden = set(self.chains[:-1])
        if isinstance(activation, str):
            self.activation = activation
        elif not self.chains[-1] and len(hidden) <= 1 and all(len(c) <= 1 for c in hidden):
            self.activation = (hidden.pop() or ("identity",))[0] if hidden else "relu"
        else:
            self.activation = None  # mixed: see self.chains
        self.output = output
        dim = self.weights[0].shape[1]
        self.mean, self.std = check_normalisation(mean, std, dim, source)
        if output == "identity":
            self.task = {"kind": "regression"}
            if width != 1:
                raise ModelFileError(f"{source}: an identity output (regression) has {width} outputs; only one "
                                     "target can be compiled")
        elif output == "logistic" and width > 1:
            self.task = {"kind": "multilabel", "rule": "threshold", "threshold": 0.0}
        elif output == "softmax" and width < 2:
            raise ModelFileError(f"{source}: a softmax output needs at least two classes, has {width}")

    # ---- Model interface
    @property
    def input_dim(self) -> int:
        return self.weights[0].shape[1]

    @property
    def n_outputs(self) -> int:
        return self.weights[-1].shape[0]

    @property
    def binary(self) -> bool:
        return self.output == "logistic" and self.n_outputs == 1

    @property
    def n_classes(self) -> int:
        return 2 if self.binary else self.n_outputs

    @property
    def hidden_sizes(self) -> list[int]:
        return [W.shape[0] for W in self.weights[:-1]]

    def arrays(self) -> dict[str, np.ndarray]:
        out = {}
        for i, (W, b) in enumerate(zip(self.weights, self.biases)):
            out[f"W{i}"], out[f"b{i}"] = W, b
        if self.mean is not None:
            out["mean"] = self.mean
        if self.std is not None:
            out["std"] = self.std
        return out

    def meta(self) -> dict:
        if self.activation is None:
            return {"activation": "mixed", "activations": [list(c) for c in self.chains], "output": self.output}
        return {"activation": self.activation, "output": self.output}

    @classmethod
    def from_arrays(cls, arrays, meta, source) -> MLPModel:
        n = 0
        while f"W{n}" in arrays and n <= MAX_LAYERS:
            n += 1
        if n == 0:
            raise ModelFileError(f"{source}: missing array 'W0'")
        expected = {f"W{i}" for i in range(n)} | {f"b{i}" for i in range(n)} | {"mean", "std"}
        missing = sorted({f"b{i}" for i in range(n)} - set(arrays))
        if missing:
            raise ModelFileError(f"{source}: missing array(s) {missing}")
        unknown = sorted(set(arrays) - expected)
        if unknown:
            raise ModelFileError(f"{source}: unexpected array(s) {unknown}")
        for key in ("activation", "output"):
            if not isinstance(meta.get(key), str):
                raise ModelFileError(f"{source}: metadata {key!r} is {meta.get(key)!r:.80}, expected a name")
        activation = meta["activation"]
        if activation == "mixed":
            activation = meta.get("activations")
            if not isinstance(activation, list):
                raise ModelFileError(f"{source}: metadata 'activations' is {activation!r:.80}, expected a list "
                                     "(one list of names per layer)")
        model = cls([arrays[f"W{i}"] for i in range(n)], [arrays[f"b{i}"] for i in range(n)], activation,
                    meta["output"], arrays.get("mean"), arrays.get("std"), source=source)
        return model

    def describe(self) -> str:
        sizes = "-".join(str(s) for s in [self.input_dim, *self.hidden_sizes, self.n_outputs])
        acts = self.activation or "; ".join("+".join(c) or "identity" for c in self.chains)
        return f"mlp ({sizes}, {acts}, {self.output} output)"

    def _hidden(self, X) -> np.ndarray:
        h = self._check_input(X)
        if self.mean is not None:
            h = h - self.mean
        if self.std is not None:
            h = h / self.std
        for W, b, chain in zip(self.weights[:-1], self.biases[:-1], self.chains):
            h = h @ W.T + b
            for name in chain:
                h = activation(name, h)
        return h

    def scores(self, X) -> np.ndarray:
        s = self._hidden(X) @ self.weights[-1].T + self.biases[-1]
        for name in self.chains[-1]:
            s = activation(name, s)
        return s

    def size_advice(self, room_bytes: int, constant_bytes: int, value_bytes: int) -> str | None:
        fraction = room_bytes / constant_bytes
        sizes = [W.shape[0] for W in self.weights[:-1]]
        if not sizes:
            return None
        # every hidden layer scaled by one factor s: the weights shrink by about s (first and last layers) to s^2
        scaled = [max(1, int(h * fraction)) for h in sizes]
        return f"hidden layers of {tuple(scaled)} units (hidden_layer_sizes; now {tuple(sizes)})"

    def predict_index(self, X) -> np.ndarray:
        s = self.scores(X)
        return (s[:, 0] > 0).astype(np.int64) if self.binary else np.argmax(s, axis=1)

    @property
    def proba_rule(self) -> str | None:
        """softmax (classes), logistic (binary: [1 - p, p]), logistic_each (multilabel), None (regression)."""
        if self.output == "softmax":
            return "softmax"
        if self.output == "logistic":
            return "logistic" if self.binary else "logistic_each"
        return None

    def with_input_map(self, A, c) -> MLPModel:
        """This network applied to ``A x + c`` (a PCA step before it), folded into its first layer: exact."""
        W, b = absorb_normalisation(self.weights[0], self.biases[0], self.mean, self.std)
        model = MLPModel([W @ A, *self.weights[1:]], [b + W @ c, *self.biases[1:]],
                         self.activation if self.activation is not None else self.chains, self.output,
                         source="MLP model after a linear transform")
        model.task, model._classes = self.task, self._classes
        return model

    def lower(self) -> Graph:
        g = Graph("mlp")
        h = add_normalisation(g, add_input(g, self.input_dim), self.mean, self.std)
        last = len(self.weights) - 1
        for i, (W, b, chain) in enumerate(zip(self.weights, self.biases, self.chains)):
            z = g.add("matvec", [add_matrix(g, f"W{i}", W), h], name=f"weighted{i}")
            if np.any(b != 0):
                z = g.add("add", [z, add_const(g, f"b{i}", b)], name=f"pre{i}" if i < last or chain else "scores")
            for j, name in enumerate(chain):
                out = "scores" if i == last and j == len(chain) - 1 else f"h{i}" if j == len(chain) - 1 else f"h{i}_{j}"
                z = lower_activation(g, name, z, out)
            h = z
        g.set_output("scores", h)
        if self.binary:  # class 1 where the score is > 0: argmax of (0, score) picks 0 on ties
            pair = g.add("matvec", [add_const(g, "binary_pair", [[0.0], [1.0]]), h], name="binary_pair_scores")
            g.set_output("prediction", g.add("argmax", [pair], name="prediction"))
        else:
            g.set_output("prediction", g.add("argmax", [h], name="prediction"))
        return g


def lower_activation(g: Graph, name: str, z: str, out: str) -> str:
    """The IR of a hidden activation of ``z`` (see the module doc)."""
    if name == "relu":
        return g.add("clip", [z], {"lo": 0.0, "hi": RELU_TOP}, name=out)
    if name == "tanh":
        return g.add("tanh", [z], name=out)
    if name == "logistic":
        half = g.add("scale", [z], {"factor": 0.5}, name=f"{out}_half")
        t = g.add("scale", [g.add("tanh", [half], name=f"{out}_tanh")], {"factor": 0.5}, name=f"{out}_half_tanh")
        half_one = np.full(g.type(z).shape, 0.5)
        return g.add("add", [t, add_const(g, f"{out}_half_one", half_one)], name=out)
    return z
