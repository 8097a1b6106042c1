"""IR value types: a shape and an element type.

Element types:
- ``f32``: IEEE single precision.
- ``fx<bits>.<scale>`` (bits in 8/16/32): a signed integer of that width whose real value is
  ``int * 2**-scale``; the scale may be negative (coarser than integers).
- ``idx``: a non-negative int32 index (argmax/argmin results, class labels).
- ``bool``: the result of a comparison.
- ``i<bits>`` / ``u<bits>`` (bits in 8/16/32/64): a plain signed / unsigned integer, no scale (TFLite's
  unquantised integer tensors: audio samples, spectra, energies; their ops define their own arithmetic).
- ``qi<bits>(scale, zero_point)`` (bits in 8/16/32/64; 64: 16x8 layers' biases): TFLite's affine quantisation,
  real value ``scale * (int - zero_point)``; per-channel scales name their axis: ``qi8(axis 0: [s0, s1, ...], 0)``.
  Scales are float32 values (held as Python floats, exactly), as TFLite stores them.

A tensor type may declare its layout: one distinct capital letter per dimension (``NHWC`` for
activations; TFLite's filters are ``OHWI``, depthwise filters ``IHWO``); printed ``f32[1,49,10,1]@NHWC``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

FIXED_BITS = (8, 16, 32)
QUANTISED_BITS = (8, 16, 32, 64)  # TFLite's int8/int16 tensors, int32 and (16x8 layers') int64 biases
INTEGER_BITS = (8, 16, 32, 64)
INTEGER_KINDS = ("int", "uint")
PER_TENSOR = -1  # the axis of a quantisation with one scale


@dataclass(frozen=True, order=True)
class DType:
    kind: str  # "f32" | "fx" | "idx" | "bool" | "qi" | "int" | "uint"
    bits: int = 32
    scale: int = 0
    # "qi" only: TFLite's scales (one, or one per index of ``axis``), zero point and quantised axis
    qscales: tuple[float, ...] = ()
    zero_point: int = 0
    axis: int = PER_TENSOR

    def __post_init__(self):
        if self.kind not in ("f32", "fx", "idx", "bool", "qi", *INTEGER_KINDS):
            raise ValueError(f"unknown element kind {self.kind!r}")
        if self.kind in INTEGER_KINDS and (self.bits not in INTEGER_BITS or self.scale):
            raise ValueError(f"a plain integer is {', '.join(map(str, INTEGER_BITS))} bits without a scale, got "
                             f"{self.bits} bits, scale {self.scale}")
        if self.kind == "fx" and self.bits not in FIXED_BITS:
            raise ValueError(f"fixed-point width {self.bits} is not one of {FIXED_BITS}")
        if self.kind == "qi" and self.bits not in QUANTISED_BITS:
            raise ValueError(f"quantised width {self.bits} is not one of {QUANTISED_BITS}")
        if self.kind == "qi":
            object.__setattr__(self, "qscales", tuple(float(s) for s in self.qscales))
            if not self.qscales or not all(0 < s < float("inf") for s in self.qscales):
                raise ValueError(f"quantisation scales {list(self.qscales)[:4]} must be positive and finite")
            if any(float(np.float32(s)) != s for s in self.qscales):
                raise ValueError("quantisation scales must be float32 values (TFLite stores float32)")
            lo, hi = -(2 ** (self.bits - 1)), 2 ** (self.bits - 1) - 1
            if not lo <= self.zero_point <= hi:
                raise ValueError(f"zero point {self.zero_point} is outside int{self.bits}")
            if (self.axis == PER_TENSOR and len(self.qscales) != 1) or self.axis < PER_TENSOR:
                raise ValueError(f"axis {self.axis} with {len(self.qscales)} scales: a quantisation without an "
                                 "axis has one scale")
        elif self.qscales or self.zero_point or self.axis != PER_TENSOR:
            raise ValueError(f"quantisation parameters on a {self.kind} element type")

    @property
    def is_float(self) -> bool:
        return self.kind == "f32"

    @property
    def is_fixed(self) -> bool:
        return self.kind == "fx"

    @property
    def is_quantised(self) -> bool:
        return self.kind == "qi"

    @property
    def is_integer(self) -> bool:
        """A plain integer (``i16``, ``u32``...): no scale, no quantisation."""
        return self.kind in INTEGER_KINDS

    @property
    def integer_range(self) -> tuple[int, int]:
        """The least and greatest value an integer of this type holds (plain, quantised or fixed point)."""
        if self.kind == "uint":
            return 0, 2**self.bits - 1
        return -(2 ** (self.bits - 1)), 2 ** (self.bits - 1) - 1

    def __str__(self) -> str:
        if self.kind == "fx":
            return f"fx{self.bits}.{self.scale}"
        if self.kind == "qi":
            if self.axis == PER_TENSOR:
                return f"qi{self.bits}({self.qscales[0]!r}, {self.zero_point})"
            return f"qi{self.bits}(axis {self.axis}: [{', '.join(repr(s) for s in self.qscales)}], {self.zero_point})"
        if self.kind in INTEGER_KINDS:
            return f"{self.kind[0]}{self.bits}"
        return self.kind


F32 = DType("f32")
IDX = DType("idx")
BOOL = DType("bool")


def fixed(bits: int, scale: int) -> DType:
    return DType("fx", bits, scale)


def integer(bits: int, signed: bool = True) -> DType:
    """A plain integer element type: ``integer(16)`` is i16, ``integer(32, signed=False)`` u32."""
    return DType("int" if signed else "uint", bits)


def quantised(bits: int, scales, zero_point: int = 0, axis: int = PER_TENSOR) -> DType:
    """TFLite's affine quantisation: real = scale * (int - zero_point), ``scales`` one per index of ``axis``."""
    scales = tuple(float(np.float32(s)) for s in np.atleast_1d(np.asarray(scales, dtype=np.float64)))
    return DType("qi", bits, 0, scales, int(zero_point), axis)


