"""The microcontroller backend base and the C emitter it shares between targets (avr, cortex-m0).

Same API as the host backend (<prefix>_predict, <prefix>_scores), plus the streaming entry
points of the Bonsai paper when the first op after the input clamp is a matvec or an sqdist:
<prefix>_begin(), <prefix>_feed(i, value) as features arrive, <prefix>_end() /
<prefix>_end_scores(scores); the input vector is never stored. Integer builds also get
<prefix>_quantise and <prefix>_predict_float(const float *x) (codegen/float_input.py), compiled only
with -D<PREFIX>_WITH_FLOAT or in Arduino builds (they need float code). Constants live in flash; no
heap, no division in the integer path.

Streaming accumulates column i of W (any stored layout: row-major, kernel blocks, or CSC, whose
columns are contiguous) or the terms (M[i][j] - x_i)^2 into static int32 accumulators; the int32
sums are exact and proven to fit, so the order does not matter and end() equals predict().
compile() refuses a model that does not fit the chip (check_fit: measured with the cross
toolchain, else estimated).
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import os
import re
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from tinycc_ml.buildsys.project import firmware_project
from tinycc_ml.chips import Chip, memory_limits
from tinycc_ml.codegen.backend import Backend, BuildOutput, Fit
from tinycc_ml.codegen.c_files import Interface, entry_points, scores_buffer_bytes
from tinycc_ml.codegen.c_fixed import clamp_expr, rshift_c, saturate_c, shift_c, store
from tinycc_ml.codegen.emitter import CEmitter, CTarget, Emitted, ctype_of, input_clamp
from tinycc_ml.codegen.float_input import guard_macro, source_lines
from tinycc_ml.codegen.input_bound import run_guard, streaming_guard
from tinycc_ml.codegen.layouts import ConstLayout
from tinycc_ml.codegen.step_words import FIRST_STEP_WORDS, step_words
from tinycc_ml.errors import CompileError, DataError, FitError, ToolchainError
from tinycc_ml.ir.analyses import task_kind
from tinycc_ml.ir.fixed import clip_bounds, quantise, quantise_affine
from tinycc_ml.ir.graph import Graph, Node
from tinycc_ml.ir.ops.registry import node_output_shift
from tinycc_ml.passes.manager import PassContext, PassOptions, run_passes
from tinycc_ml.plugins import PluginError
from tinycc_ml.runtime.profile import function_cycles, function_profile
from tinycc_ml.runtime.simulate import DEFAULT_MAX_CYCLES, SIMULATORS, TargetRun, firmware_sizes, run_on_target

log = logging.getLogger(__name__)
# a network's call may take this many cycles or instructions per multiply-accumulate before it is taken for a
# hang (the shared C on the AVR: about 60 cycles per MAC, plus each output's requantisation in int64)
COUNT_PER_MAC_BOUND = 400




def measured_rows(output: BuildOutput, X) -> np.ndarray:
    """Real rows as the build's predict takes them: float32 (float builds), quantised at the input shifts, or
    with the input tensor's scale and zero point (TFLite-style int8 builds, as <prefix>_quantise does)."""
    X = np.asarray(X, dtype=np.float64)
    bits = output_input_bits(output)
    if output.input_quantisation is not None:
        return quantise_affine(X, *output.input_quantisation, bits).astype(np.int8 if bits == 8 else np.int16)
    if output.input_scale is None:
        return X.astype(np.float32)
    return quantise(X, output.input_scale, bits).astype(np.int8 if bits == 8 else np.int16)


def output_input_bits(output: BuildOutput) -> int:
    """The width of an integer build's input (int16, or int8: a network in the project's int8)."""
    return 8 if output.input_ctype == "int8_t" else 16


# ---------------------------------------------------------------- streaming

@dataclass
class StreamPlan:
    clamp: str | None  # the input clamp node (integer builds), folded into feed()
    first: str  # the matvec / sqdist consuming the input


