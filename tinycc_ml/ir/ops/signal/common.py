"""What the signal ops share: their element types, two's-complement wrap-around, the most significant bit and
the rounded square roots of ``signal/src`` (numpy and C), and the checks of their lowerings."""

from __future__ import annotations

import math

import numpy as np

from tinycc_ml.ir.ops.c_primitives import c_helper
from tinycc_ml.ir.ops.network.broadcast import with_rows  # noqa: F401  (the signal ops' operands with rows)
from tinycc_ml.ir.ops.registry import OpDef, need, register_op
from tinycc_ml.ir.types import TensorType, integer

I16, I32, U32, U64 = integer(16), integer(32), integer(32, signed=False), integer(64, signed=False)
NO_RANGES = "the signal ops compute in the plain integers of their types: no range analysis follows them"
NO_ACCUMULATOR = "the signal ops' wide intermediates are their own (uint64 where signal/src uses it)"
NO_FLOAT = "TFLite Micro's signal op computes in integers only"
INTEGER_ONLY = {"interval": NO_RANGES, "acc_bound": NO_ACCUMULATOR, "c_float": NO_FLOAT}


def wrap(values, bits: int, signed: bool = True) -> np.ndarray:
    """Integers (int64, or uint64) reduced modulo 2^bits into the signed or unsigned range of that width, as
    int64 (C's conversions on the targets: two's complement); 64 bits unsigned stay uint64."""
    v = np.asarray(values)
    if bits == 64:
        return v.astype(np.uint64) if not signed else v.astype(np.int64)
    u = v.astype(np.int64) & ((1 << bits) - 1)
    return u - ((u >> (bits - 1)) << bits) if signed else u


def as_uint64(values) -> np.ndarray:
    """Values of a u64 tensor as numpy uint64 (the interpreter hands plain int64 arrays around)."""
    v = np.asarray(values)
    return v if v.dtype == np.uint64 else v.astype(np.int64).astype(np.uint64)


def msb32(x) -> np.ndarray:
    """MostSignificantBit32 as TFLite Micro builds it with gcc or clang: the bit length of x, 32 for x = 0."""
    x = np.asarray(x, dtype=np.int64) & 0xFFFFFFFF
    bits = np.zeros(x.shape, dtype=np.int64)
    rest = x.copy()
    for step in (16, 8, 4, 2, 1):
        high = rest >= (1 << step)
        bits += np.where(high, step, 0)
        rest = np.where(high, rest >> step, rest)
    return np.where(x == 0, 32, bits + (rest > 0))


def sqrt_rounded(x, limit: int) -> np.ndarray:
    """Sqrt32 (limit 0xFFFF) / Sqrt64 (limit 0xFFFFFFFF): the integer square root, plus one where the remainder
    exceeds the root (rounding to nearest) unless the root is ``limit``."""
    flat = [int(v) for v in np.asarray(x).reshape(-1)]
    out = []
    for v in flat:
        v &= (1 << 64) - 1
        root = math.isqrt(v)
        cap = 0xFFFF if v < (1 << 32) else limit
        out.append(root + 1 if v - root * root > root and root != cap else root)
    return np.array(out, dtype=np.int64).reshape(np.shape(x))


def sqrt64(x) -> np.ndarray:
    return sqrt_rounded(x, 0xFFFFFFFF)


def need_type(t: TensorType, dtype, what: str, rank: int | None = None) -> None:
    need(t.dtype == dtype, f"{what} must be {dtype}, got {t.dtype}")
    need(rank is None or t.rank == rank, f"{what} must have {rank} dimension(s), has shape {list(t.shape)}")


def declared_result(declared: TensorType | None, shape, dtype, layout: str = "") -> TensorType:
    """The result type, checked against the file's declaration (when there is one)."""
    result = TensorType(tuple(shape), dtype, layout)
    if declared is not None:
        need(declared.dtype == dtype and declared.shape == result.shape,
             f"the result is {result}, the file declares {declared}")
        return TensorType(result.shape, dtype, declared.layout)
    return result


# ---------------------------------------------------------------- C helpers, emitted once per model

def c_msb32(em) -> str:
    return c_helper(em, "sig_msb32", """\
/* the bit length of x; 32 for 0 (TFLite Micro's MostSignificantBit32 with gcc/clang) */
static inline uint32_t @sig_msb32(uint32_t x)
{
    uint32_t bits = 0;
    if (x == 0)
        return 32;
    while (x) {
        x >>= 1;
        ++bits;
    }
    return bits;
}
""")