@dataclass(frozen=True)
class TensorType:
    shape: tuple[int, ...]
    dtype: DType = F32
    layout: str = ""  # one capital letter per dimension (NHWC), or "" (vectors and matrices)

    def __post_init__(self):
        object.__setattr__(self, "shape", tuple(int(d) for d in self.shape))
        if any(d <= 0 for d in self.shape):
            raise ValueError(f"shape {self.shape} has a non-positive dimension")
        if self.layout and (len(self.layout) != len(self.shape) or not self.layout.isalpha()
                            or not self.layout.isupper() or len(set(self.layout)) != len(self.layout)):
            raise ValueError(f"layout {self.layout!r} does not name the {len(self.shape)} dimensions of "
                             f"{self.shape} with distinct capital letters")
        if self.dtype.is_quantised and self.dtype.axis != PER_TENSOR:
            if self.dtype.axis >= len(self.shape) or self.shape[self.dtype.axis] != len(self.dtype.qscales):
                raise ValueError(f"{len(self.dtype.qscales)} scales on axis {self.dtype.axis} of shape {self.shape}")

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    def with_dtype(self, dtype: DType) -> TensorType:
        return TensorType(self.shape, dtype, self.layout)

    def __str__(self) -> str:
        text = f"{self.dtype}[{','.join(str(d) for d in self.shape)}]"
        return f"{text}@{self.layout}" if self.layout else text


def parse_dtype(text: str) -> DType:
    if text in ("f32", "idx", "bool"):
        return DType(text)
    if text[:1] in "iu" and text[1:].isdigit():
        return integer(int(text[1:]), text[0] == "i")
    if text.startswith("fx") and "." in text:
        bits, scale = text[2:].split(".", 1)
        return fixed(int(bits), int(scale))
    raise ValueError(f"unknown element type {text!r}")