def stream_plan(graph: Graph) -> StreamPlan:
    """Which node streaming accumulates; CompileError when the graph does not allow it."""
    (x,) = graph.inputs()
    users = graph.users(x)
    clamp = None
    if len(users) == 1 and graph.op(users[0]) == "clip":
        clamp = users[0]
        users = graph.users(clamp)
        if any(clamp == n for _, n in graph.outputs):
            users = []
    if len(users) != 1:
        raise CompileError("streaming needs the input read by one step only, a product by a constant matrix or "
                           f"the distances to constant prototypes; here {len(users)} steps read it")
    first = graph.node(users[0])
    v = clamp or x
    if first.op == "matvec" and first.inputs[1] == v and graph.op(first.inputs[0]) in ("const", "sparse_const"):
        return StreamPlan(clamp, first.name)
    if first.op == "sqdist" and first.inputs[0] == v and graph.op(first.inputs[1]) == "const":
        return StreamPlan(clamp, first.name)
    first_words = FIRST_STEP_WORDS.get(first.op, first.op)
    raise CompileError("streaming needs the model's first step to be a product of the input by a constant matrix "
                       f"or the distances to constant prototypes; here it is {first_words}")


C_TYPE_BYTES = {"uint8_t": 1, "int8_t": 1, "int16_t": 2, "uint16_t": 2, "int32_t": 4, "uint32_t": 4, "float": 4}