def c_sqrt64(em) -> str:
    sqrt32 = c_helper(em, "sig_sqrt32", """\
/* the square root of x rounded to nearest, at most 0xFFFF (digit by digit from the highest power of 4 <= x) */
static inline uint32_t @sig_sqrt32(uint32_t x)
{
    uint32_t root = 0, bit = (uint32_t)1 << 30;
    while (bit > x)
        bit >>= 2;
    while (bit) {
        if (x >= root + bit) {
            x -= root + bit;
            root = (root >> 1) + bit;
        } else {
            root >>= 1;
        }
        bit >>= 2;
    }
    if (x > root && root != 0xFFFFu)
        ++root;
    return root;
}
""")
    return c_helper(em, "sig_sqrt64", f"""\
/* the square root of x rounded to nearest, at most 0xFFFFFFFF; below 2^32 as {sqrt32} */
static inline uint32_t @sig_sqrt64(uint64_t x)
{{
    uint64_t root = 0, bit = (uint64_t)1 << 62;
    if ((x >> 32) == 0)
        return {sqrt32}((uint32_t)x);
    while (bit > x)
        bit >>= 2;
    while (bit) {{
        if (x >= root + bit) {{
            x -= root + bit;
            root = (root >> 1) + bit;
        }} else {{
            root >>= 1;
        }}
        bit >>= 2;
    }}
    if (x > root && root != 0xFFFFFFFFu)
        ++root;
    return (uint32_t)root;
}}
""")


# ---------------------------------------------------------------- the stream ops' lowerings (framer, stacker, ...)

U8 = integer(8, signed=False)  # TFLite's bool: one byte, 0 or 1


def new_state(low, name: str, init: np.ndarray, dtype) -> str:
    """A state node of the lowering's graph holding ``init`` before the first call (and after a reset)."""
    return low.graph.add("state", [], {"init": init}, type=TensorType(init.shape, dtype), name=name)


def add_flag(low, op: str, inputs: list[str], attrs: dict, out_index: int, what: str) -> None:
    """A valid flag (the framer's and stacker's second output): TFLite's bool scalar, a u8 0 or 1 here."""
    t = low.tensors[out_index]
    need(t.type_name == "bool" and len(t.shape) == 0,
         f"{what}: its second output {t.name!r} must be a bool scalar, is {t.type_name} of shape {list(t.shape)}")
    low.values[out_index] = low.graph.add(op, inputs, attrs, type=TensorType((), U8), name=low.name_of(t))


def outer_and_inner(t: TensorType) -> tuple[int, int]:
    """(rows, innermost length) of a tensor taken as rows along its last axis (TFLite Micro's outer_dims)."""
    inner = t.shape[-1] if t.rank else 1
    return (t.size // inner if inner else 0), inner


def saturate16_c(value: str) -> str:
    return f"(int16_t)({value} < -32768 ? -32768 : ({value} > 32767 ? 32767 : {value}))"


def need_history(history: TensorType | None, shape, what: str, keeps: str, none_reason: str) -> None:
    """A state op's history operand: absent where its parameters keep nothing (``shape`` of no elements), else
    int16 of ``shape``; ``what`` keeps ``keeps`` (for the message)."""
    shape = tuple(int(d) for d in shape)
    if math.prod(shape) == 0:
        need(history is None, none_reason)
        return
    need(history is not None, f"{what} keeps {keeps}: its history operand is missing")
    need_type(history, I16, f"{what}'s history")
    need(history.shape == shape, f"the history must have shape {list(shape)}, has {list(history.shape)}")


def register_stream_op(name: str, arity, infer, semantics, c, attrs: dict, description: str) -> None:
    """An integer signal op whose ``semantics(*operands, attrs=...)`` takes its operands with rows: its float
    evaluation is the same integers on one row."""
    register_op(OpDef(
        name, arity, infer, lambda xs, a: semantics(*[np.asarray(v)[None] for v in xs], attrs=a)[0]
        .astype(np.float64), attrs, description,
        fixed=lambda call: semantics(*with_rows(call.ins, call.in_types), attrs=call.attrs), c={"fixed": c},
        unsupported=INTEGER_ONLY))
