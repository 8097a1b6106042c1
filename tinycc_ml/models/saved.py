"""The project's saved-model format and safe array loading.

A model file is one ``.npz`` archive (written with numpy, read with ``allow_pickle=False``)
holding the model's arrays plus one extra entry ``__meta__``: the UTF-8 bytes of a JSON object
``{"format": "tinycc-ml-model", "version": 1, "family": NAME, "meta": {...}}``.
Nothing is ever unpickled. Files are written to a temporary name and renamed into place.
"""

from __future__ import annotations

import ast
import io
import json
import os
import zipfile
from pathlib import Path

import numpy as np

from tinycc_ml.errors import ModelFileError, TinyccError
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


# --- reading without trusting the file ------------------------------------------------------
#
# numpy's own loader allocates whatever a header claims and parses the header with Python's
# tokenizer; here every size is checked against a limit before anything is allocated or
# decompressed, and the header is parsed as a literal whose failures all become one error.

NPY_MAGIC = b"\x93NUMPY"
MAX_HEADER_BYTES = 10_000  # numpy's own default limit for a .npy header
MAX_MEMBERS = 256
MAX_BYTES_ENV = "TINYCC_ML_MAX_ARRAY_BYTES"
DEFAULT_MAX_BYTES = 1 << 30  # 1 GiB of array data per file (the sum over an archive's members)
ARRAY_KINDS = "biuf"  # bool, signed, unsigned, float: complex, strings, objects, dates are refused
# what the reader itself lets through: also fixed-width text (class labels in data files); model
# arrays and data rows are then checked against ARRAY_KINDS
READ_KINDS = ARRAY_KINDS + "U"


def max_array_bytes() -> int:
    """The array-data limit per file: ``TINYCC_ML_MAX_ARRAY_BYTES`` (bytes; suffixes K, M, G
    allowed) or 1 GiB."""
    text = os.environ.get(MAX_BYTES_ENV, "").strip()
    if not text:
        return DEFAULT_MAX_BYTES
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    factor = units.get(text[-1].upper(), 1)
    digits = text[:-1] if text[-1].upper() in units else text
    if not digits.isdigit():
        raise ModelFileError(f"{MAX_BYTES_ENV}={text!r} is not a byte count (e.g. 268435456 or 256M)")
    return int(digits) * factor


class _BadArray(ValueError):
    """A file fault found by the reader itself (its message is complete)."""


def _parse_npy_header(stream, budget: int, what: str) -> tuple[np.dtype, tuple[int, ...], bool, int]:
    """(dtype, shape, fortran_order, data bytes) of the .npy stream positioned at its start."""
    magic = stream.read(8)
    if len(magic) < 8 or not magic.startswith(NPY_MAGIC):
        raise _BadArray(f"{what}not a .npy array (no .npy magic)")
    major = magic[6]
    if major not in (1, 2, 3):
        raise _BadArray(f"{what}has unsupported .npy version {major}.{magic[7]}")
    size_bytes = stream.read(2 if major == 1 else 4)
    if len(size_bytes) != (2 if major == 1 else 4):
        raise _BadArray(f"{what}truncated .npy header")
    header_len = int.from_bytes(size_bytes, "little")
    if header_len > MAX_HEADER_BYTES:
        raise _BadArray(f"{what}.npy header of {header_len} bytes is over the {MAX_HEADER_BYTES} byte limit")
    raw = stream.read(header_len)
    if len(raw) != header_len:
        raise _BadArray(f"{what}truncated .npy header")
    try:
        header = ast.literal_eval(raw.decode("utf-8" if major == 3 else "latin-1"))
    except Exception:  # SyntaxError, ValueError, RecursionError, MemoryError...: all one answer
        raise _BadArray(f"{what}.npy header is not a valid header dict") from None
    if not isinstance(header, dict) or set(header) != {"descr", "fortran_order", "shape"}:
        raise _BadArray(f"{what}.npy header is not a dict of descr, fortran_order and shape")
    descr, fortran, shape = header["descr"], header["fortran_order"], header["shape"]
    if not isinstance(fortran, bool):
        raise _BadArray(f"{what}.npy header fortran_order is {fortran!r}, expected True or False")
    if not isinstance(shape, tuple) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0
                                                for d in shape) or len(shape) > 32:
        raise _BadArray(f"{what}.npy header shape {shape!r:.80} is not a tuple of sizes")
    if not isinstance(descr, str):
        raise _BadArray(f"{what}holds a structured array ({descr!r:.80}); only plain numeric arrays are read")
    try:
        dtype = np.dtype(descr)
    except Exception:
        raise _BadArray(f"{what}.npy header dtype {descr!r:.40} is not a numpy dtype") from None
    if dtype.hasobject:
        raise _BadArray(f"{what}holds an object (pickled) array, which is never loaded")
    if dtype.kind not in READ_KINDS or dtype.shape or dtype.names:
        raise _BadArray(f"{what}holds a {dtype} array; only bool, integer, real float and text arrays are read")
    count = 1
    for d in shape:
        count *= d
    nbytes = count * dtype.itemsize
    if nbytes > budget:
        raise _BadArray(f"{what}array of shape {shape} ({dtype}) needs {nbytes} bytes, over the limit of "
                      f"{budget} bytes left for this file (set {MAX_BYTES_ENV} to raise it)")
    return dtype, shape, fortran, nbytes