@dataclass
class McuEmitter(CEmitter):
    """The shared emitter, split so that the batch and the streaming paths share one tail."""

    kernel_layout: dict[str, ConstLayout] = field(default_factory=dict)  # const name -> how a kernel stored it
    scratch_buffers: dict[str, tuple[str, int]] = field(default_factory=dict)  # symbol -> (C type, length)
    stream_bytes: int = 0
    node_functions: dict = field(default_factory=dict)  # node -> the kernel functions its code calls
    node_steps: dict = field(default_factory=dict)  # node -> what it computes, in words (step_words)
    aligns_arenas = True

    def arena_attribute(self, key: str) -> str:
        return f" __attribute__((aligned({self.arena_align[key]})))" if key in self.arena_align else ""

    def build_output(self) -> BuildOutput:
        out = super().build_output()
        out.node_functions = {n: list(f) for n, f in self.node_functions.items()}
        out.node_steps = {n: self.node_steps[n] for n in self.graph.order() if n in self.node_steps}  # as run
        return out

    def emit_node(self, node: Node) -> list[str]:
        """The shared emit_node, noting which out-of-line kernel functions (asm kernels, C functions that
        are not inline) the node's code calls: a profile charges their cycles to the node."""
        lines = super().emit_node(node)
        text = "\n".join(lines)
        called = [h for h, body in self.helpers.items()
                  if f"{h}(" in text and "inline" not in body.split("(", 1)[0] and f"{h}(" in body]
        if called:
            mine = self.node_functions.setdefault(node.name, [])
            mine += [h for h in called if h not in mine]
        self.node_steps[node.name] = step_words(self.graph, node)
        return lines

    def scratch(self, name: str, ctype: str, length: int) -> None:
        """A static buffer shared by kernels (sized for the largest use)."""
        n = max(self.scratch_buffers.get(name, (ctype, 0))[1], length)
        self.scratch_buffers[name] = (ctype, n)
        self.helpers[name] = f"/* kernel scratch */\nstatic {ctype} {name}[{n}];\n"

    def int32_accumulators(self, rows: int) -> str:
        # static scratch the fit check counts, not a stack array: on the AVR 256 rows took 1 KB of stack,
        # which ran into the data of its 2 KB
        self.scratch(self.sym("acc"), "uint32_t", rows)
        return f"int32_t *acc = (int32_t *){self.sym('acc')};"

    def extra_ram_bytes(self) -> int:
        scratch = sum(n * C_TYPE_BYTES[ctype] for ctype, n in self.scratch_buffers.values())
        return scratch + self.stream_bytes + self.x_page_bytes()

    def emit(self) -> Emitted:
        try:
            splan, no_stream = stream_plan(self.graph), None
        except CompileError as exc:
            splan, no_stream = None, str(exc)
        api = self.interface(streaming=splan is not None, no_streaming_reason=no_stream,
                             predict_float=self.has_float_input, float_guard=guard_macro(self.prefix))
        ops = self.scheduled_ops()
        if splan:
            functions = self.split_run(api, ops, splan.first) + self.streaming(api, splan)
        else:
            functions = self.run_function(api, ops)
        functions += entry_points(api, self.predict_shortcut())
        if scores_buffer_bytes(api):
            self.static_ram["scores_buffer"] = scores_buffer_bytes(api)
        if api.predict_float:
            functions += source_lines(api, self.target.array_attribute, self.target.read_const, splan is not None,
                                      self.target, shortcut=self.predict_float_shortcut(api))
        return self.assemble(api, functions)

    def split_run(self, api: Interface, ops: list[str], first: str) -> list[str]:
        """<prefix>_run as a head (up to the streamed node) and a <prefix>_tail shared with end()."""
        P, pred = api.sym, self.var(self.prediction_node)
        head = ops[:ops.index(first) + 1]
        tail = ops[len(head):]
        return [f"static int {P('tail')}({api.score_ctype} *scores)", "{", *self.decls([first] + tail), "",
                *self.code(tail), f"    return (int){pred};", "}", "",
                f"static int {P('run')}(const {api.input_ctype} *x, {api.score_ctype} *scores)", "{",
                *self.decls(head), *run_guard(self, api), "", *self.code(head), f"    return {P('tail')}(scores);",
                "}", ""]

    # ---- streaming
    def streaming(self, api: Interface, splan: StreamPlan) -> list[str]:
        g, P = self.graph, api.sym
        node = g.node(splan.first)
        fixed = node.type.dtype.is_fixed
        acc_t = "int32_t" if fixed else "float"
        n_acc = node.type.size
        acc = P("stream_acc")
        h = int(node.attrs.get("shift", 0))
        state, begin, check, finish = streaming_guard(self, api)
        self.stream_bytes = 4 * n_acc + (1 if state else 0)
        feed = [f"void {P('feed')}(int i, {api.input_ctype} value)", "{",
                f"    if (i < 0 || i >= {api.input_dim}) return;", *check, *self.feed_value(api, splan.clamp),
                *("    " + line for line in (self.feed_matvec(node, acc, h) if node.op == "matvec"
                                             else self.feed_sqdist(node, acc, h))),
                "}", ""]
        if fixed:
            k = node_output_shift(g, node.name)
            fill = store(self, node, "r", shift_c(self, f"{acc}[r]", k))
        else:
            fill = f"{self.var(node.name)}[r] = {acc}[r];"
        return [f"static {acc_t} {acc}[{n_acc}];", *state, "",
                f"void {P('begin')}(void)", "{", f"    for (int r = 0; r < {n_acc}; ++r) {acc}[r] = 0;", *begin, "}",
                "",
                *feed,
                f"static int {P('finish')}({api.score_ctype} *scores)", "{", *self.decls([node.name]), *finish,
                f"    for (int r = 0; r < {n_acc}; ++r) {fill}", f"    return {P('tail')}(scores);", "}", "",
                f"int {P('end')}(void)", "{", f"    {api.score_ctype} scores[{api.n_scores}];",
                f"    return {P('finish')}(scores);", "}", "",
                f"void {P('end_scores')}({api.score_ctype} *scores)", "{", f"    (void){P('finish')}(scores);", "}",
                ""]

    def feed_value(self, api: Interface, clamp: str | None) -> list[str]:
        """The line defining v, feature i as the streamed node reads it (the input clamp applied)."""
        if not clamp:
            return [f"    const {api.input_ctype} v = value;"]
        g = self.graph
        cl = g.node(clamp)
        in_dtype = g.type(g.inputs()[0]).dtype
        lo, hi = clip_bounds(cl.attrs["lo"], cl.attrs["hi"], in_dtype)
        shift = in_dtype.scale - cl.type.dtype.scale
        lines = []
        if np.ndim(lo) == 0:
            expr = rshift_c(clamp_expr("value", int(lo), int(hi), in_dtype.bits), shift)
        else:  # per-feature bounds: the arrays the batch clamp put in flash
            rd, ct = self.target.read_const, ctype_of(in_dtype)
            if cl.name in self.kernel_layout:  # stored by a kernel
                lo_c, hi_c = self.kernel_layout[cl.name].bounds(rd, "i")
            else:
                lo_c, hi_c = rd(self.sym(f"{cl.name}_lo"), "i", ct), rd(self.sym(f"{cl.name}_hi"), "i", ct)
            lines.append(f"    const int32_t lo = {lo_c}, hi = {hi_c};")
            expr = rshift_c("(value < lo ? lo : (value > hi ? hi : (int32_t)value))", shift)
        return lines + [f"    const int16_t v = {saturate_c(self, cl, expr)};"]

    def feed_matvec(self, node: Node, acc: str, h: int) -> list[str]:
        g = self.graph
        a_name = node.inputs[0]
        a = g.node(a_name)
        rows, cols = a.type.shape
        fixed = node.type.dtype.is_fixed
        rd = self.target.read_const

        def term(w: str) -> str:
            return rshift_c(f"(int32_t)v * {w}", h) if fixed else f"v * {w}"

        if a.op == "sparse_const":
            vals, rix, idx_type, cptr, ptr_type = self.sparse_arrays(a_name)
            return [f"for (int32_t p = {rd(cptr, 'i', ptr_type)}; p < (int32_t){rd(cptr, 'i + 1', ptr_type)}; ++p)",
                    f"    {acc}[{rd(rix, 'p', idx_type)}] += {term(rd(vals, 'p', ctype_of(a.type.dtype)))};"]
        if a_name in self.kernel_layout:
            return self.kernel_layout[a_name].feed_matvec(rd, acc, term)
        return [f"for (int r = 0; r < {rows}; ++r) {acc}[r] += {term(self.at(a_name, f'r * {cols} + i'))};"]

    def feed_sqdist(self, node: Node, acc: str, h: int) -> list[str]:
        g = self.graph
        m_name = node.inputs[1]
        k, m = g.type(m_name).shape
        rd = self.target.read_const
        if not node.type.dtype.is_fixed:
            mt = self.const_transposed(m_name)
            return [f"for (int j = 0; j < {m}; ++j) {{",
                    f"    const float d = {rd(mt, f'j * {k} + i', 'float')} - v;", f"    {acc}[j] += d * d;", "}"]
        if m_name in self.kernel_layout:
            return self.kernel_layout[m_name].feed_sqdist(rd, acc, h)
        mt = self.const_transposed(m_name)
        d = rshift_c(f"(int32_t){rd(mt, f'j * {k} + i', ctype_of(g.type(m_name).dtype))} - v", h)
        return [f"for (int j = 0; j < {m}; ++j) {{", f"    const int32_t d = {d};", f"    {acc}[j] += d * d;", "}"]

