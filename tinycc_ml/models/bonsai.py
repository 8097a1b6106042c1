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

import io
import math
import os
import pickle
from pathlib import Path

import numpy as np

from tinycc_ml.errors import ModelFileError
from tinycc_ml.ir.graph import Graph
from tinycc_ml.models.base import Model
from tinycc_ml.models.lowering import add_const, add_index, add_input, add_matrix, add_normalisation
from tinycc_ml.models.saved import check_array, load_npy, meta_number

MAX_DEPTH = 12
MAX_HYPERPARAM_BYTES = 1 << 20  # hyperParam.npy holds a handful of numbers


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
        depth = _check_depth(depth, source)
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
    def directory_match(cls, names: set[str]) -> int:
        # V, T and hyperParam are Bonsai's own (W.npy and Z.npy alone could be ProtoNN's): a Bonsai
        # folder missing T.npy is still Bonsai, and its loader names what is missing
        return 10 if names & {"V.npy", "T.npy", "hyperParam.npy"} else 0

    @classmethod
    def from_directory(cls, path) -> BonsaiModel:
        return load_edgeml_bonsai(path)

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


def _check_depth(depth, source) -> int:
    if isinstance(depth, bool) or not isinstance(depth, (int, np.integer, float)) or depth != int(depth):
        raise ModelFileError(f"{source}: depth {depth!r} is not an integer")
    depth = int(depth)
    if not 0 <= depth <= MAX_DEPTH:
        raise ModelFileError(f"{source}: depth {depth} is outside 0..{MAX_DEPTH}")
    return depth


# --- EdgeML import ---------------------------------------------------------------------------------

HYPERPARAM_KEYS = ("projDim", "numClasses", "depth", "sigma")


class _ArrayStub:
    """Stands in for numpy.ndarray during restricted unpickling; keeps only the state."""

    def __init__(self):
        self.state = None

    def __setstate__(self, state):
        self.state = state


class _DtypeStub:
    def __init__(self, name, *_args):
        if not isinstance(name, str):
            raise pickle.UnpicklingError(f"dtype name {name!r} is not a string")
        self.name = name

    def __setstate__(self, state):
        pass


def _reconstruct(*_args):
    return _ArrayStub()


def _scalar(dtype, data=None):
    # numpy pickles scalars as scalar(dtype, raw bytes); rebuild only plain numbers, from bytes.
    if not isinstance(dtype, _DtypeStub) or not isinstance(data, bytes):
        raise pickle.UnpicklingError("malformed numpy scalar")
    try:
        kind = np.dtype(dtype.name).kind
    except TypeError:
        kind = "?"
    if kind not in "iufb":
        raise pickle.UnpicklingError(f"numpy scalar of dtype {dtype.name!r} is refused")
    return np.frombuffer(data, dtype=np.dtype(dtype.name), count=1)[0].item()


_ALLOWED = {
    ("numpy.core.multiarray", "_reconstruct"): _reconstruct,
    ("numpy._core.multiarray", "_reconstruct"): _reconstruct,
    ("numpy.core.multiarray", "scalar"): _scalar,
    ("numpy._core.multiarray", "scalar"): _scalar,
    ("numpy", "ndarray"): _ArrayStub,
    ("numpy", "dtype"): _DtypeStub,
}


class _RestrictedUnpickler(pickle.Unpickler):
    """Resolves no real global: only harmless stand-ins for numpy's array/scalar rebuilders."""

    def find_class(self, module, name):
        try:
            return _ALLOWED[(module, name)]
        except KeyError:
            raise pickle.UnpicklingError(f"refused global {module}.{name}") from None

    def persistent_load(self, pid):
        raise pickle.UnpicklingError("persistent ids are refused")


def read_pickled_dict(path) -> dict:
    """Read a dict of plain numbers/strings from a .npy (object array) or raw pickle file without
    running any code from it."""
    path = Path(path)
    if not path.is_file():
        from tinycc_ml.models.saved import not_a_file

        raise ModelFileError(f"{path}: {not_a_file(path)}")
    if path.stat().st_size > MAX_HYPERPARAM_BYTES:
        raise ModelFileError(f"{path}: {path.stat().st_size} bytes, too large for a dict of hyper-parameters "
                             f"(at most {MAX_HYPERPARAM_BYTES})")
    data = path.read_bytes()
    stream = io.BytesIO(data)
    if data.startswith(b"\x93NUMPY"):
        try:
            version = np.lib.format.read_magic(stream)
            if version == (1, 0):
                _, _, dtype = np.lib.format.read_array_header_1_0(stream)
            elif version == (2, 0):
                _, _, dtype = np.lib.format.read_array_header_2_0(stream)
            else:
                raise ValueError(f"unsupported .npy version {version}")
        except Exception as exc:  # numpy's header parser fails in many ways on hostile bytes
            raise ModelFileError(f"{path}: bad .npy header: {' '.join(str(exc).split())[:200]}") from None
        if not dtype.hasobject:
            raise ModelFileError(f"{path}: holds a {dtype} array, expected a pickled dict")
    try:
        obj = _RestrictedUnpickler(stream).load()
    except Exception as exc:  # any failure of a hostile or broken stream is a file error
        raise ModelFileError(f"{path}: cannot be read safely: {exc}") from None
    if isinstance(obj, _ArrayStub):
        state = obj.state
        items = state[-1] if isinstance(state, tuple) and state else None
        if not isinstance(items, list) or len(items) != 1:
            raise ModelFileError(f"{path}: expected a 0-d object array holding one dict")
        obj = items[0]
    if not isinstance(obj, dict):
        raise ModelFileError(f"{path}: holds a {type(obj).__name__}, expected a dict")
    for key, value in obj.items():
        if not isinstance(key, str) or not isinstance(value, (bool, int, float, str)):
            raise ModelFileError(f"{path}: entry {key!r} holds a {type(value).__name__}, expected a number")
    return obj


