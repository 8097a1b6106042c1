"""IR value types: a shape and an element type.

Element types:
- ``f32``: IEEE single precision.
- ``fx<bits>.<scale>`` (bits in 8/16/32): a signed integer of that width whose real value is
  ``int * 2**-scale``; the scale may be negative (coarser than integers).
- ``idx``: a non-negative int32 index (argmax/argmin results, class labels).
- ``bool``: the result of a comparison.
"""

from __future__ import annotations

from dataclasses import dataclass

FIXED_BITS = (8, 16, 32)


@dataclass(frozen=True, order=True)
class DType:
    kind: str  # "f32" | "fx" | "idx" | "bool"
    bits: int = 32
    scale: int = 0

    def __post_init__(self):
        if self.kind not in ("f32", "fx", "idx", "bool"):
            raise ValueError(f"unknown element kind {self.kind!r}")
        if self.kind == "fx" and self.bits not in FIXED_BITS:
            raise ValueError(f"fixed-point width {self.bits} is not one of {FIXED_BITS}")

    @property
    def is_float(self) -> bool:
        return self.kind == "f32"

    @property
    def is_fixed(self) -> bool:
        return self.kind == "fx"

    def __str__(self) -> str:
        if self.kind == "fx":
            return f"fx{self.bits}.{self.scale}"
        return self.kind


F32 = DType("f32")
IDX = DType("idx")
BOOL = DType("bool")


def fixed(bits: int, scale: int) -> DType:
    return DType("fx", bits, scale)


@dataclass(frozen=True)
class TensorType:
    shape: tuple[int, ...]
    dtype: DType = F32

    def __post_init__(self):
        object.__setattr__(self, "shape", tuple(int(d) for d in self.shape))
        if any(d <= 0 for d in self.shape):
            raise ValueError(f"shape {self.shape} has a non-positive dimension")

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
        return TensorType(self.shape, dtype)

    def __str__(self) -> str:
        return f"{self.dtype}[{','.join(str(d) for d in self.shape)}]"


def parse_dtype(text: str) -> DType:
    if text in ("f32", "idx", "bool"):
        return DType(text)
    if text.startswith("fx") and "." in text:
        bits, scale = text[2:].split(".", 1)
        return fixed(int(bits), int(scale))
    raise ValueError(f"unknown element type {text!r}")