# ---------------------------------------------------------------- backends

def emit_mcu(graph, prefix: str, target: CTarget, model_description: list[str],
             own_x_pages: bool = True, clamp_on_read: bool = False, on_read_kernels: bool = True,
             tree_predict: bool = True, compact_trees: bool = False) -> BuildOutput:
    return McuEmitter(graph, prefix, target, header_lines=list(model_description), own_x_pages=own_x_pages,
                      clamp_on_read=clamp_on_read, on_read_kernels=on_read_kernels,
                      tree_predict=tree_predict, compact_trees=compact_trees).build_output()


def constant_bytes_floor(graph, precision: str) -> int:
    """A lower bound of the flash the constants of a folded float graph take at ``precision``: every
    stored element at least 1 byte (int8), 2 (int16) or 4 (float); a sparse matrix its non-zeros; a tree
    ensemble's decision nodes a threshold byte (float: 4) and a feature byte each."""
    element = {"int8": 1, "int16": 2}.get(precision, 4)
    # prototypes of a distance: a kernel stores those with 8 significant bits in a byte each (any precision)
    prototypes = {graph.node(n).inputs[1] for n in graph.order() if graph.op(n) in ("sqdist", "sqdist_kvote")}
    total = 0
    for name in graph.order():
        node = graph.node(name)
        if node.op == "const" and graph.users(name):
            size = 1 if name in prototypes and precision != "float" else element
            total += int(np.asarray(node.attrs["value"]).size) * size
        elif node.op == "sparse_const" and graph.users(name):
            total += int(np.count_nonzero(node.attrs["values"])) * element
        elif node.op == "tree_ensemble":  # each decision node: its threshold (a byte at least) and its feature
            internal = int(np.count_nonzero(np.asarray(node.attrs["feature"]) >= 0))
            total += internal * ((4 if precision == "float" else 1) + 1)
    return total


