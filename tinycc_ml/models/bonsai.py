"""Bonsai (Kumar, Goyal & Varma, ICML 2017): one shallow tree in a sparse low-dimensional projection.

Prediction for a raw input x (length D):

    x̂ = Z · ((x - mean) / std) + z_bias            (d̂ values; mean/std optional, default 0/1)
    y(x) = Σ_{k on the hard path} (W_k x̂) ∘ tanh(σ · V_k x̂)

W_k and V_k are rows k·L .. k·L+L-1 of W and V (shape (n_nodes·L, d̂)); the path starts at the root
k = 0 and goes from internal node k to child 2k+1 where T_k · x̂ > 0, else to 2k+2. A tree of depth h
has 2^h - 1 internal nodes (rows of T) and 2^(h+1) - 1 nodes. With L = 1 (binary) the score's sign
decides: class 1 where y > 0, else class 0.

Bias handling: EdgeML appends a constant feature 1 to x and gives Z one extra column. Here that
column is folded into the dense vector ``z_bias`` so that Z is exactly (d̂, D) and every parameter
array is dense float64 (simple to lower). :meth:`BonsaiModel.folded` also folds mean/std into Z and
z_bias, which is what a deployed model stores.
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.errors import ModelFileError
from tinycc_ml.ir.graph import Graph
from tinycc_ml.models.base import Model
from tinycc_ml.models.lowering import add_const, add_index, add_input, add_matrix, add_normalisation
from tinycc_ml.models.saved import check_array, meta_number

MAX_DEPTH = 12


def tree_sizes(depth: int) -> tuple[int, int]:
    """(n_nodes, n_internal) of a balanced tree of ``depth``."""
    return 2 ** (depth + 1) - 1, 2**depth - 1


def matrix_bytes(array: np.ndarray) -> int:
    """Flash bytes of one parameter matrix: 4 per value dense, or 4 per value + 4 per index sparse."""
    array = np.asarray(array)
    return int(min(4 * array.size, 8 * np.count_nonzero(array)))


class BonsaiModel(Model):
    """Bonsai parameters. ``BonsaiModel(Z, W, V, T, sigma, depth, z_bias=None, mean=None, std=None)``.

    Attributes (all arrays dense float64): Z (d̂, D); z_bias (d̂,) (zeros if not given); W, V
    (n_nodes·L, d̂); T (n_internal, d̂); mean, std (D,) or None; sigma (float); depth (int);
    n_nodes, n_internal, n_scores (= L = n_outputs; 1 for binary), binary, projection_dim, input_dim.
    """

    family = "bonsai"

    def __init__(self, Z, W, V, T, sigma, depth, z_bias=None, mean=None, std=None, offset=None,
                 source="BonsaiModel"):
        depth = check_depth(depth, source)
        self.depth = depth
        self.n_nodes, self.n_internal = tree_sizes(depth)
        self.Z = check_array(Z, "Z", source, ndim=2)
        d_hat, dim = self.Z.shape
        if d_hat < 1 or dim < 1:
            raise ModelFileError(f"{source}: Z has shape {self.Z.shape}, expected (d_hat >= 1, D >= 1)")
        self.W = check_array(W, "W", source, ndim=2)
        rows = self.W.shape[0]
        if rows == 0 or rows % self.n_nodes:
            raise ModelFileError(
                f"{source}: W has {rows} rows, expected a positive multiple of {self.n_nodes} "
                f"(scores per node x nodes of a depth-{depth} tree)"
            )
        self.W = check_array(self.W, "W", source, shape=(rows, d_hat))
        self.V = check_array(V, "V", source, shape=(rows, d_hat))
        self.T = check_array(np.reshape(T, (-1, d_hat)) if np.size(T) == 0 else T, "T", source,
                             shape=(self.n_internal, d_hat))
        self.n_scores = rows // self.n_nodes
        self.z_bias = (np.zeros(d_hat) if z_bias is None
                       else check_array(z_bias, "z_bias", source, shape=(d_hat,)))
        if (mean is None) != (std is None):
            raise ModelFileError(f"{source}: mean and std must be given together")
        self.mean = None if mean is None else check_array(mean, "mean", source, shape=(dim,))
        self.std = None if std is None else check_array(std, "std", source, shape=(dim,))
        if self.std is not None and np.any(self.std == 0):
            raise ModelFileError(f"{source}: std holds a zero at index {int(np.argmin(np.abs(self.std)))}")
        sigma_arr = check_array(sigma, "sigma", source, shape=())
        # a constant added to the scores (regression: the targets' mean); None means zeros
        self.offset = None if offset is None else check_array(offset, "offset", source, shape=(self.n_scores,))
        self.sigma = float(sigma_arr)

    # --- Model interface ---
    @property
    def input_dim(self) -> int:
        return self.Z.shape[1]

    @property
    def projection_dim(self) -> int:
        return self.Z.shape[0]

    @property
    def n_outputs(self) -> int:
        return self.n_scores

    @property
    def binary(self) -> bool:
        return self.n_scores == 1

    def arrays(self) -> dict[str, np.ndarray]:
        out = {"Z": self.Z, "z_bias": self.z_bias, "W": self.W, "V": self.V, "T": self.T}
        if self.mean is not None:
            out["mean"] = self.mean
            out["std"] = self.std
        if self.offset is not None:
            out["offset"] = self.offset
        return out

    def meta(self) -> dict:
        out = {"sigma": self.sigma, "depth": self.depth}
        if self.proba_rule is not None:
            out["proba"] = self.proba_rule
        return out

    def with_proba(self, rule: str | None, source: str = "Bonsai model") -> BonsaiModel:
        """Read the scores as probabilities by ``rule`` (a model trained with the cross-entropy loss:
        "softmax", or "logistic" when binary); None: no probabilities (hinge loss). Returns self."""
        want = "logistic" if self.binary else "softmax"
        if rule is not None and rule != want:
            raise ModelFileError(f"{source}: proba {rule!r} does not fit a model with {self.n_scores} score(s) "
                                 f"(expected {want!r} or none)")
        self.proba_rule = rule
        return self

    @classmethod
    def from_arrays(cls, arrays, meta, source) -> BonsaiModel:
        for name in ("Z", "W", "V", "T"):
            if name not in arrays:
                raise ModelFileError(f"{source}: array {name} is missing")
        sigma = meta_number(meta, "sigma", source, integer=False)
        depth = meta_number(meta, "depth", source, integer=True, low=0, high=MAX_DEPTH)
        model = cls(arrays["Z"], arrays["W"], arrays["V"], arrays["T"], sigma, depth,
                    z_bias=arrays.get("z_bias"), mean=arrays.get("mean"), std=arrays.get("std"),
                    offset=arrays.get("offset"), source=str(source))
        return model.with_proba(meta.get("proba"), str(source))

    def project(self, X) -> np.ndarray:
        X = self._check_input(X)
        if self.mean is not None:
            X = (X - self.mean) / self.std
        return X @ self.Z.T + self.z_bias

    def lower(self) -> Graph:
        """The tree walk evaluates only the nodes on the path: at each level matvec_at picks node k's
        rows, and branch moves k to a child. Where :meth:`projection_folded` applies, the nodes read the
        input itself instead of x̂ = Z x + z_bias (their rows carry x̂'s bias)."""
        g = Graph("bonsai")
        L = self.n_scores
        fold = self.projection_folded()
        if fold is None:
            v = add_normalisation(g, add_input(g, self.input_dim), self.mean, self.std)
            zx = g.add("matvec", [add_matrix(g, "Z", self.Z), v], name="projected")
            if np.any(self.z_bias != 0):
                zx = g.add("add", [zx, add_const(g, "z_bias", self.z_bias)], name="projected_biased")
            stacks = {key: (getattr(self, key), None) for key in "WVT"}
        else:  # the nodes read the input itself: x̂'s bias is each node row's own
            zx = add_input(g, self.input_dim)
            stacks = fold
        d = g.type(zx).shape[0]

        def node_rows(key: str, level: int, node: str, name: str) -> str:
            bias = stacks[key][1]
            shape = (self.n_internal, 1) if key == "T" else (self.n_nodes, L)
            attrs = {} if bias is None or not np.any(bias) else {"bias": bias.reshape(shape).astype(np.float32)}
            return g.add("matvec_at", [stack[key], node, zx], attrs, name=f"{name}{level}")

        stack = {"W": add_const(g, "W", stacks["W"][0].reshape(self.n_nodes, L, d)),
                 "V": add_const(g, "V", stacks["V"][0].reshape(self.n_nodes, L, d))}
        if self.depth:
            stack["T"] = add_const(g, "T", stacks["T"][0].reshape(self.n_internal, 1, d))
        node = add_index(g, "root", 0)
        y = None
        for level in range(self.depth + 1):
            w = node_rows("W", level, node, "w")
            v_k = node_rows("V", level, node, "v")
            t = g.add("tanh", [g.add("scale", [v_k], {"factor": self.sigma}, name=f"sv{level}")], name=f"t{level}")
            part = g.add("mul", [w, t], name=f"node_score{level}")
            y = part if y is None else g.add("add", [y, part], name=f"path_score{level}")
            if level < self.depth:
                node = g.add("branch", [node, node_rows("T", level, node, "theta")], name=f"node{level + 1}")
        if self.offset is not None:
            y = g.add("add", [y, add_const(g, "offset", self.offset)], name="offset_scores")
        g.set_output("scores", y)
        if self.binary and self.task["kind"] == "classification":  # class 1 where y > 0 (ties: class 0)
            pair = g.add("matvec", [add_const(g, "binary_pair", [[0.0], [1.0]]), y], name="binary_pair_scores")
            g.set_output("prediction", g.add("argmax", [pair], name="prediction"))
        else:
            g.set_output("prediction", g.add("argmax", [y], name="prediction"))
        return g

    def leaves(self, X) -> np.ndarray:
        """Index of the node each sample's hard path ends in."""
        return self._walk(self.project(X))[1]

    def scores(self, X) -> np.ndarray:
        y = self._walk(self.project(X))[0]
        return y if self.offset is None else y + self.offset

    @property
    def n_classes(self) -> int:
        return 2 if self.binary and self.task["kind"] == "classification" else self.n_scores

    def predict_index(self, X) -> np.ndarray:
        """Binary: class 1 where the single score is > 0 (the sign rule); else the argmax."""
        s = self.scores(X)
        if self.binary:
            return (s[:, 0] > 0).astype(np.int64)
        return np.argmax(s, axis=1)

    def _walk(self, xh: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        L, d = self.n_scores, self.projection_dim
        W3 = self.W.reshape(self.n_nodes, L, d)
        V3 = self.V.reshape(self.n_nodes, L, d)
        node = np.zeros(len(xh), dtype=np.int64)
        y = np.zeros((len(xh), L))
        for level in range(self.depth + 1):
            y += np.einsum("nld,nd->nl", W3[node], xh) * np.tanh(
                self.sigma * np.einsum("nld,nd->nl", V3[node], xh))
            if level < self.depth:
                go_left = np.einsum("nd,nd->n", self.T[node], xh) > 0
                node = np.where(go_left, 2 * node + 1, 2 * node + 2)
        return y, node

    def projection_folded(self) -> dict | None:
        """{"W": (W Z, W z_bias), "V": ..., "T": ...} (mean/std folded into Z and z_bias first): the node
        matrices applied to the input itself and their bias rows (W x̂ = W Z x + W z_bias), when the projection
        does not pay: the folded matrices need fewer multiply-accumulates per inference than Z x̂ with the
        node rows, and store no more values (a projection to d̂ >= D dimensions, e.g. letter's 16 to 16, or a
        tree with few node rows).
        Otherwise None."""
        m = self.folded()
        d_hat, D = m.Z.shape
        rows = 2 * self.n_scores * (self.depth + 1) + self.depth  # node rows evaluated per inference
        stored = sum(np.count_nonzero(a) for a in (m.Z, m.W, m.V, m.T))
        folded_rows = m.W.shape[0] + m.V.shape[0] + m.T.shape[0]
        if rows * D >= np.count_nonzero(m.Z) + rows * d_hat or folded_rows * D > stored:
            return None
        return {key: (a @ m.Z, a @ m.z_bias) for key, a in (("W", m.W), ("V", m.V), ("T", m.T))}

    # --- helpers ---
    def folded(self) -> BonsaiModel:
        """Same function with mean/std folded into Z and z_bias (zeros of Z stay zero)."""
        if self.mean is None:
            return self
        Z = self.Z / self.std
        return BonsaiModel(Z, self.W, self.V, self.T, self.sigma, self.depth,
                           z_bias=self.z_bias - Z @ self.mean, offset=self.offset).with_task(self.task) \
            .with_proba(self.proba_rule)

    def storage_bytes(self) -> int:
        """Flash bytes: Z, W, V, T each dense (4 B/value) or sparse (8 B/nonzero), whichever is
        smaller, plus z_bias, mean/std if present and sigma, all 4 B/value."""
        total = sum(matrix_bytes(a) for a in (self.Z, self.W, self.V, self.T))
        total += 4 * self.z_bias.size + 4
        if self.offset is not None:
            total += 4 * self.offset.size
        if self.mean is not None:
            total += 8 * self.mean.size
        return int(total)


def check_depth(depth, source) -> int:
    if isinstance(depth, bool) or not isinstance(depth, (int, np.integer, float)) or depth != int(depth):
        raise ModelFileError(f"{source}: depth {depth!r} is not an integer")
    depth = int(depth)
    if not 0 <= depth <= MAX_DEPTH:
        raise ModelFileError(f"{source}: depth {depth} is outside 0..{MAX_DEPTH}")
    return depth
