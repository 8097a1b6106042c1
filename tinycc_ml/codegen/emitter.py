"""The shared C emitter: walks a planned graph in schedule order and writes one C function
per model, with constants as prefixed static const arrays and intermediates in static arenas.

Backends differ only in traits (CTarget): where constants live and how they are read
(a plain index on the host, pgm_read_* from flash on AVR), and overrides of entries of the
per-op code tables (C_CODE, one per precision, filled by c_float.py and c_fixed.py).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field, replace

import numpy as np

from tinycc_ml.codegen.backend import BuildOutput
from tinycc_ml.codegen.c_files import (
    Interface,
    comment_block,
    entry_points,
    header_text,
    scores_buffer_bytes,
    source_text,
)
from tinycc_ml.codegen.float_input import source_lines
from tinycc_ml.codegen.input_bound import run_guard
from tinycc_ml.codegen.outline import MIN_REPEATS, function_text, noinline_macro, outline_form
from tinycc_ml.codegen.word_flash import WordFlash
from tinycc_ml.errors import CompileError
from tinycc_ml.ir.analyses import multiply_accumulates
from tinycc_ml.ir.fixed import clip_bounds
from tinycc_ml.ir.graph import Graph, Node
from tinycc_ml.ir.ops import precision_of
from tinycc_ml.ir.ops.state import next_label
from tinycc_ml.ir.verify import verify
from tinycc_ml.passes.plan_memory import LEAF_OPS, element_bytes, plan, reshape_roots, state_bytes
from tinycc_ml.runtime.simulate import harness_name_clash

C_KEYWORDS = frozenset(
    "auto break case char const continue default do double else enum extern float for goto if inline int long "
    "register restrict return short signed sizeof static struct switch typedef union unsigned void volatile while "
    "_Bool _Complex _Imaginary".split()
)

ARENA_CTYPE = {"f32": "float", "i32": "int32_t", "i16": "int16_t", "i8": "int8_t", "u8": "uint8_t", "i64": "int64_t",
               "u16": "uint16_t", "u32": "uint32_t", "u64": "uint64_t"}

# The constant arrays of a build whose C file a build emitted now joins (a front end's stream parts, inlined after
# the window's build: codegen/stream_feed.py): an array equal to one of them is a #define of that one, stored once.
JOINED_BUILD_ARRAYS: ContextVar[dict | None] = ContextVar("joined_build_arrays", default=None)


def ctype_of(dtype) -> str:
    if dtype.kind == "f32":
        return "float"
    if dtype.kind in ("fx", "qi", "int"):
        return f"int{dtype.bits}_t"
    if dtype.kind == "uint":
        return f"uint{dtype.bits}_t"
    if dtype.kind == "idx":
        return "int32_t"
    return "uint8_t"


def c_float(value) -> str:
    if not abs(float(value)) <= float(np.finfo(np.float32).max):  # C has no inf literal: never write one
        raise CompileError(f"constant {float(value):g} is not a finite float32")
    text = np.format_float_scientific(np.float32(value), unique=True, trim="-")
    return text + "f"


def c_int(value, ctype: str) -> str:
    v = int(value)
    if ctype == "int32_t" and v == -(2**31):
        return "(-2147483647 - 1)"
    if ctype in ("int64_t", "uint64_t"):  # a plain literal's type may be narrower (int is 16 bits on AVR)
        if v == -(2**63):
            return "(-INT64_C(9223372036854775807) - 1)"
        return f"UINT64_C({v})" if ctype == "uint64_t" else f"INT64_C({v})"
    if ctype == "uint32_t" and v >= 2**15:
        return f"{v}UL"
    return str(v)


def array_body(flat: np.ndarray, ctype: str, per_line: int = 8, block: int = 1 << 16) -> str:
    """An initialiser's items (c_float / c_int of each), ``per_line`` to a line, formatted a block at a
    time: a table of 10^7 entries takes about a second and no list of 10^7 strings."""
    parts = []
    for start in range(0, len(flat), block):  # block is a multiple of per_line: lines never straddle blocks
        chunk = flat[start:start + block]
        if ctype == "float":  # each distinct float32 (by its bits) formatted once: leaves repeat their values
            bits, inverse = np.unique(np.asarray(chunk, dtype=np.float32).view(np.uint32), return_inverse=True)
            texts = np.array([c_float(v) for v in bits.view(np.float32)], dtype=object)
            items = texts[np.asarray(inverse).reshape(-1)].tolist()
        else:
            ints = np.asarray(chunk, dtype=np.int64)
            lo, hi = int(ints.min()), int(ints.max())
            if hi - lo < len(ints):  # few distinct values (offsets, zeros): each number written once
                items = np.array([str(v) for v in range(lo, hi + 1)], dtype=object)[ints - lo].tolist()
            elif ctype != "int64_t" and -(2**31) <= lo and hi < 2**31:  # plain literals: composed by numpy at once
                text = int_items(ints, per_line)
                # INT32_MIN as c_int writes it (no other int32's text holds its 11 characters)
                parts.append(text.replace("-2147483648", c_int(-(2**31), ctype))
                             if lo == -(2**31) and ctype == "int32_t" else text)
                continue
            else:
                items = list(map(str, ints.tolist()))
            if ctype == "int32_t":
                items = [c_int(-(2**31), ctype) if item == "-2147483648" else item for item in items]
            elif ctype == "int64_t":  # literals past long's range (a 32-bit long): long long ones
                items = [c_int(-(2**63), ctype) if item == "-9223372036854775808"
                         else (f"{item}LL" if not -(2**31) <= int(item) < 2**31 else item) for item in items]
        full = len(items) - len(items) % per_line
        lines = list(map(", ".join, zip(*[iter(items[:full])] * per_line)))
        if full < len(items):
            lines.append(", ".join(items[full:]))
        parts.append(",\n    ".join(lines))
    return ",\n    ".join(parts)


def int_items(ints: np.ndarray, per_line: int) -> str:
    """array_body's text of int32-range integers (``str`` of each, ", " within a line, ",\n    " between
    lines), composed as bytes: each item right-aligned in a row of a byte matrix with its separator after it,
    the padding (zero bytes) then dropped."""
    n = len(ints)
    v = np.asarray(ints, dtype=np.int64)
    neg = v < 0
    mag = np.abs(v)
    width = len(str(int(mag.max()))) + 1  # the digits of the largest and a sign
    digits = np.ones(n, dtype=np.int64)
    step = 10
    for _ in range(width - 2):
        digits += mag >= step
        step *= 10
    rows = np.zeros((n, width + 6), dtype=np.uint8)
    rest = mag.astype(np.int32 if int(mag.max()) < 2**31 else np.int64)
    for col in range(width - 1, 0, -1):  # the digit 10^(width - 1 - col), where the number has it
        quotient = rest // 10
        rows[:, col] = np.where(digits > width - 1 - col, rest - quotient * 10 + 48, 0)
        rest = quotient
    rows[neg, width - 1 - digits[neg]] = ord("-")
    rows[:, width] = ord(",")
    rows[:, width + 1] = ord(" ")
    rows[per_line - 1::per_line, width + 1:] = np.frombuffer(b"\n    ", dtype=np.uint8)
    rows[-1, width:] = 0
    flat = rows.reshape(-1)
    return flat[flat != 0].tobytes().decode("ascii")


# ops whose C calls <math.h> (expf, tanhf, fabsf, logf, sqrtf, roundf) where they or an operand are float
MATH_OPS = ("exp", "tanh", "softmax", "log_softmax", "layer_norm", "sigmoid_calibrate", "ovr_decision", "logistic",
            "tensor_tanh", "elu", "silu", "gelu", "lstm_cell", "lstm_hidden", "float_unary", "quantize",
            "float_binary", "l2_normalization", "log", "sqrt", "abs", "detection_postprocess")


# the words after the prefix of the C entry points and their helpers (a constant must not take one)
ENTRY_POINT_NAMES = frozenset({"predict", "predict_label", "predict_batch", "predict_float", "scores", "scores_float",
                               "run", "run_block", "run_raw", "invoke", "label", "labels", "feed", "reset", "proba",
                               "quantise_feature", "init", "state", "input", "output", "status", "fault",
                               "predict_batch_ahead"})


@dataclass
class CTarget:
    """What the emitter needs to know about a target's C.

    name: the target's name (in comments and messages). const_attribute: placed after a constant array's
    declarator, e.g. ``" PROGMEM"`` for the AVR's flash. extra_includes: ``#include`` lines the model's source
    needs (``<avr/pgmspace.h>``). int16_arith: ``int`` is 16 bits (AVR): a fused chain's 16-bit steps then
    saturate in 16-bit arithmetic. kernels: the target's hand-written kernels (``Kernel``), asked in this
    order. inline_saturation: the saturation helpers always inlined (where the compiler would leave them a
    call). word_flash: a ``WordFlash`` when constants live in flash that may only be read as aligned 32-bit
    words (the ESP8266's irom0): every constant array then goes to its section, 4-byte aligned and padded to
    whole words, and every read of one goes through the model's word-read helpers (``read_const`` does so, and
    the label and probability tables follow ``BuildOutput.word_flash``). Override ``read_const`` to read a
    constant array element another way than ``array[index]`` (``pgm_read_word`` on the AVR), and
    ``offset_store`` to let a fused chain's last store hand a kernel its input offset-binary with its sum.
    """

    name: str = "host"
    const_attribute: str = ""  # placed after the declarator, e.g. " PROGMEM"
    extra_includes: tuple[str, ...] = ()
    # int is 16 bits (AVR): a fused chain's 16-bit add/sub/clip steps then saturate in 16-bit arithmetic
    # (an overflow test before the add) rather than in int32, which costs several instructions per operation
    int16_arith: bool = False

    # constants in flash read only as aligned 32-bit words (codegen/word_flash.py); None: read as the C reads them
    word_flash: WordFlash | None = None

    def read_const(self, array: str, index: str, ctype: str) -> str:
        if self.word_flash is not None:
            return self.word_flash.read(array, index, ctype)
        return f"{array}[{index}]"

    @property
    def array_attribute(self) -> str:
        """What follows a constant array's declarator: ``const_attribute`` and the word flash's section and
        alignment."""
        return self.const_attribute + (self.word_flash.attribute if self.word_flash is not None else "")

    def stream_walk(self, em, x_ctype: str) -> str | None:
        """The symbol of a function ``uint16_t f(const int16_t *p, const X *x, const int16_t *base)`` walking a
        trees' node stream (codegen/trees.py's NodeStream, starting at base) from the node at p to its leaf's
        word, for inputs of C type ``x_ctype``; None: the shared C loop (the default)."""
        return None

    def float_quantise(self, api, table: str | None, offset: int | None) -> list[str] | None:
        """``<prefix>_quantise`` of an integer build (codegen/float_input.integer_quantiser's computation, bit
        for bit) in the target's own code: ``table`` the symbol of the per-feature exponent offsets (142 - s[k],
        uint8 in flash), or None with ``offset`` their one value; None: the C loop (the default)."""
        return None

    def forest_asm(self, em, name: str, layout, n_outputs: int, input_dim: int, acc_bytes: int,
                   bounds, shift: int, saturation: int | None) -> tuple[str, int, float] | None:
        """A forest's sums function ``int name(const int16_t *x, void *acc)`` in the target's assembly (int16
        inputs; codegen/trees.py's Layout with leaf rows of ints; ``bounds``: each output's largest sum): the sums
        stored at acc (``acc_bytes`` each) unless it is null, the first maximum of ``(sum + half) >> shift``
        (saturated to ``saturation`` bits where given) returned; (its C text, flash bytes, predicted cycles), or
        None: the shared C kernels (the default)."""
        return None

    def real_fft(self, em, dtype, fft_length: int) -> str | None:
        """The symbol of a function ``void f(const T *x, long length, T *out)`` computing kissfft's real FFT of
        ``dtype`` (ir/ops/signal/kissfft.py's semantics, bit for bit) in the target's own code; None: the shared
        C (the default)."""
        return None

    def offset_store(self, em, name: str) -> str | None:
        """For the last value ``name`` of a fused element-wise chain (graph.analyses.fused): the scratch symbol
        where its store adds up u = x + 2^15 when it stores u (offset-binary) for its only reader, a kernel
        that takes it so (the reader reads the sum, then zeroes it); None: stored as is (the default)."""
        return None

    # hand-written kernels (tinycc_ml.target.Kernel) replacing the shared C of an op on this target, asked in
    # this order for each node of their op and precision; each must compute exactly what the op's semantics
    # in the registry define
    kernels: tuple = ()
    # the saturation helpers always inlined, in a form with one compare on the common path (the Cortex-M0:
    # at -Os gcc leaves the shared form a call)
    inline_saturation: bool = False
    # flash (bytes, as the trees' cost model predicts it) a forest's straight-line code may take where it is
    # faster than the table walk but larger (a chip with flash to spare); 0: only where nearly as small
    tree_code_budget: int = 0
    forest_asm_budget: int = 0  # bytes a forest's code from forest_asm may take
    # bytes of straight-line tree code (as the trees' cost model predicts it) one generated function holds at
    # most (0: no limit): the rest goes in further functions
    function_code_bytes: int = 0
    # the C name of a 24-bit integer type where the target has one (avr-gcc's __int24): sums that need more
    # than 16 bits and at most 24 take it
    int24_type: str = ""


@dataclass
class Emitted:
    source: str
    header: str
    const_bytes: int
    arena_bytes: int
    input_ctype: str
    score_ctype: str
    input_dim: int
    n_scores: int


OpCode = Callable[["CEmitter", Node], list[str]]
# The shared C of every op, one table per precision ("float", "fixed"): filled by c_float.py and
# c_fixed.py; targets override entries through CTarget.code_overrides.
C_CODE: dict[str, dict[str, OpCode]] = {"float": {}, "fixed": {}}
# the loop computing a fused chain from its head's stored elements, when the head's kernel stored them
# itself rather than through c_fixed.store (filled by c_fixed.py)
CHAIN_FALLBACK: dict[str, OpCode] = {}
# op -> the body of <prefix>_predict computed from that op's node alone, when the prediction is the argmax of
# its result and it reads the input (None: the usual predict through <prefix>_run); see predict_shortcut
PREDICT_CODE: dict[str, Callable[..., list[str] | None]] = {}
# op -> (static functions, body) of <prefix>_predict_float of an integer build computed from that op's node and
# the input's shifts alone, under the same conditions as PREDICT_CODE (None: quantise every feature, then predict)
PREDICT_FLOAT_CODE: dict[str, Callable[..., tuple[list[str], list[str]] | None]] = {}


@dataclass
class CEmitter:
    graph: Graph
    prefix: str
    target: CTarget
    header_lines: list[str] = field(default_factory=list)  # description for the header comment
    constants: list[str] = field(default_factory=list)
    helpers: dict[str, str] = field(default_factory=dict)  # support functions, by name
    const_bytes: int = 0
    const_arrays: dict[str, int] = field(default_factory=dict)  # symbol -> bytes (aliases not counted)
    static_ram: dict[str, int] = field(default_factory=dict)  # an op's own static buffer (an FFT's slots) -> bytes
    # what target kernels record while the code is emitted (read back by the emitter and the report)
    kernel_report: list[dict] = field(default_factory=list)  # matrices whose kernel a cost model chose
    # node -> (layout, why) of a layer whose kernel chose how its weights lie in flash ("int8", "int16")
    weight_layouts: dict[str, tuple[str, str]] = field(default_factory=dict)
    sparse_choices: dict[str, tuple] = field(default_factory=dict)  # node -> its sparse kernel's decision (once)
    x_pages: dict[str, int] = field(default_factory=dict)  # symbol -> int16s of a sparse kernel's aligned x buffer
    arena_align: dict[str, int] = field(default_factory=dict)  # arena key -> byte alignment a kernel needs
    own_x_pages: bool = True  # may a sparse kernel keep x in a 256-byte aligned static buffer of its own
    # the input clamp applied where x is read (no RAM copy of the input; the shared C reads clamp(x[i]))
    clamp_on_read: bool = False
    on_read_kernels: bool = True  # with clamp_on_read: the target's (op, "on_read") kernels for the clamp's readers
    aligns_arenas = False  # does arena_attribute honour arena_align (class-level: a trait of the emitter)
    tree_predict: bool = True  # may <prefix>_predict take an op's own shortcut (PREDICT_CODE)
    compact_trees: bool = False  # trees walk their tables (the least flash), whatever is fastest

    def __post_init__(self):
        check_interface(self.graph)
        verify(self.graph, complete=True)
        self.read_clamp = input_clamp(self.graph) if self.clamp_on_read else None
        if self.read_clamp:  # a private copy planned without the clamp's vector (never stored: not fused)
            self.graph = self.graph.copy()
            a = self.graph.analyses
            a.fused = {h: m for h, m in a.fused.items() if h != self.read_clamp}
            a.memory_plan, a.arenas = plan(self.graph, a.fused, virtual={self.read_clamp})
        if not self.graph.analyses.memory_plan:
            self.graph.analyses.memory_plan, self.graph.analyses.arenas = plan(self.graph)
        self.scores_node = self.graph.output("scores")
        # reshapes are free: a reshape's C names its root's storage (a reshape giving the scores: the
        # caller's buffer, which its root then writes)
        self.reshape_roots = reshape_roots(self.graph)
        self.scores_root = self.reshape_roots.get(self.scores_node, self.scores_node)
        if self.graph.op(self.scores_root) in LEAF_OPS:
            raise CompileError(f"graph {self.graph.name}: the scores are a reshape of %{self.scores_root}, which "
                               "no op computes")
        self.prediction_node = self.graph.output("prediction")
        self.inline_values: dict[str, str] = {}  # value -> the C local holding its element (fused chains)
        self.stored_heads: set[str] = set()  # fused heads whose code stored through c_fixed.store
        self.kernel_stored: set[str] = set()  # element-wise values a kernel stored with its own (no code of theirs)
        # the C local a loop of fused stores adds an offset-binary chain's sum into (CTarget.offset_store), if any
        self.chain_sum: str | None = None
        self.emitting: list[str] = []  # the nodes of the function code() is writing
        self.outlined: dict[str, str] = {}  # repeated node code's text -> its function (codegen/outline.py)
        self.outlined_functions: list[str] = []
        self.shared_kernels: dict[str, str] = {}  # a kernel's functions' text -> their symbol (layers share them)
        self.folded_epilogues: dict = {}  # (head, chain) -> folded_epilogue.fold's proven Epilogue or None
        self._const_symbols: dict[str, str] = {}
        # (C type, length, bytes) -> the symbol storing them; seeded with those of the build this one's C joins
        self._arrays_by_content: dict[tuple, str] = dict(JOINED_BUILD_ARRAYS.get() or {})
        self.kernel_groups = kernel_index(self.target.kernels)  # (op, precision) -> the target's kernels
        if self.target.word_flash is not None:  # the helpers carry the model's prefix: a copy of the target knows it
            self.target = replace(self.target, word_flash=self.target.word_flash.for_prefix(self.prefix))
            self.helpers[self.sym("flash_word")] = self.target.word_flash.helpers_source()

    # ---- naming
    def sym(self, name: str) -> str:
        return f"{self.prefix}_{name}"

    def var(self, name: str) -> str:
        """The C expression naming a value's storage (a pointer for vectors, a local for scalars)."""
        name = self.reshape_roots.get(name, name)
        if name == self.scores_node or name == self.scores_root:
            return "scores"
        if self.graph.op(name) == "input":
            return "x"
        if self.graph.op(name) == "state":
            return self.sym(f"state_{name}")
        return f"v_{name}"

    def is_scores(self, name: str) -> bool:
        """Whether value ``name`` is stored in the caller's scores array."""
        root = self.reshape_roots.get(name, name)
        return root == self.scores_node or root == self.scores_root

    def at(self, name: str, index: str) -> str:
        """Element ``index`` of value ``name`` (for scalars, the value itself)."""
        if name in self.inline_values:  # an element of a fused chain, held in a local
            return self.inline_values[name]
        if name == self.read_clamp:
            return f"{self.clamp_function()}({self.var(self.graph.inputs()[0])}[{index}], {index})"
        node = self.graph.node(name)
        if node.op == "const":
            value = node.attrs["value"]
            if value.ndim == 0:
                return self.literal(value, node.type.dtype)
            return self.target.read_const(self.const_array(name), index, ctype_of(node.type.dtype))
        if node.type.rank == 0:  # a local, but a state's and the scores' storage is the caller's array
            return f"{self.var(name)}[0]" if node.op == "state" or self.is_scores(name) else self.var(name)
        return f"{self.var(name)}[{index}]"

    def literal(self, value, dtype) -> str:
        return c_float(value) if dtype.is_float else c_int(value, ctype_of(dtype))

    # ---- constants
    def add_const_array(self, symbol: str, values: np.ndarray, ctype: str, comment: str) -> str:
        """Declare a constant array; one whose elements equal an array already declared (a table two
        nodes share, a matrix quantised twice alike) becomes a #define of that one: stored once."""
        flat = np.asarray(values).reshape(-1)
        n = len(flat)
        key = (ctype, n, flat.dtype.str, flat.tobytes())
        first = self._arrays_by_content.setdefault(key, symbol)
        if first == symbol and symbol in self.const_arrays:  # asked for again (a table two kernels read)
            return symbol
        if first != symbol:  # the code reads the first (equal code of two nodes is equal text: codegen/outline.py)
            self.constants.append(f"/* {comment}: the same elements as {first} */\n#define {symbol} {first}\n")
            return first
        length = max(n, 1)
        if self.target.word_flash is not None:  # whole words: the last element's word is the array's own
            length = self.target.word_flash.padded_length(n, ctype)
            flat = np.concatenate([flat, np.zeros(length - n, dtype=flat.dtype)]) if n else flat
        self.constants.append(
            f"/* {comment} */\nstatic const {ctype} {symbol}[{length}]{self.target.array_attribute} = {{\n"
            f"    {array_body(flat, ctype) if n else '0'}\n}};\n"
        )
        self.const_arrays[symbol] = length * np.dtype(self._np_type(ctype)).itemsize
        self.const_bytes += self.const_arrays[symbol]
        return symbol

    @staticmethod
    def _np_type(ctype: str):
        return {"float": np.float32, "int32_t": np.int32, "int16_t": np.int16, "int8_t": np.int8,
                "uint8_t": np.uint8, "uint16_t": np.uint16, "uint32_t": np.uint32, "int64_t": np.int64,
                "uint64_t": np.uint64}[ctype]

    def const_array(self, name: str) -> str:
        if name not in self._const_symbols:
            node = self.graph.node(name)
            # a constant named as an entry point (a .tflite tensor "scores") takes another symbol
            symbol = self.sym(f"{name}_constant" if name in ENTRY_POINT_NAMES else name)
            self._const_symbols[name] = self.add_const_array(
                symbol, node.attrs["value"], ctype_of(node.type.dtype), f"%{name}: {node.type}, row-major")
        return self._const_symbols[name]

    def sparse_arrays(self, name: str) -> tuple[str, str, str, str, str]:
        """The CSC arrays of a sparse constant, emitted once:
        (values, row indices, their C type, column starts, their C type)."""
        a = self.graph.node(name)
        idx_type = "uint8_t" if a.type.shape[0] <= 256 else "uint16_t"
        ptr_type = "uint16_t" if a.attrs["col_ptr"][-1] < 65536 else "int32_t"
        if f"{name}:csc" not in self._const_symbols:
            self._const_symbols[f"{name}:csc"] = name
            self.add_const_array(self.sym(f"{name}_values"), a.attrs["values"], ctype_of(a.type.dtype),
                                 f"%{name}: {a.type} sparse, CSC non-zero values")
            self.add_const_array(self.sym(f"{name}_rows"), a.attrs["row_indices"], idx_type,
                                 f"%{name}: row of each non-zero")
            self.add_const_array(self.sym(f"{name}_colptr"), a.attrs["col_ptr"], ptr_type,
                                 f"%{name}: column start offsets")
        return self.sym(f"{name}_values"), self.sym(f"{name}_rows"), idx_type, self.sym(f"{name}_colptr"), ptr_type

    def const_transposed(self, name: str) -> str:
        """A (k, m) constant stored as (m, k) so each column is contiguous."""
        key = f"{name}_t"
        if key not in self._const_symbols:
            node = self.graph.node(name)
            self._const_symbols[key] = self.add_const_array(
                self.sym(f"{name}_t"), node.attrs["value"].T.copy(), ctype_of(node.type.dtype),
                f"%{name}: {node.type}, stored transposed (column j at [j * {node.type.shape[0]}])")
        return self._const_symbols[key]

    # ---- code
    @property
    def input_scale(self):
        """Integer builds: the scale of each input feature (x_int[k] = round(x[k] * 2^s[k])); None for float."""
        return self.graph.analyses.input_scale

    def scheduled_ops(self) -> list[str]:
        return [n for n in self.graph.order() if self.graph.op(n) not in LEAF_OPS]

    def decls(self, names) -> list[str]:
        """Declarations of the values ``names``: pointers into the arenas, locals for scalars (the inner
        values of a fused chain have neither)."""
        out = []
        for name in names:
            node = self.graph.node(name)
            if name in self.graph.analyses.memory_plan and name not in (self.scores_node, self.scores_root):
                key, offset, _ = self.graph.analyses.memory_plan[name]
                out.append(f"    {ARENA_CTYPE[key]} *{self.var(name)} = {self.sym('arena_' + key)} + {offset};")
            elif node.type.rank == 0 and not self.is_scores(name):
                out.append(f"    {ctype_of(node.type.dtype)} {self.var(name)};")
        # a fused head's slot holds its chain's last value, read under that value's name
        out += [f"    (void){self.var(n)};" for n in names
                if n in self.graph.analyses.fused and n in self.graph.analyses.memory_plan]
        return out

    def code(self, names) -> list[str]:
        out = []
        self.emitting = list(names)  # the nodes of the function being written (kernels sharing set-up ask)
        fused = self.graph.analyses.fused
        inner = {m: head for head, members in fused.items() for m in members}
        parts: list[tuple[str, list[str]]] = []  # (the node's comment line, its code)
        for name in names:
            node = self.graph.node(name)
            head = f"    /* %{name} = {node.op}({', '.join('%' + i for i in node.inputs)}) : {node.type} */"
            if name in inner:
                parts.append((head, [f"/* computed in the store of %{inner[name]} (fused) */"]))
                continue
            lines = self.emit_node(node)
            if name in fused and name not in self.stored_heads:
                lines = lines + CHAIN_FALLBACK["fixed"](self, node)
            parts.append((head, lines))
        forms = [outline_form(self, self.graph.node(name), lines) for name, (_, lines) in zip(names, parts)]
        repeats = Counter(f[0] for f in forms if f is not None)
        for (head, lines), form in zip(parts, forms):
            out.append(head)
            if form is not None and (repeats[form[0]] >= MIN_REPEATS or form[0] in self.outlined):
                lines = [self.outlined_call(*form)]
            out.extend("    " + line for line in lines)
        return out

    def outlined_call(self, text: str, exprs: list[str], arenas: list[str]) -> str:
        """The call of the function whose body is ``text`` (codegen/outline.py), written once."""
        if text not in self.outlined:
            name, macro = self.sym(f"step{len(self.outlined)}"), self.sym("NOINLINE").upper()
            if not self.outlined:
                self.outlined_functions.append(noinline_macro(macro))
            self.outlined[text] = name
            self.outlined_functions.append(function_text(name, text, [ARENA_CTYPE[a] for a in arenas], macro))
        return f"{self.outlined[text]}({', '.join(exprs)});"

    @property
    def input_affine(self) -> tuple[float, int] | None:
        """A TFLite-style build's input quantisation (scale, zero point) when one scale covers the tensor (real
        rows quantise as tinycc_ml.ir.fixed.quantise_affine); None otherwise."""
        dtype = self.graph.type(self.graph.inputs()[0]).dtype
        if not dtype.is_quantised or len(dtype.qscales) != 1:
            return None
        return float(dtype.qscales[0]), int(dtype.zero_point)

    @property
    def input_quantisation(self) -> tuple[float, int] | None:
        """``input_affine`` of an int8 input: the C's float entry point quantises by comparisons with 255
        thresholds (an int16 input's 65,535 would not fit a chip: its rows are quantised before the call)."""
        dtype = self.graph.type(self.graph.inputs()[0]).dtype
        return self.input_affine if dtype.bits == 8 else None

    @property
    def has_float_input(self) -> bool:
        """Whether <prefix>_quantise and _predict_float exist: every integer build with a known input scale."""
        return self.input_scale is not None or self.input_quantisation is not None

    def interface(self, **sections) -> Interface:
        g = self.graph
        shifts = self.input_scale
        score_dtype = g.type(self.scores_node).dtype
        return Interface(self.prefix, ctype_of(g.type(g.inputs()[0]).dtype), ctype_of(score_dtype),
                         g.type(g.inputs()[0]).shape[0], g.type(self.scores_node).size,
                         None if shifts is None else tuple(int(s) for s in np.asarray(shifts).reshape(-1)),
                         input_quantisation=self.input_quantisation,
                         score_scale=score_dtype.scale if score_dtype.is_fixed else None,
                         task=g.analyses.task, input_bound=g.analyses.input_bound, stateful=bool(g.states()),
                         **sections)

    def run_function(self, api: Interface, ops: list[str]) -> list[str]:
        """static int <prefix>_run(x, scores): every op in schedule order, returns the prediction."""
        (x_node,) = self.graph.inputs()
        unused = [] if any(x_node in self.graph.node(n).inputs for n in ops) else \
            ["    (void)x; /* no output depends on the input */"]
        return [f"static int {api.sym('run')}(const {api.input_ctype} *x, {api.score_ctype} *scores)", "{",
                *unused, *self.decls(ops), *run_guard(self, api), "", *self.code(ops), *self.state_stores(),
                f"    return (int){self.var(self.prediction_node)};", "}", ""]

    # ---- state kept from one call to the next (ir/ops/state.py)
    def state_stores(self) -> list[str]:
        """The end of a call: each state takes its next value (every reader of the old contents has run)."""
        out = []
        for state, nxt in self.graph.states():
            if nxt != state:
                size = self.graph.type(state).size
                out += [f"    /* %{state} <- %{nxt} for the next call */",
                        f"    for (long i = 0; i < {size}; ++i) {self.var(state)}[i] = {self.at(nxt, 'i')};"]
        return out

    def state_bytes(self) -> int:
        return state_bytes(self.graph)

    def state_decls(self) -> list[str]:
        """Each state's static storage, initialised, and <prefix>_reset() restoring the initial contents."""
        decls, body = [], []
        for state, _ in self.graph.states():
            node = self.graph.node(state)
            ctype, size = ctype_of(node.type.dtype), node.type.size
            init = np.asarray(node.attrs["init"]).reshape(-1)
            decls.append(f"/* %{state}: {node.type}, kept from one call to the next */\n"
                         f"static {ctype} {self.var(state)}[{max(size, 1)}] = {{\n    {array_body(init, ctype)}\n}};")
            if not init.any():
                body.append(f"    for (long i = 0; i < {size}; ++i) {self.var(state)}[i] = 0;")
            else:
                table = self.add_const_array(self.sym(f"state_{state}_init"), init, ctype,
                                             f"%{state}'s initial contents")
                body.append(f"    for (long i = 0; i < {size}; ++i) "
                            f"{self.var(state)}[i] = {self.target.read_const(table, 'i', ctype)};")
        if not decls:
            return [], []
        reset = [f"void {self.sym('reset')}(void)", "{", *body, "}", ""]
        return decls, reset

    def predict_shortcut(self) -> list[str] | None:
        """The body of <prefix>_predict from PREDICT_CODE when the prediction is the argmax of a node of an op
        there reading the input directly (a single tree: its leaf's class), else None."""
        g = self.graph
        pred = g.node(self.prediction_node)
        if not self.tree_predict or pred.op != "argmax" or self.read_clamp:
            return None
        node = g.node(pred.inputs[0])
        code = PREDICT_CODE.get(node.op)
        if code is None or g.op(node.inputs[0]) != "input":
            return None
        return code(self, node)

    def predict_float_shortcut(self, api) -> tuple[list[str], list[str]] | None:
        """(static functions, body) of <prefix>_predict_float from PREDICT_FLOAT_CODE where predict has its
        shortcut (predict_shortcut) and the input is quantised by shifts, else None."""
        g = self.graph
        pred = g.node(self.prediction_node)
        if (not api.predict_float or api.input_shifts is None or api.input_quantisation is not None
                or not self.tree_predict or pred.op != "argmax" or self.read_clamp):
            return None
        node = g.node(pred.inputs[0])
        code = PREDICT_FLOAT_CODE.get(node.op)
        if code is None or g.op(node.inputs[0]) != "input":
            return None
        return code(self, node, api.input_shifts)

    def emit(self) -> Emitted:
        api = self.interface(predict_float=self.has_float_input)
        functions = self.run_function(api, self.scheduled_ops())
        functions += entry_points(api, self.predict_shortcut())
        if scores_buffer_bytes(api):
            self.static_ram["scores_buffer"] = scores_buffer_bytes(api)
        if api.predict_float:
            functions += source_lines(api, self.target.array_attribute, self.target.read_const, streaming=False,
                                      shortcut=self.predict_float_shortcut(api))
        return self.assemble(api, functions)

    def build_output(self) -> BuildOutput:
        """emit(), as the files and facts a backend returns."""
        emitted = self.emit()
        return BuildOutput(
            files={f"{self.prefix}.h": emitted.header, f"{self.prefix}.c": emitted.source},
            prefix=self.prefix, input_ctype=emitted.input_ctype, score_ctype=emitted.score_ctype,
            input_dim=emitted.input_dim, n_scores=emitted.n_scores, const_bytes=emitted.const_bytes,
            ram_bytes=emitted.arena_bytes, input_scale=self.input_scale, task=self.graph.analyses.task,
            input_quantisation=self.input_affine,
            kernels=list(self.kernel_report), weight_layouts=dict(self.weight_layouts),
            optional_ram_bytes=self.x_page_bytes(),
            const_arrays=dict(self.const_arrays), macs=multiply_accumulates(self.graph),
            array_contents=dict(self._arrays_by_content),
            word_flash=self.target.word_flash, input_bound=self.graph.analyses.input_bound)

    def x_page_bytes(self) -> int:
        """RAM of the sparse kernels' own aligned x buffers, with the alignment's worst-case padding."""
        return sum(2 * n + 255 for n in self.x_pages.values())

    def extra_ram_bytes(self) -> int:
        """Static RAM besides the arenas (target kernels' scratch, streaming state)."""
        return 0

    def int32_accumulators(self, rows: int) -> str:
        """The declaration of ``acc``, ``rows`` int32 accumulators of a loop (here: on the stack)."""
        return f"int32_t acc[{rows}];"

    def arena_attribute(self, key: str) -> str:
        """Attributes of an arena's declaration (an alignment a kernel needs)."""
        return ""

    def assemble(self, api: Interface, functions: list[str]) -> Emitted:
        """Both files around ``functions``: constants, helpers and arenas collected while emitting them."""
        graph = self.graph
        arenas = graph.analyses.arenas
        arena_decls = [f"static {ARENA_CTYPE[k]} {self.sym('arena_' + k)}[{n}]{self.arena_attribute(k)};"
                       for k, n in arenas.items()]
        state_decls, reset = self.state_decls()
        arena_decls += state_decls
        functions = functions + reset
        arena_bytes = (sum(n * element_bytes(k) for k, n in arenas.items()) + self.extra_ram_bytes()
                       + self.state_bytes() + sum(self.static_ram.values()))
        includes = ["#include <stdint.h>", *self.target.extra_includes]
        if any(graph.op(n) in MATH_OPS and any(graph.type(v).dtype.is_float for v in (n, *graph.node(n).inputs))
               for n in graph.order()):
            includes.append("#include <math.h>")
        comment = comment_block(self.prefix, self.target.name, self.header_lines, self.const_bytes, arena_bytes)
        source = source_text(comment, self.prefix, includes, self.constants, list(self.helpers.values()),
                             arena_decls, self.outlined_functions + functions)
        return Emitted(source, header_text(comment, api), self.const_bytes, arena_bytes, api.input_ctype,
                       api.score_ctype, api.input_dim, api.n_scores)

    def clamp_function(self) -> str:
        """static inline int16_t <prefix>_xclamp(int16_t v, i): feature i of the input clamped (clamp_on_read);
        per-feature bounds in the arrays the batch clamp would store (streaming's feed() reads them too)."""
        name = self.sym("xclamp")
        if name in self.helpers:
            return name
        node = self.graph.node(self.read_clamp)
        dtype = self.graph.type(node.inputs[0]).dtype
        lo, hi = clip_bounds(node.attrs["lo"], node.attrs["hi"], dtype)
        top = 2 ** (dtype.bits - 1)
        if np.ndim(lo) == 0:
            lo_c, hi_c = str(int(lo)), str(int(hi))
            body = ["    (void)i;"]
            if int(hi) < top - 1:
                body.append(f"    if (v > {hi_c}) return {hi_c};")
            if int(lo) > -top:
                body.append(f"    if (v < {lo_c}) return {lo_c};")
        else:
            ctype = ctype_of(dtype)
            rd = self.target.read_const
            lo_s, hi_s = (self.add_const_array(self.sym(f"{node.name}_{end}"), b, ctype,
                                               f"%{node.name}: {what} bound of each element")
                          for end, b, what in (("lo", lo, "lower"), ("hi", hi, "upper")))
            body = [f"    const {ctype} lo = {rd(lo_s, 'i', ctype)}, hi = {rd(hi_s, 'i', ctype)};",
                    "    if (v > hi) return hi;", "    if (v < lo) return lo;"]
        self.helpers[name] = (f"static inline int16_t {name}(int16_t v, int32_t i)\n{{\n" + "\n".join(body)
                              + "\n    return v;\n}\n")
        return name

    def emit_node(self, node: Node) -> list[str]:
        """The node's C: the first of the target's kernels for the node's op and precision that emits it
        (ranked_kernels), else the entry of the shared code table of the node's precision.
        With the input clamp applied on read, the clamp has no code and its readers take the shared C (which
        reads through ``at``)."""
        if node.name == self.read_clamp:
            self.clamp_function()
            return ["/* applied where x is read: no RAM copy of the input */"]
        precision = precision_of(node.type, [self.graph.type(i) for i in node.inputs])
        key = (node.op, "on_read") if self.read_clamp in node.inputs else (node.op, precision)
        if key[1] != "on_read" or self.on_read_kernels:
            for kernel in ranked_kernels(self, node, self.kernel_groups.get(key, ())):
                lines = kernel.emit(self, node)
                if lines is not None:
                    return lines
        code = C_CODE[precision].get(node.op)
        if code is None:
            raise CompileError(f"node %{node.name}: op {node.op} has no {precision} C code on target "
                               f"{self.target.name}")
        return code(self, node)


# ---- the target's kernels (tinycc_ml.codegen.kernels.Kernel), asked per node


def kernel_index(kernels) -> dict[tuple[str, str], tuple]:
    """The kernels by (op, precision), each group in the target's order."""
    index: dict[tuple[str, str], list] = {}
    for kernel in kernels:
        if not (hasattr(kernel, "op") and hasattr(kernel, "emit")):
            raise TypeError(f"CTarget.kernels holds {kernel!r}, not a tinycc_ml.target.Kernel")
        index.setdefault((kernel.op, kernel.precision), []).append(kernel)
    return {key: tuple(group) for key, group in index.items()}


def ranked_kernels(em: CEmitter, node: Node, group: tuple):
    """The kernels of ``group`` that claim ``node``, in the order the emitter tries them: when none states a
    cost, the target's order, each asked to claim only when the ones before it declined; else those stating
    a cost first (usable ones, cheapest first, the choice recorded in the kernel report), then the others."""
    if not any(k.cost is not None for k in group):
        yield from (k for k in group if k.claims is None or k.claims(em, node))
        return
    claiming = [k for k in group if k.claims is None or k.claims(em, node)]
    costs = {k: k.cost(em, node) for k in claiming if k.cost is not None}
    costed = sorted((k for k, cost in costs.items() if cost.usable), key=lambda k: costs[k].cycles)
    if costed:
        em.kernel_report.append({"node": node.name, "kernel": costed[0].label,
                                 "predicted_cycles": costs[costed[0]].cycles, "flash_bytes": costs[costed[0]].flash,
                                 "candidates": {k.label: cost.as_dict() for k, cost in costs.items()}})
    yield from costed
    yield from (k for k in claiming if k.cost is None)


def input_clamp(graph: Graph) -> str | None:
    """The input clamp that may be applied on read: a 16-bit clip of the input at the input's scale, its
    only user."""
    (x,) = graph.inputs()
    users = graph.users(x)
    if len(users) != 1 or graph.op(users[0]) != "clip" or any(users[0] == n for _, n in graph.outputs):
        return None
    t, xt = graph.type(users[0]), graph.type(x)
    if not (t.dtype.is_fixed and t.dtype == xt.dtype and t.dtype.bits == 16 and t.shape == xt.shape):
        return None
    return users[0]


def check_interface(graph: Graph) -> None:
    """What every emitted model's entry points assume of a graph: one input vector, a computed
    score vector and an idx prediction."""
    inputs = graph.inputs()
    labels = dict(graph.outputs)
    if len(inputs) != 1 or graph.type(inputs[0]).rank != 1:
        raise CompileError(f"graph {graph.name}: needs exactly one input vector, has {len(inputs)} input(s)")
    if "scores" not in labels or "prediction" not in labels:
        raise CompileError(f"graph {graph.name}: needs outputs scores and prediction, has {', '.join(labels)}")
    states = {next_label(n) for n, _ in graph.states()}
    other = sorted(set(labels) - {"scores", "prediction"} - states)
    if other:  # its value would be computed for nothing (and gcc -Werror refuses a variable set but unused)
        raise CompileError(f"graph {graph.name}: output {', '.join(other)} is not one the C returns "
                           "(scores, prediction)")
    scores, prediction = graph.type(labels["scores"]), graph.type(labels["prediction"])
    numeric = (scores.dtype.is_float or scores.dtype.is_fixed or scores.dtype.is_quantised or scores.dtype.is_integer
               or scores.dtype.kind == "bool")  # a mask (comparisons): one byte 0 or 1 per score
    if scores.rank != 1 or not numeric or graph.op(labels["scores"]) == "input":
        raise CompileError(f"graph {graph.name}: output scores must be a computed numeric vector, is {scores}")
    if prediction.rank != 0 or prediction.dtype.kind != "idx":
        raise CompileError(f"graph {graph.name}: output prediction must be an idx scalar, is {prediction}")


# headers a build including the output folder may look up (C11/C23, the POSIX and toolchain ones the
# generated code, the simulators' harnesses and Arduino sketches use), compared case-insensitively
# (macOS and Windows file systems fold case)
SYSTEM_HEADERS = frozenset("""
    assert complex ctype errno fenv float inttypes iso646 limits locale math setjmp signal stdalign stdarg
    stdatomic stdbit stdbool stdckdint stddef stdint stdio stdlib stdnoreturn string tgmath threads time uchar
    wchar wctype unistd strings alloca malloc pthread fcntl arduino
""".split())


def check_prefix(prefix: str) -> str:
    import re

    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", prefix or ""):
        raise CompileError(f"name {prefix!r} is not a valid C identifier (letters, digits, _; no leading digit)")
    if prefix in C_KEYWORDS:
        raise CompileError(f"name {prefix!r} is a C keyword")
    if prefix.lower() in SYSTEM_HEADERS:  # <name>.h beside the sources would shadow the system's header
        raise CompileError(f"name {prefix!r} would write {prefix}.h, which shadows the standard header "
                           f"<{prefix.lower()}.h> for every file built with -I on the output folder; choose another "
                           "name")
    if len(prefix) > 40:
        raise CompileError(f"name {prefix!r} is longer than 40 characters")
    if harness_name_clash(prefix):
        raise CompileError(harness_name_clash(prefix))
    return prefix