def _read_npy(stream, budget: int, what: str) -> np.ndarray:
    dtype, shape, fortran, nbytes = _parse_npy_header(stream, budget, what)
    data = stream.read(nbytes)  # bounded: never more than the header's checked size
    if len(data) != nbytes:
        raise _BadArray(f"{what}truncated .npy data ({len(data)} of {nbytes} bytes)")
    return np.frombuffer(data, dtype=dtype).reshape(shape, order="F" if fortran else "C").copy()


def _read_npz(path: Path, budget: int) -> dict[str, np.ndarray]:
    arrays: dict[str, np.ndarray] = {}
    with zipfile.ZipFile(path) as archive:
        members = archive.infolist()
        if len(members) > MAX_MEMBERS:
            raise _BadArray(f"holds {len(members)} members, over the limit of {MAX_MEMBERS}")
        for info in members:
            if info.is_dir():
                continue
            if not info.filename.endswith(".npy"):
                raise _BadArray(f"member {info.filename!r:.80} is not a .npy array")
            name = info.filename[:-4]
            if name in arrays:
                raise _BadArray(f"member {info.filename!r:.80} appears twice")
            # the declared size bounds the decompression: a member claiming more than the
            # budget (plus its header) is refused before a byte is inflated
            if info.file_size > budget + MAX_HEADER_BYTES + 16:
                raise _BadArray(f"member {info.filename!r:.80} declares {info.file_size} bytes, over the "
                              f"limit of {budget} bytes of array data per file (set {MAX_BYTES_ENV} to raise it)")
            with archive.open(info) as stream:
                array = _read_npy(stream, budget, f"member {info.filename!r:.80}: ")
            budget -= array.nbytes
            arrays[name] = array
    return arrays


def not_a_file(path) -> str:
    """Why ``path`` (not a regular file) cannot be read as one: what it is, never a blocking open."""
    import stat

    path = Path(path)
    try:
        link = os.readlink(path) if path.is_symlink() else None
    except OSError:
        link = None
    try:
        mode = path.stat().st_mode
    except OSError:
        return f"a broken symbolic link (to {link})" if link is not None else "no such file"
    what = ("is a folder" if stat.S_ISDIR(mode) else "is a named pipe (FIFO)" if stat.S_ISFIFO(mode)
            else "is a character device" if stat.S_ISCHR(mode) else "is a block device" if stat.S_ISBLK(mode)
            else "is a socket" if stat.S_ISSOCK(mode) else "is not a regular file")
    via = f" (a symbolic link to {link})" if link is not None else ""
    return f"{what}{via}, not a regular file"


def read_arrays(path, error: type[Exception] = ModelFileError,
                max_bytes: int | None = None) -> np.ndarray | dict[str, np.ndarray]:
    """The array of a .npy file, or the arrays of a .npz file by name, never unpickling; every
    failure is one ``error`` naming the file. At most ``max_bytes`` of array data are read
    (default :func:`max_array_bytes`); sizes are checked from the headers before any allocation
    or decompression."""
    path = Path(path)
    if not path.is_file():
        raise error(f"{path}: {not_a_file(path)}")
    budget = max_array_bytes() if max_bytes is None else int(max_bytes)
    try:
        with open(path, "rb") as handle:
            start = handle.read(len(NPY_MAGIC))
            handle.seek(0)
            if start == NPY_MAGIC:
                return _read_npy(handle, budget, "")
        if not zipfile.is_zipfile(path):
            raise _BadArray("not a .npy or .npz file (neither .npy magic nor a zip archive)")
        return _read_npz(path, budget)
    except _BadArray as exc:
        raise error(f"{path}: {exc}") from None
    except OSError as exc:
        raise error(f"{path}: cannot be read: {exc.strerror or exc}") from None
    except TinyccError:
        raise
    except Exception as exc:  # zipfile/zlib fail on hostile archives in many ways: all are one file error
        detail = " ".join(str(exc).split())[:200] or type(exc).__name__
        raise error(f"{path}: not a readable .npy or .npz file: {detail}") from None


