"""An ONNX file's initializers (weights), read safely: inside the file, or as external data in a file
next to it (what ``torch.onnx.export`` writes by default: ``model.onnx`` + ``model.onnx.data``).

Nothing is trusted before it is checked: a tensor's element count is computed from its dims (each
>= 0) and bounded before any memory is taken for it; an external location must be a plain relative
path that stays in the model's folder (no absolute path, no ``..`` out of it, no symbolic link
leading elsewhere); offset and length must be whole numbers that lie inside the data file, and the
length must be the tensor's size. Only the bytes a tensor names are read.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from tinycc_ml.errors import ModelFileError
from tinycc_ml.ir.verify import MAX_ELEMENTS

# ONNX's TensorProto data types read as numbers (little-endian in raw and external data)
NUMPY_OF_ONNX = {1: np.dtype("<f4"), 11: np.dtype("<f8"), 10: np.dtype("<f2"), 7: np.dtype("<i8"), 6: np.dtype("<i4"),
                 3: np.dtype("i1"), 2: np.dtype("u1"), 9: np.dtype("?")}
EXTERNAL = 1  # TensorProto.EXTERNAL


def element_count(path, tensor) -> int:
    """The element count of an initializer's dims, checked (Python integers: no overflow)."""
    dims = [int(d) for d in tensor.dims]
    if any(d < 0 for d in dims):
        raise ModelFileError(f"{path}: initializer {tensor.name!r} has a negative dimension in {dims}")
    count = math.prod(dims)
    if count > MAX_ELEMENTS:
        raise ModelFileError(f"{path}: initializer {tensor.name!r} has dims {dims}, {count} elements, more than "
                             f"{MAX_ELEMENTS}")
    return count


def _external_fields(path, tensor) -> dict[str, str]:
    fields = {}
    for entry in tensor.external_data:
        if entry.key in fields:
            raise ModelFileError(f"{path}: initializer {tensor.name!r} names its external {entry.key!r} twice")
        fields[entry.key] = entry.value
    return fields


def _whole_number(path, tensor, key: str, text: str | None, default: int | None) -> int | None:
    if text is None:
        return default
    if not text.isdigit() or len(text) > 18:  # no sign, no space: a byte position, under 10^18
        raise ModelFileError(f"{path}: initializer {tensor.name!r} has external {key} {text[:40]!r}, not a "
                             "byte count >= 0 within the data file")
    return int(text)


def data_file(path: Path, tensor, location: str | None) -> Path:
    """The external data file of ``tensor``: refused unless it lies in the model's folder."""
    if not location:
        raise ModelFileError(f"{path}: initializer {tensor.name!r} is stored as external data without a location")
    folder = path.resolve().parent
    relative = Path(location)
    if relative.is_absolute() or "\x00" in location:
        raise ModelFileError(f"{path}: initializer {tensor.name!r} names the external data file {location!r}, an "
                             "absolute path; external data must lie in the model's folder")
    target = (folder / relative).resolve()
    if target != folder and folder not in target.parents:
        raise ModelFileError(f"{path}: initializer {tensor.name!r} names the external data file {location!r}, "
                             "which leaves the model's folder; external data must lie in the model's folder")
    if not target.is_file():
        raise ModelFileError(f"{path}: initializer {tensor.name!r}: its external data file {location!r} does not "
                             "exist next to the model (copy it with the .onnx file)")
    return target


def read_external(path: Path, tensor, dtype: np.dtype, count: int) -> np.ndarray:
    fields = _external_fields(path, tensor)
    target = data_file(path, tensor, fields.get("location"))
    offset = _whole_number(path, tensor, "offset", fields.get("offset"), 0)
    want = count * dtype.itemsize
    length = _whole_number(path, tensor, "length", fields.get("length"), want)
    if length != want:
        raise ModelFileError(f"{path}: initializer {tensor.name!r} (dims {list(tensor.dims)}) needs {want} bytes, "
                             f"its external length says {length}")
    size = target.stat().st_size
    if offset + want > size:
        raise ModelFileError(f"{path}: initializer {tensor.name!r} reads bytes {offset}..{offset + want} of "
                             f"{fields['location']!r}, which has {size} bytes: truncated or corrupt")
    with open(target, "rb") as handle:
        handle.seek(offset)
        data = handle.read(want)
    if len(data) != want:  # the file shrank since it was measured
        raise ModelFileError(f"{path}: initializer {tensor.name!r}: {fields['location']!r} ends early")
    return np.frombuffer(data, dtype=dtype).reshape([int(d) for d in tensor.dims])


def read_initializers(path, graph) -> dict[str, np.ndarray]:
    """Every initializer of ``graph`` (an onnx GraphProto) as a numpy array, by name."""
    # deferred: onnx is an optional dependency (the [onnx] extra); the caller has imported it already
    from onnx import numpy_helper

    path = Path(path)
    weights = {}
    for tensor in graph.initializer:
        if tensor.name in weights:
            raise ModelFileError(f"{path}: two initializers are named {tensor.name!r}")
        count = element_count(path, tensor)
        dtype = NUMPY_OF_ONNX.get(tensor.data_type)
        if tensor.data_location == EXTERNAL:
            if dtype is None:
                raise ModelFileError(f"{path}: initializer {tensor.name!r} has ONNX data type {tensor.data_type}, "
                                     "which is not read from external data")
            weights[tensor.name] = read_external(path, tensor, dtype, count)
            continue
        if tensor.HasField("raw_data") and dtype is not None and len(tensor.raw_data) != count * dtype.itemsize:
            raise ModelFileError(f"{path}: initializer {tensor.name!r} (dims {list(tensor.dims)}) cannot be read: it "
                                 f"holds {len(tensor.raw_data)} bytes, its dims need {count * dtype.itemsize}")
        try:  # dims that disagree with the data (or a data type numpy cannot hold) fail here
            weights[tensor.name] = numpy_helper.to_array(tensor)
        except Exception as exc:
            raise ModelFileError(f"{path}: initializer {tensor.name!r} (dims {list(tensor.dims)}) cannot be read: "
                                 f"{str(exc)[:120]}") from None
    return weights