def _linker_finding(lines: list[str]) -> str:
    """What a linker's overflow lines say, in words (its own output goes to the log, not into a refusal)."""
    regions = {}
    for line in lines:
        found = re.search(r"region [`'\"]?([\w.]+)['\"]? overflowed by (\d+) bytes?", line)
        if found:
            regions[found.group(1)] = int(found.group(2))
    if regions:
        return "the linker finds " + ", ".join(f"region {name} {n} bytes too small" for name, n in regions.items())
    placed = re.search(r"section [`'\"]?([\w.]+)['\"]? will not fit in region [`'\"]?([\w.]+)", " ".join(lines))
    if placed:
        return f"the linker cannot place section {placed.group(1)} in region {placed.group(2)}"
    return "the linker cannot place the firmware in the chip's memory"


def check_fit(simulator: str | None, chip: Chip, output: BuildOutput, measure: bool = True,
              limits: Chip | None = None) -> Fit:
    """Refuse a build that cannot fit ``chip`` (FitError with the sizes): measured with the cross
    toolchain (the firmware ``simulator`` builds for ``chip``) when present, else estimated, and held to
    ``limits`` (the user's own chip's flash and RAM, ``McuBackend.with_memory_limits``) when given. A
    simulator plug-in that cannot be loaded is a PluginError, never a misfit."""
    build_chip, chip = chip, limits or chip
    in_bytes = output.input_dim * (4 if output.input_ctype == "float" else 2)
    sizes, failure = None, "not measured"
    if output.const_bytes > chip.flash:  # no build can fit: not worth compiling (megabytes of C)
        measure, failure = False, "the constants alone exceed the flash"
    elif output.ram_bytes > chip.ram:  # nor with intermediates beyond the RAM (arrays a compiler may refuse)
        measure, failure = False, "the intermediates alone exceed the RAM"
    if measure:
        try:
            with tempfile.TemporaryDirectory(prefix="tinycc-ml-fit-") as tmp:
                for name, text in output.files.items():
                    with open(os.path.join(tmp, name), "w") as f:
                        f.write(text)
                p = output.prefix
                sizes = firmware_sizes(simulator, [os.path.join(tmp, f"{p}.c")], os.path.join(tmp, f"{p}.h"), p,
                                       output.input_dim, output.n_scores, output.input_ctype, output.score_ctype,
                                       chip=build_chip)
        except ToolchainError as exc:  # said without the temporary folder's name
            sizes, failure = None, re.sub(r"\S*/tinycc-ml-[^/\s]*/", "", str(exc))
    linker_says = [ln.strip()[-160:] for ln in failure.splitlines()
                   if "will not fit in region" in ln or "overflowed by" in ln]
    if sizes is None and linker_says:  # the linker itself says no: no estimate can say yes
        log.info("%s: the linker's words: %s", output.prefix, failure)
        raise FitError(f"model {output.prefix} does not fit the {chip.name}: {_linker_finding(linker_says)}; "
                       f"constants {output.const_bytes} bytes, intermediates {output.ram_bytes} bytes",
                       output.const_bytes, chip.flash - chip.code_estimate, subject=f"model {output.prefix}")
    if sizes is None and measure and "not found" not in failure:
        # the tools are there and said no: a build that does not link is refused, never sized by an estimate
        # (the tools' own words go to the log, not into the refusal)
        log.info("%s: the measurement firmware did not build for the %s: %s", output.prefix, chip.name, failure)
        finding = ("its code has a branch beyond its reach (the linker's relocation truncated to fit)"
                   if "relocation truncated to fit" in failure else
                   "the measurement firmware did not build for the chip (the log has the tools' words)")
        raise FitError(f"model {output.prefix} cannot be built for the {chip.name}: {finding}; constants "
                       f"{output.const_bytes} bytes, intermediates {output.ram_bytes} bytes",
                       subject=f"model {output.prefix}")
    # a stream's window (<prefix>_feed) stands where the harness's input buffer stands: the larger of the two
    stream_extra = max(0, output.stream_bytes - in_bytes)
    if sizes is not None:
        flash, ram = sizes.flash_bytes, sizes.ram_bytes + stream_extra
        how = "measured firmware (model + harness with the input buffer)"
    else:
        flash = output.const_bytes + chip.code_estimate
        ram = output.ram_bytes + in_bytes + stream_extra + 4 * output.n_scores
        how = "estimated (no cross toolchain)" if "not found" in failure else f"estimated ({failure})"
    stack = chip.stack_estimate + 4 * output.n_scores
    if flash > chip.flash or ram + stack > chip.ram:
        raise FitError(
            f"model {output.prefix} does not fit the {chip.name}: needs {flash} bytes of flash (has {chip.flash}) "
            f"and {ram} bytes of static RAM + ~{stack} bytes of stack (has {chip.ram}); {how}; "
            f"constants {output.const_bytes} bytes, intermediates {output.ram_bytes} bytes",
            *((output.const_bytes, chip.flash - (flash - output.const_bytes)) if flash > chip.flash else (None, None)),
            subject=f"model {output.prefix}")
    log.info("%s fits the %s: %d bytes of flash, %d + ~%d bytes of RAM (%s)", output.prefix, chip.name, flash, ram,
             stack, how)
    return Fit(chip.name, flash, ram, stack, how)