def read_model_file(path, max_bytes: int | None = None) -> tuple[str, dict[str, np.ndarray], dict]:
    """Read a file written by :func:`save_model_file`: returns ``(family, arrays, meta)``, the
    metadata checked to be the documented JSON object."""
    arrays = read_arrays(path, max_bytes=max_bytes)
    if not isinstance(arrays, dict):
        raise ModelFileError(f"{path}: a single .npy array, not a tinycc-ml model file (.npz)")
    if META_KEY not in arrays:
        raise ModelFileError(f"{path}: not a tinycc-ml model file (no {META_KEY} entry)")
    raw = arrays.pop(META_KEY)
    if raw.dtype != np.uint8 or raw.ndim != 1:
        raise ModelFileError(f"{path}: {META_KEY} is a {raw.dtype} array of shape {raw.shape}, expected UTF-8 bytes")
    try:
        header = json.loads(raw.tobytes().decode())
    except RecursionError:
        raise ModelFileError(f"{path}: metadata JSON is nested too deeply") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise ModelFileError(f"{path}: metadata is not valid JSON: {exc}") from None
    if not isinstance(header, dict):
        raise ModelFileError(f"{path}: metadata is a JSON {type(header).__name__}, expected an object")
    if header.get("format") != FORMAT_NAME:
        raise ModelFileError(f"{path}: metadata format is {header.get('format')!r:.60}, expected {FORMAT_NAME!r}")
    if header.get("version") != FORMAT_VERSION:
        raise ModelFileError(f"{path}: format version {header.get('version')!r:.60} is not supported")
    family = header.get("family")
    if not isinstance(family, str):
        raise ModelFileError(f"{path}: metadata family is {family!r:.60}, expected a family name")
    meta = header.get("meta", {})
    if not isinstance(meta, dict):
        raise ModelFileError(f"{path}: metadata meta is a JSON {type(meta).__name__}, expected an object")
    return family, arrays, meta


def meta_number(meta: dict, key: str, source, integer: bool, low: float | None = None,
                high: float | None = None):
    """``meta[key]`` checked to be a finite number (an int when ``integer``) within [low, high]."""
    if key not in meta:
        raise ModelFileError(f"{source}: metadata entry {key!r} is missing")
    value = meta[key]
    if isinstance(value, np.generic):
        value = value.item()
    ok = isinstance(value, int) if integer else isinstance(value, (int, float))
    if not integer and ok and isinstance(value, int) and not isinstance(value, bool):
        try:
            value = float(value) if abs(value) > 2**53 else value  # 10**400 is no float
        except OverflowError:
            value = float("inf")
    if isinstance(value, bool) or not ok or (isinstance(value, float) and not np.isfinite(value)):
        kind = "an integer" if integer else "a finite number"
        raise ModelFileError(f"{source}: metadata {key} is {value!r:.60}, expected {kind}")
    if (low is not None and value < low) or (high is not None and value > high):
        raise ModelFileError(f"{source}: metadata {key} is {value!r:.60}, expected a value in [{low}, {high}]")
    return value


def load_npy(path) -> np.ndarray:
    """Load one ``.npy`` file without ever unpickling, with errors that name the file."""
    array = read_arrays(path)
    if not isinstance(array, np.ndarray):
        raise ModelFileError(f"{path}: an .npz archive where one .npy array was expected")
    return array


FLOAT32_MAX = float(np.finfo(np.float32).max)


def check_normalisation(mean, std, dim: int, source) -> tuple[np.ndarray | None, np.ndarray | None]:
    """The optional input normalisation of a model: ``mean`` and ``std`` each None or a (dim,) vector
    (check_array), every std > 0."""
    mean = None if mean is None else check_array(mean, "mean", source, shape=(dim,))
    std = None if std is None else check_array(std, "std", source, shape=(dim,))
    if std is not None and np.any(std <= 0):
        raise ModelFileError(f"{source}: std holds a value <= 0 ({std.min()})")
    return mean, std


def check_array(value, name: str, source, shape: tuple | None = None, ndim: int | None = None) -> np.ndarray:
    """Return ``value`` as a float64 array whose values are finite in float32 (the compiled
    model's type), or raise naming ``source`` and ``name``.

    ``shape`` entries that are ``None`` match any size. bool, integer and real float arrays
    are accepted; complex, string and object arrays are refused.
    """
    array = np.asarray(value)
    if array.dtype.kind not in ARRAY_KINDS:
        raise ModelFileError(f"{source}: {name} has dtype {array.dtype}; expected bool, integer or real float values")
    array = array.astype(np.float64)
    if ndim is not None and array.ndim != ndim:
        raise ModelFileError(f"{source}: {name} has shape {array.shape}, expected {ndim} dimensions")
    if shape is not None:
        if array.ndim != len(shape) or any(w is not None and w != s for w, s in zip(shape, array.shape)):
            want = "(" + ", ".join("*" if w is None else str(w) for w in shape) + ")"
            raise ModelFileError(f"{source}: {name} has shape {array.shape}, expected {want}")
    if array.size and not -FLOAT32_MAX <= array.min() <= array.max() <= FLOAT32_MAX:  # NaN fails this too
        bad = ~(np.abs(array) <= FLOAT32_MAX)
        index = np.argwhere(bad)[0]
        value = array[tuple(index)]
        problem = "a non-finite value" if not np.isfinite(value) else "a value beyond the float32 range"
        raise ModelFileError(
            f"{source}: {name} holds {problem} ({value:g}) at index {tuple(int(i) for i in index)}"
        )
    return array
