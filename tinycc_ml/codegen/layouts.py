"""How a kernel stored a constant, so that other code (the streaming feed() of codegen/mcu.py)
can read the same flash array back instead of storing the constant twice.

A kernel that re-lays out a constant records one of these under the constant's node name in
``McuEmitter.kernel_layout``; each layout writes the C that streaming needs for one input feature
``i`` (held in ``v``): the column terms of a mat-vec, the squared differences of a distance, or an
element's bounds of a clamp.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tinycc_ml.codegen.c_fixed import rshift_c
from tinycc_ml.errors import CompileError

ReadConst = Callable[[str, str, str], str]  # CTarget.read_const(array, index, ctype)


def _same(expr: str) -> str:
    return expr


class ConstLayout:
    """A stored layout; the streaming reads it cannot serve raise CompileError."""

    symbol: str

    def feed_matvec(self, read: ReadConst, acc: str, term: Callable[[str], str]) -> list[str]:
        raise CompileError(f"{type(self).__name__} {self.symbol} cannot be read as a mat-vec column")

    def feed_sqdist(self, read: ReadConst, acc: str, h: int) -> list[str]:
        raise CompileError(f"{type(self).__name__} {self.symbol} cannot be read as prototypes")

    def bounds(self, read: ReadConst, i: str) -> tuple[str, str]:
        raise CompileError(f"{type(self).__name__} {self.symbol} holds no clamp bounds")


@dataclass(frozen=True)
class Block:
    """Rows first .. first + count - 1, stored from element ``base``: row first + q, column i at
    base + i * stride_col + q * stride_row."""

    first: int
    count: int
    base: int
    stride_col: int
    stride_row: int


@dataclass(frozen=True)
class BlockedLayout(ConstLayout):
    """A matrix stored in blocks of rows (mat-vec kernels: rows of W; distance kernels: prototypes,
    i.e. columns of M). ``decode`` turns a stored element back into the logical one (offset-binary
    weights, -2 M, ...)."""

    symbol: str
    stored_ctype: str
    blocks: tuple[Block, ...]
    decode: Callable[[str], str] = _same

    def element(self, read: ReadConst, block: Block) -> str:
        """Row block.first + q, column i (C variables q and i)."""
        index = f"{block.base} + i * {block.stride_col} + q * {block.stride_row}"
        return self.decode(read(self.symbol, index, self.stored_ctype))

    def feed_matvec(self, read, acc, term):
        return [f"for (int q = 0; q < {b.count}; ++q) {acc}[{b.first} + q] += {term(self.element(read, b))};"
                for b in self.blocks]

    def feed_sqdist(self, read, acc, h):
        out = []
        for b in self.blocks:
            out += [f"for (int q = 0; q < {b.count}; ++q) {{",
                    f"    const int32_t d = {rshift_c(f'(int32_t){self.element(read, b)} - v', h)};",
                    f"    {acc}[{b.first} + q] += d * d;", "}"]
        return out


@dataclass(frozen=True)
class SplitLayout(ConstLayout):
    """(k, m) prototypes split for the AVR distance kernel: per block of ``block`` prototypes, per
    dimension, per prototype three bytes Mh lo, Mh hi, Ml with M + 2^(h-1) = Mh 2^h + Ml, so that
    rshift(M - x, h) = Mh - xh - [Ml < xl]."""

    symbol: str
    k: int
    m: int
    block: int

    def offset(self, i: str, j: str) -> str:
        """C offset of (Mh lo of) prototype j, dimension i."""
        k, m, size = self.k, self.m, self.block
        full, rem = (m // size) * size, m % size
        inner = f"3 * ({k * size} * ({j} / {size}) + ({i}) * {size} + {j} % {size})"
        if not rem:
            return inner
        tail = f"3 * ({k * full} + ({i}) * {rem} + {j} - {full})"
        return f"({j} < {full} ? {inner} : {tail})"

    def feed_sqdist(self, read, acc, h):
        sym = self.symbol
        mh = f"(int16_t)({read(sym, 'o', 'uint8_t')} | ((uint16_t){read(sym, 'o + 1', 'uint8_t')} << 8))"
        return [f"const int16_t vh = (int16_t)(v >> {h});", f"const uint8_t vl = (uint8_t)(v & {(1 << h) - 1});",
                f"for (int j = 0; j < {self.m}; ++j) {{",
                f"    const uint16_t o = (uint16_t)({self.offset('i', 'j')});",
                f"    const int32_t d = (int32_t){mh} - vh - ({read(sym, 'o + 2', 'uint8_t')} < vl);",
                f"    {acc}[j] += d * d;", "}"]


@dataclass(frozen=True)
class InterleavedBounds(ConstLayout):
    """Per-element clamp bounds stored as (lo, hi) pairs."""

    symbol: str
    ctype: str

    def bounds(self, read, i):
        return read(self.symbol, f"2 * {i}", self.ctype), read(self.symbol, f"2 * {i} + 1", self.ctype)
