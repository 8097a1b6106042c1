"""The project's saved-model format and safe array loading.

A model file is one ``.npz`` archive (written with numpy, read with ``allow_pickle=False``)
holding the model's arrays plus one extra entry ``__meta__``: the UTF-8 bytes of a JSON object
``{"format": "tinycc-ml-model", "version": 1, "family": NAME, "meta": {...}}``.
Nothing is ever unpickled. Files are written to a temporary name and renamed into place.
"""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import numpy as np

from tinycc_ml.errors import ModelFileError
from tinycc_ml.files import atomic_write_bytes

FORMAT_NAME = "tinycc-ml-model"
FORMAT_VERSION = 1
META_KEY = "__meta__"


def save_model_file(path, family: str, arrays: dict[str, np.ndarray], meta: dict) -> Path:
    """Save ``arrays`` and JSON-serialisable ``meta`` of a model ``family`` to one .npz file."""
    path = Path(path)
    header = {"format": FORMAT_NAME, "version": FORMAT_VERSION, "family": family, "meta": meta}
    payload = {name: np.asarray(value) for name, value in arrays.items()}
    for name, value in payload.items():
        if value.dtype == object:
            raise ModelFileError(f"{path}: array {name!r} has dtype object; only numeric arrays are saved")
    payload[META_KEY] = np.frombuffer(json.dumps(header, sort_keys=True).encode(), dtype=np.uint8)
    buffer = io.BytesIO()
    np.savez(buffer, **payload)
    atomic_write_bytes(path, buffer.getvalue())
    return path


def read_arrays(path, error: type[Exception] = ModelFileError) -> np.ndarray | dict[str, np.ndarray]:
    """The array of a .npy file, or the arrays of a .npz file by name, never unpickling; every
    failure is one ``error`` naming the file."""
    path = Path(path)
    if not path.is_file():
        raise error(f"{path}: no such file")
    try:
        loaded = np.load(path, allow_pickle=False)
        if isinstance(loaded, np.ndarray):
            return loaded
        with loaded:  # an object array in an .npz only fails when read, so read them all here
            return {name: loaded[name] for name in loaded.files}
    except ValueError as exc:
        raise error(f"{path}: holds an object (pickled) array, which is never loaded ({exc})") from None
    except (OSError, zipfile.BadZipFile, EOFError) as exc:
        raise error(f"{path}: not a readable .npy or .npz file: {exc}") from None


def read_model_file(path) -> tuple[str, dict[str, np.ndarray], dict]:
    """Read a file written by :func:`save_model_file`: returns ``(family, arrays, meta)``."""
    arrays = read_arrays(path)
    if not isinstance(arrays, dict):
        raise ModelFileError(f"{path}: a single .npy array, not a tinycc-ml model file (.npz)")
    if META_KEY not in arrays:
        raise ModelFileError(f"{path}: not a tinycc-ml model file (no {META_KEY} entry)")
    try:
        header = json.loads(arrays.pop(META_KEY).tobytes().decode())
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelFileError(f"{path}: metadata is not valid JSON: {exc}") from None
    if header.get("format") != FORMAT_NAME:
        raise ModelFileError(f"{path}: metadata format is {header.get('format')!r}, expected {FORMAT_NAME!r}")
    if header.get("version") != FORMAT_VERSION:
        raise ModelFileError(f"{path}: format version {header.get('version')!r} is not supported")
    return header["family"], arrays, header.get("meta", {})


def load_npy(path) -> np.ndarray:
    """Load one ``.npy`` file without ever unpickling, with errors that name the file."""
    array = read_arrays(path)
    if not isinstance(array, np.ndarray):
        raise ModelFileError(f"{path}: an .npz archive where one .npy array was expected")
    return array


def check_array(value, name: str, source, shape: tuple | None = None, ndim: int | None = None) -> np.ndarray:
    """Return ``value`` as a finite float64 array or raise naming ``source`` and ``name``.

    ``shape`` entries that are ``None`` match any size.
    """
    array = np.asarray(value)
    if array.dtype == object or not (np.issubdtype(array.dtype, np.number) or array.dtype == bool):
        raise ModelFileError(f"{source}: {name} has non-numeric dtype {array.dtype}")
    array = array.astype(np.float64)
    if ndim is not None and array.ndim != ndim:
        raise ModelFileError(f"{source}: {name} has shape {array.shape}, expected {ndim} dimensions")
    if shape is not None:
        if array.ndim != len(shape) or any(w is not None and w != s for w, s in zip(shape, array.shape)):
            want = "(" + ", ".join("*" if w is None else str(w) for w in shape) + ")"
            raise ModelFileError(f"{source}: {name} has shape {array.shape}, expected {want}")
    if not np.all(np.isfinite(array)):
        bad = np.argwhere(~np.isfinite(array))[0]
        raise ModelFileError(
            f"{source}: {name} holds a non-finite value ({array[tuple(bad)]}) at index {tuple(int(i) for i in bad)}"
        )
    return array
