"""EdgeML's saved model folders (ProtoNN and Bonsai, TF or PyTorch) as tinycc-ml models.

For a folder, ``load_model`` asks each of ``FOLDER_READERS``: its match says how surely the folder's
file names are that format (0: not at all), and the surest reads the folder.

- ProtoNN: W.npy (D x d̂, the transpose of ``ProtoNNModel.W``), B.npy, Z.npy, gamma.npy, optional
  mean.npy / std.npy; ``save_edgeml_protonn`` writes this layout (for interchange and tests).
- Bonsai: W.npy, V.npy, T.npy, Z.npy (its last column multiplies EdgeML's appended bias feature 1),
  optional mean.npy / std.npy and hyperParam.npy, a pickled dict read by a restricted reader that
  executes nothing (``read_pickled_dict``).
"""

from __future__ import annotations

import io
import math
import os
import pickle
from pathlib import Path

import numpy as np

from tinycc_ml.errors import ModelFileError
from tinycc_ml.models.bonsai import BonsaiModel, check_depth, tree_sizes
from tinycc_ml.models.protonn import ProtoNNModel
from tinycc_ml.models.saved import check_array, load_npy, not_a_file

MAX_HYPERPARAM_BYTES = 1 << 20  # hyperParam.npy holds a handful of numbers


def protonn_match(names: set[str]) -> int:
    """How surely a folder of files ``names`` is EdgeML's ProtoNN (0: not at all)."""
    return len(names & {"W.npy", "B.npy", "Z.npy", "gamma.npy"})


def bonsai_match(names: set[str]) -> int:
    """How surely a folder of files ``names`` is EdgeML's Bonsai (0: not at all)."""
    # V, T and hyperParam are Bonsai's own (W.npy and Z.npy alone could be ProtoNN's): a Bonsai
    # folder missing T.npy is still Bonsai, and its loader names what is missing
    return 10 if names & {"V.npy", "T.npy", "hyperParam.npy"} else 0


def load_edgeml_protonn(directory) -> ProtoNNModel:
    """Read EdgeML's ProtoNN directory: W.npy (D x d̂), B.npy, Z.npy, gamma.npy, optional mean/std."""
    directory = Path(directory)
    arrays = {}
    for name in ("W", "B", "Z", "gamma", "mean", "std"):
        path = directory / f"{name}.npy"
        if path.exists() or path.is_symlink():  # a folder, FIFO or broken link: load_npy says which
            arrays[name] = check_array(load_npy(path), name, path)
        elif name not in ("mean", "std"):
            raise ModelFileError(f"{path}: no such file (an EdgeML ProtoNN directory needs W, B, Z, gamma)")
    W = arrays["W"]
    if W.ndim != 2:
        raise ModelFileError(f"{directory / 'W.npy'}: W has shape {W.shape}, expected (D, d̂)")
    if arrays["B"].ndim != 2 or arrays["B"].shape[0] != W.shape[1]:
        raise ModelFileError(
            f"{directory / 'B.npy'}: B has shape {arrays['B'].shape}, expected ({W.shape[1]}, m) to match W (D x d̂)")
    if arrays["Z"].ndim != 2 or arrays["Z"].shape[1] != arrays["B"].shape[1]:
        raise ModelFileError(
            f"{directory / 'Z.npy'}: Z has shape {arrays['Z'].shape}, expected (L, {arrays['B'].shape[1]})")
    for name in ("mean", "std"):
        if name in arrays:
            arrays[name] = arrays[name].reshape(-1)
            if arrays[name].shape != (W.shape[0],):
                raise ModelFileError(
                    f"{directory / (name + '.npy')}: {name} has {arrays[name].size} values, expected {W.shape[0]}")
    return ProtoNNModel(W.T, arrays["B"], arrays["Z"], arrays["gamma"], arrays.get("mean"), arrays.get("std"),
                        source=str(directory))


def save_edgeml_protonn(model: ProtoNNModel, directory) -> None:
    """Write ``model`` in EdgeML's directory layout (for interchange and tests)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    np.save(directory / "W.npy", model.W.T)
    np.save(directory / "B.npy", model.B)
    np.save(directory / "Z.npy", model.Z)
    np.save(directory / "gamma.npy", np.asarray(model.gamma))
    if model.mean is not None:
        np.save(directory / "mean.npy", model.mean)
    if model.std is not None:
        np.save(directory / "std.npy", model.std)


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
    depth = check_depth(depth, hp_source)
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


# (match, read) per folder format, the first of equally sure matches winning
FOLDER_READERS = ((protonn_match, load_edgeml_protonn), (bonsai_match, load_edgeml_bonsai))