class McuBackend(Backend):
    """A microcontroller target: the shared MCU emitter with the chip's traits; check_fit says whether
    the build fits the chip (measured with its cross compiler when ``measure``, else estimated).

    chip: the Chip (memory, clock, compiler flags); simulator: its name in runtime.simulate.SIMULATORS, or
    None (then no simulate/profile); board: a backends.project.Board for ``--project`` firmware, or None.
    c_target(graph): a CTarget (how constants are declared and read, kernel overrides)."""

    precisions = ("int16", "int8", "float")
    chip: Chip
    simulator: str | None = None
    board = None
    boards: dict = {}  # name -> Board: what with_board (--board) takes; the default board first
    measure = True
    limits: Chip | None = None  # the user's own chip's flash and RAM (with_memory_limits), checked instead of chip's

    def c_target(self, graph) -> CTarget:
        raise NotImplementedError

    @classmethod
    def capabilities(cls) -> frozenset[str]:
        caps = set(super().capabilities())
        if cls.simulator is None:
            caps -= {"simulate", "profile"}
        else:
            try:
                simulator = SIMULATORS.load(cls.simulator)
            except PluginError:  # kept: using it says what is broken
                simulator = None
            if simulator is not None and not callable(getattr(simulator, "profile", None)):
                caps.discard("profile")
        if cls.board is None:
            caps.discard("project_files")
        return frozenset(caps)

    def _simulator(self):
        """The registered simulator object; a PluginError naming this target when it cannot be loaded."""
        self.require("simulate")
        try:
            return SIMULATORS.load(self.simulator)
        except PluginError as exc:
            raise PluginError(f"target {self.name}: its simulator {self.simulator!r} cannot be used: {exc}") from exc

    def require_tools(self, method: str = "auto") -> None:
        if self.simulator is not None:
            self._simulator().require(method)

    def project_files(self, result, examples) -> dict[str, str]:
        self.require("project_files")
        return firmware_project(result, examples, self.board)

    def emit(self, graph, prefix, model_description):
        """The build; again without sparse kernels' own x buffers (256-byte aligned, so up to 255 bytes of
        padding) when with them it would not fit the chip; and then, when the RAM still looks too small for
        it (intermediates + the caller's input + the stack estimate), with the input clamp applied where x is
        read: no RAM copy of the input, its readers on the target's on-read kernels (a small buffer of
        clamped features at a time), or when even those do not fit on the shared C."""
        chip = self.fit_chip
        out = emit_mcu(graph, prefix, self.c_target(graph), model_description)
        fits = None  # of out, once linked
        if any(k.get("kernel") == "trees-asm" for k in out.kernels) and not (fits := self._fits(out)):
            log.info("%s: the forest's C kernels (its assembly does not fit the %s)", prefix, chip.name)
            out, fits = emit_mcu(graph, prefix, replace(self.c_target(graph), forest_asm_budget=0),
                                 model_description), None
        if any(k.get("entry") == "predict" for k in out.kernels) and not (
                fits := self._fits(out) if fits is None else fits):
            log.info("%s: predict through the scores (its own class tree does not fit the %s)", prefix, chip.name)
            out, fits = emit_mcu(graph, prefix, self.c_target(graph), model_description, tree_predict=False), None
        if any(k.get("op") == "tree_ensemble" for k in out.kernels) and not (self._fits(out) if fits is None else fits):
            log.info("%s: trees walk their tables (faster tree code does not fit the %s)", prefix, chip.name)
            out = emit_mcu(graph, prefix, self.c_target(graph), model_description, tree_predict=False,
                           compact_trees=True)
        if out.optional_ram_bytes and not self._fits(out):
            log.info("%s: sparse kernels without x buffers of their own (the %s's RAM)", prefix, chip.name)
            out = emit_mcu(graph, prefix, self.c_target(graph), model_description, own_x_pages=False)
        in_bytes = out.input_dim * (4 if out.input_ctype == "float" else 2)
        if (input_clamp(graph) and out.ram_bytes + in_bytes + chip.stack_estimate > chip.ram
                and not self._fits(out)):
            log.info("%s: the input clamp applied on read, no RAM copy of the input (the %s's RAM)", prefix,
                     chip.name)
            out = emit_mcu(graph, prefix, self.c_target(graph), model_description, own_x_pages=False,
                           clamp_on_read=True)
            readers = "the on-read kernels"
            if not self._fits(out):
                readers = "the shared C"
                out = emit_mcu(graph, prefix, self.c_target(graph), model_description, own_x_pages=False,
                               clamp_on_read=True, on_read_kernels=False)
            out.kernels = [*out.kernels, {"node": input_clamp(graph), "matrix": "input", "kernel": "clamp on read",
                                          "note": f"its readers on {readers}: with a RAM copy of the input the "
                                                  f"build exceeds the {chip.name}'s RAM"}]
        return out

    def _fits(self, out) -> bool:
        try:
            self.check_fit(out)
        except CompileError:
            return False
        return True

    def check_constants_fit(self, graph, precision: str, prefix: str) -> None:
        # the constants as stored: after the input normalisation and constant products are folded
        options = PassOptions(precision=precision, fold_mean=precision != "float")
        folded = run_passes(graph.copy(), ["fold_input_affine", "constant_fold", "cse", "dce"],
                            PassContext(options=options, debug=False))
        floor = constant_bytes_floor(folded, precision)
        chip = self.constants_chip(graph, precision)
        if floor > chip.flash:
            raise FitError(f"model {prefix} does not fit the {chip.name}: its constants alone need at least "
                           f"{floor} bytes of flash at {precision} (has {chip.flash})", floor,
                           chip.flash - chip.code_estimate, subject=f"model {prefix}")

    def constants_chip(self, graph, precision: str) -> Chip:
        """The chip whose flash ``check_constants_fit`` holds the constants' floor to (before any C exists)."""
        return self.fit_chip

    def check_size_floor(self, graph, prefix: str) -> None:
        # emitted as the final build is (its leanest form when the estimate says the RAM is short), nothing
        # linked: only constants or intermediates that alone exceed the chip refuse it here
        estimating = copy.copy(self)
        estimating.measure = False
        out = estimating.emit(graph, prefix, [])
        chip = self.limits or self.fit_chip
        if out.const_bytes > chip.flash or out.ram_bytes > chip.ram:
            estimating.check_fit(out)

    def check_fit(self, output: BuildOutput, limits: Chip | None = None) -> Fit:
        """The fit on the chip, held to ``limits`` when given (else the user's, ``with_memory_limits``)."""
        if self.measure and self.simulator is not None:
            self._simulator()  # a broken simulator plug-in is said as such, not taken for a misfit
        return check_fit(self.simulator, self.chip, output, measure=self.measure and self.simulator is not None,
                         limits=limits or self.limits)

    def with_memory_limits(self, max_flash: int | None = None, max_ram: int | None = None) -> McuBackend:
        """This backend checking builds against the user's own chip: at most ``max_flash`` bytes of flash and
        ``max_ram`` of RAM (each at most the target chip's, or its board's; None: the chip's). Returns self."""
        chip = self.fit_chip
        max_flash, max_ram = memory_limits(chip, max_flash, max_ram, self.name)
        if max_flash is None and max_ram is None:
            return self
        flash, ram = max_flash or chip.flash, max_ram or chip.ram
        self.limits = dataclasses.replace(chip, name=f"{chip.name} limited to {flash} B flash, {ram} B RAM",
                                          flash=flash, ram=ram)
        return self

    @classmethod
    def board_names(cls) -> list[str]:
        """The boards ``with_board`` takes, the default first."""
        return list(cls.boards)

    def with_board(self, board: str | None) -> McuBackend:
        """This backend building for one of its ``boards``: builds are checked against that board's chip (its
        flash and RAM), firmware projects get its start-up, linker script and UART. None: the default board.
        Returns self."""
        if board is None:
            return self
        if board not in self.boards:
            known = ", ".join(self.boards) or "none"
            raise DataError(f"board {board!r} is not one of target {self.name}'s boards ({known})")
        self.board = self.boards[board]
        chip = self.board.chip
        if chip.flash > self.chip.flash or chip.ram > self.chip.ram:
            raise DataError(f"board {board}'s {chip.name} has more memory than target {self.name}'s {self.chip.name}")
        if (chip.flash, chip.ram) != (self.chip.flash, self.chip.ram):
            self.limits = chip
        return self

    @property
    def fit_chip(self) -> Chip:
        """What builds are held to: the user's own chip's memory (``with_memory_limits``), else the chip."""
        return self.limits or self.chip

    def simulate(self, out_dir: Path, output: BuildOutput, X) -> TargetRun:
        self._simulator()
        x = measured_rows(output, X)
        p = output.prefix
        return run_on_target(self.simulator, [str(Path(out_dir) / f"{p}.c")], str(Path(out_dir) / f"{p}.h"), p,
                             x, output.n_scores, output.input_ctype, output.score_ctype,
                             task=task_kind(output.task), chip=self.chip,
                             max_cycles_per_inference=DEFAULT_MAX_CYCLES + COUNT_PER_MAC_BOUND * output.macs)

    def _function_rows(self, out_dir: Path, output: BuildOutput, X) -> dict:
        """function_profile's / function_cycles' arguments for the build in ``out_dir`` on the rows of X."""
        self._simulator()
        x = measured_rows(output, X)
        p = output.prefix
        return {"simulator": self.simulator, "sources": [Path(out_dir) / f"{p}.c"], "header": Path(out_dir) / f"{p}.h",
                "prefix": p, "x": x, "n_scores": output.n_scores, "input_ctype": output.input_ctype,
                "score_ctype": output.score_ctype, "chip": self.chip}

    def profile(self, out_dir: Path, output: BuildOutput, X) -> dict[str, float]:
        """Cycles or instructions of one predict call per function symbol, on the rows of X (the simulator's
        ``profile``, runtime.profile.function_profile); ToolchainError when this chip cannot be profiled here."""
        return function_profile(**self._function_rows(out_dir, output, X))

    def model_cycles(self, out_dir: Path, output: BuildOutput, X, wait_states: int = 0):
        """``CycleCount`` (cycles and instructions per row, cycles per call by symbol) from a cycle model of the
        chip (the simulator's ``cycles``: Cortex-M4/M33); ToolchainError where the simulator has none."""
        return function_cycles(**self._function_rows(out_dir, output, X), wait_states=wait_states)