def _finite_float(value) -> bool:
    """A number float() holds (10**400, a Python int, does not)."""
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


def _hp_number(hp: dict, key: str, source, integer: bool):
    if key not in hp:
        raise ModelFileError(f"{source}: hyper-parameter {key!r} is missing")
    value = hp[key]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not _finite_float(value):
        raise ModelFileError(f"{source}: hyper-parameter {key} = {value!r} is not a finite number")
    if integer:
        if value != int(value) or value < 0:
            raise ModelFileError(f"{source}: hyper-parameter {key} = {value!r} is not a non-negative integer")
        return int(value)
    return float(value)


def load_edgeml_bonsai(directory, hyperparams: dict | None = None) -> BonsaiModel:
    """Import a Bonsai model saved by EdgeML (TF or PyTorch) from ``directory``.

    Reads W.npy, V.npy, T.npy, Z.npy ([d̂, D+1]: last column multiplies EdgeML's appended bias
    feature 1), optional mean.npy/std.npy (length D+1, bias entry last) and hyperParam.npy, a pickled
    dict read by a restricted reader that executes nothing; ``hyperparams`` (keys projDim,
    numClasses, depth, sigma, optional dataDim) replaces that file. EdgeML's x̂ = Z·(([x,1]-mean)/std)/d̂
    is rewritten exactly as Z[:, :D]/d̂ · ((x - mean[:D])/std[:D]) + z_bias.
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise ModelFileError(f"{directory}: no such directory")
    if hyperparams is None:
        hp_source = directory / "hyperParam.npy"
        hp = read_pickled_dict(hp_source)
    else:
        hp_source = "hyperparams argument"
        hp = dict(hyperparams)
    d_hat = _hp_number(hp, "projDim", hp_source, integer=True)
    n_classes = _hp_number(hp, "numClasses", hp_source, integer=True)
    depth = _hp_number(hp, "depth", hp_source, integer=True)
    sigma = _hp_number(hp, "sigma", hp_source, integer=False)
    if d_hat < 1 or n_classes < 1:
        raise ModelFileError(f"{hp_source}: projDim and numClasses must be >= 1")
    depth = _check_depth(depth, hp_source)
    n_nodes, n_internal = tree_sizes(depth)

    def npy(name, shape):
        path = directory / name
        return check_array(load_npy(path), name, path, shape=shape)

    Z = npy("Z.npy", (d_hat, None))
    dim1 = Z.shape[1]
    if dim1 < 2:
        raise ModelFileError(f"{directory / 'Z.npy'}: has {dim1} columns, expected D + 1 >= 2 (bias last)")
    if "dataDim" in hp:
        data_dim = _hp_number(hp, "dataDim", hp_source, integer=True)
        if data_dim not in (dim1, dim1 - 1):  # EdgeML counts the bias column; accept either
            raise ModelFileError(f"{hp_source}: dataDim = {data_dim} does not match Z.npy's {dim1} columns")
    if n_classes == 2 and load_npy(directory / "W.npy").shape[:1] == (n_nodes,):
        n_classes = 1  # a binary model saved with numClasses 2 but one score per node
    W = npy("W.npy", (n_classes * n_nodes, d_hat))
    V = npy("V.npy", (n_classes * n_nodes, d_hat))
    if n_internal == 0 and not os.path.lexists(directory / "T.npy"):
        T = np.zeros((0, d_hat))
    else:
        T = load_npy(directory / "T.npy")
        if T.size == 0:
            T = np.reshape(T, (0, d_hat))
        T = check_array(T, "T.npy", directory / "T.npy", shape=(n_internal, d_hat))
    # lexists: a broken link or a FIFO is there, and load_npy says what it is
    has_mean, has_std = os.path.lexists(directory / "mean.npy"), os.path.lexists(directory / "std.npy")
    if has_mean != has_std:
        missing = "std.npy" if has_mean else "mean.npy"
        raise ModelFileError(f"{directory / missing}: no such file (mean.npy and std.npy come together)")
    if has_mean:
        mean = npy("mean.npy", (dim1,)).copy()
        std = npy("std.npy", (dim1,)).copy()
        if np.any(std == 0):
            zero = int(np.argmin(np.abs(std)))
            raise ModelFileError(f"{directory / 'std.npy'}: holds a zero at index {zero}")
    else:
        mean, std = np.zeros(dim1), np.ones(dim1)
    z_bias = Z[:, -1] * (1.0 - mean[-1]) / std[-1] / d_hat
    return BonsaiModel(Z[:, :-1] / d_hat, W, V, T, sigma, depth, z_bias=z_bias,
                       mean=mean[:-1] if has_mean else None, std=std[:-1] if has_mean else None,
                       source=str(directory))
