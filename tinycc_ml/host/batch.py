"""Host builds' batch entry point: ``<prefix>_predict_batch(x, n, scores, predictions)`` runs the model on
BLOCK_ROWS rows at a time (``<prefix>_run_block``), so each pass over the weights feeds several rows.

The block function is the single-row function's C with a row index (``lane_r``): every value has one copy
per row (the arenas become ``[BLOCK_ROWS][size]``, scalars ``[BLOCK_ROWS]``) and each op's shared C runs in a
loop over the rows (consecutive ops in one such loop in graphs of FUSED_ROW_LOOP_OPS nodes or more, each row's ops
in the single-row order), except the ops with a block kernel here,
which put the row loop inside their own:

- float ``matvec`` by a constant and ``sqdist`` to constant prototypes: the outputs in vector registers
  (GCC/clang's vector extension), 8 rows x 8 outputs at a time (8 vector sums: AVX2's registers hold them,
  the weights and a broadcast x; the former 8 x 32 outputs in AVX-512-wide vectors spilled on every machine, as
  host builds compile -mno-avx512f: 15x slower), the weights (W transposed, B) padded with zeros to whole
  vectors; per k, the weights' vectors loaded once for the tile's rows;
- integer ``matvec`` of int16 x by a constant (int16 or int8 W): 8 rows x 8 outputs in int32 vectors, W stored
  transposed in pairs of columns (one load gives both columns' weights; with AVX2 one ``vpmaddwd`` of a row's
  broadcast pair of x multiplies and adds both columns, wrapping as the int32 sums do), then the shared epilogue
  (shift, saturation, fused chain) row by row; other integer mat-vecs: two rows of W per pass, each row's x[k] times
  both weights into 2 x 8 sums;
- integer ``sqdist`` to constant prototypes: 8 prototypes of every block row at a time in int32 vectors (B
  stored (k, j), padded), then the shared epilogue row by row;
- ``tree_ensemble``: each tree walked level by level by the block's rows, branch-free (host/tree_block.py);
  where that layout does not apply, the table form's walk in lock step (a row at its leaf stays there), then
  each row's leaf added.

Every row's float sums are the single-row C's, in the same order from the same zero (host builds compile with
-ffp-contract=off: no fused multiply-add; nothing here reorders a float sum; integer sums are exact in any
order), so the batch path computes the single-row path's scores and predictions to the bit, at every
precision (tests/backends/test_host_predict_batch.py). A batch
whose size is not a multiple of BLOCK_ROWS runs its last rows in a zero-padded block.
"""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np

from tinycc_ml.host.network import simd_prelude
from tinycc_ml.host.tree_block import walk_block
from tinycc_ml.target import (
    CEmitter,
    Node,
    beyond_function,
    ctype_of,
    has_bound,
    no_answer_function,
    rshift_c,
    saturate_c,
)

BLOCK_ROWS = 8  # rows per pass over the weights
# graphs of this many nodes (an unrolled recurrent layer's steps) run consecutive nodes in one loop over the rows:
# a loop per node made GCC -O3 take minutes. Smaller graphs keep a loop per node: with a whole small network in one
# row loop, GCC -O3 computed some rows' float results a bit apart from the single-row C (an MLP 4-1-3 with tanh:
# 10 of 72 scores; not at -O2, not with a loop per node; cause not found)
FUSED_ROW_LOOP_OPS = 64
MAX_BLOCK_ARENA_BYTES = 1 << 22  # larger models (big networks) keep the one-row loop
LANE = "lane_r"  # the C loop variable naming a block's row
ARENA_CTYPE = {"f32": "float", "i32": "int32_t", "i16": "int16_t", "i8": "int8_t", "u8": "uint8_t"}
ARENA_BYTES = {"f32": 4, "i32": 4, "i16": 2, "i8": 1, "u8": 1}


def lanes(body: list[str], indent: str = "") -> list[str]:
    return [f"{indent}for (int {LANE} = 0; {LANE} < {BLOCK_ROWS}; ++{LANE}) {{", *(f"{indent}    {ln}" for ln in body),
            f"{indent}}}"]


class HostEmitter(CEmitter):
    """The shared emitter, plus the batch entry point (see the module's docstring)."""

    block_mode = False  # emitting <prefix>_run_block: values are named per row (var)
    _pin_emitting: list[str] | None = None
    _lanes_done = False  # the node's C covers the block's rows itself (a block kernel)
    _no_block_kernels = False
    _prefetch_placed = False  # the block function's first kernel prefetches the caller's next rows

    # code() sets ``emitting`` to the nodes it writes; the block function writes one node at a time but the
    # kernels asking which readers share a function must see them all
    @property
    def emitting(self) -> list[str]:
        return self._pin_emitting if self._pin_emitting is not None else self._emitting

    @emitting.setter
    def emitting(self, names) -> None:
        self._emitting = names

    def var(self, name: str) -> str:
        base = super().var(name)
        if not self.block_mode:
            return base
        api = self._api
        if base == "x":
            return f"(x + (long){LANE} * {api.input_dim})"
        if base == "scores":
            return f"(scores + (long){LANE} * {api.n_scores})"
        root = self.reshape_roots.get(name, name)
        plan = self.graph.analyses.memory_plan
        if root in plan:
            key, offset, _ = plan[root]
            return f"({self.sym('block_arena_' + key)}[{LANE}] + {offset})"
        return f"{base}[{LANE}]"

    def emit_node(self, node: Node) -> list[str]:
        if self.block_mode and not self._no_block_kernels:
            precision = "float" if node.type.dtype.is_float else "fixed"
            kernel = BLOCK_KERNELS.get((node.op, precision))
            lines = kernel(self, node) if kernel else None
            if lines is not None:
                self._lanes_done = True
                return lines
        return super().emit_node(node)

    def prefetch_ahead(self, lines_per_step: int, step: str) -> list[str]:
        """C prefetching ``lines_per_step`` cache lines of the caller's next rows (``<prefix>_predict_batch_ahead``)
        at loop step ``step`` of the block's first kernel that asks (an empty list for the others): the rows the
        next block reads stream in from memory while this block computes."""
        if self._prefetch_placed:
            return []
        self._prefetch_placed = True
        ahead, lines = self.sym("predict_batch_ahead_at"), self.sym("predict_batch_ahead_lines")
        first = f"{lines_per_step}L * ({step})" if lines_per_step > 1 else f"(long)({step})"
        return [f"        if ({first} < {lines}) {{",
                *(f"            __builtin_prefetch({ahead} + 64 * ({first} + {h}), 0, 2);"
                  for h in range(lines_per_step)), "        }"]

    def block_arena_bytes(self) -> int:
        return BLOCK_ROWS * sum(n * ARENA_BYTES[k] for k, n in self.graph.analyses.arenas.items())

    def emit(self):
        self._api = self.interface()
        if not self.batchable():
            return super().emit()
        emitted = super().emit()  # the single-row functions first: their constants come first, as before
        return self.with_batch(emitted)

    def batchable(self) -> bool:
        arenas = self.graph.analyses.arenas or {}
        if self.graph.states():  # each row is the next call: rows one after the other, never a block at once
            return False
        return all(k in ARENA_CTYPE for k in arenas) and self.block_arena_bytes() <= MAX_BLOCK_ARENA_BYTES

    def block_function(self) -> list[str]:
        api, g = self._api, self.graph
        ops = self.scheduled_ops()
        plan = g.analyses.memory_plan
        decls = []
        for name in ops:
            node = g.node(name)
            if name not in plan and name not in (self.scores_node, self.scores_root) and node.type.rank == 0 \
                    and name not in self.reshape_roots:
                decls.append(f"    {self.ctype(node)} v_{name}[{BLOCK_ROWS}];")
        body: list[str] = []
        row_wise: list[str] = []  # the code of nodes run row by row, not yet in a row loop
        self.block_mode, self._pin_emitting, self._prefetch_placed = True, list(ops), False
        try:
            for name in ops:
                self._lanes_done = False
                lines = self.code([name])
                if self._lanes_done and name in g.analyses.fused and name not in self.stored_heads:
                    # a fused head whose chain the shared fallback computes after it: row by row
                    self._lanes_done, self._no_block_kernels = False, True
                    lines = self.code([name])
                    self._no_block_kernels = False
                head, rest = lines[0], lines[1:]
                if self._lanes_done or all("computed in the store of" in ln for ln in rest):
                    body += lanes(row_wise, "    ") if row_wise else []
                    body += [head, *rest]
                    row_wise = []
                elif len(ops) >= FUSED_ROW_LOOP_OPS:  # one row loop for consecutive nodes, each row's in order
                    row_wise += [head[4:], *(ln[4:] for ln in rest)]
                else:  # a row loop per node
                    body += lanes([head[4:], *(ln[4:] for ln in rest)], "    ")
            row_wise.append(f"predictions[{LANE}] = (int){self.at(self.prediction_node, '0')};")
            body += lanes(row_wise, "    ")
        finally:
            self.block_mode, self._pin_emitting = False, None
        (x_node,) = g.inputs()
        unused = [] if any(x_node in g.node(n).inputs for n in ops) else ["    (void)x;"]
        return [f"/* {BLOCK_ROWS} rows at a time (x: {BLOCK_ROWS} rows; scores, predictions: theirs) */",
                f"static void {api.sym('run_block')}(const {api.input_ctype} *x, {api.score_ctype} *scores, "
                "int *predictions)", "{", *unused, *decls, *body, "}", ""]

    @staticmethod
    def ctype(node: Node) -> str:
        return ctype_of(node.type.dtype)

    def batch_function(self) -> list[str]:
        api, r = self._api, BLOCK_ROWS
        d, ns, it, st, p = api.input_dim, api.n_scores, api.input_ctype, api.score_ctype, self.prefix
        guard = []  # rows beyond a float build's input bound: no answer, as <prefix>_run gives them
        if has_bound(self.graph):
            beyond, no_answer = beyond_function(self, api), no_answer_function(self, api)
            guard = ["        for (int e = 0; e < m; ++e)",
                     f"            if ({beyond}(xi + (long)e * {d}))",
                     f"                block_predictions[e] = {no_answer}(block_scores + (long)e * {ns});"]
        return [
            f"void {p}_predict_batch_ahead(const void *ahead, long lines)", "{",
            f"    {p}_predict_batch_ahead_at = (const char *)ahead;",
            f"    {p}_predict_batch_ahead_lines = lines;", "}", "",
            f"static {it} {p}_padded[{r * d}]; /* the last rows of a batch, padded with zero rows */",
            f"static {st} {p}_block_scores[{r * ns}];", "",
            f"void {p}_predict_batch(const {it} *x, int n, {st} *scores, int *predictions)", "{",
            f"    {it} *padded = {p}_padded;",
            f"    {st} *block_scores = {p}_block_scores;",
            f"    int block_predictions[{r}];",
            f"    for (int i = 0; i < n; i += {r}) {{",
            f"        const int m = n - i < {r} ? n - i : {r};",
            f"        const {it} *xi = x + (long)i * {d};",
            f"        if (m < {r}) {{ /* the last rows, in a block padded with zero rows */",
            f"            for (long e = 0; e < {r * d}L; ++e) padded[e] = e < (long)m * {d} ? xi[e] : 0;",
            "            xi = padded;",
            "        }",
            f"        {p}_run_block(xi, block_scores, block_predictions);",
            *guard,
            "        if (scores)",
            f"            for (long e = 0; e < (long)m * {ns}; ++e) scores[(long)i * {ns} + e] = block_scores[e];",
            "        if (predictions)",
            "            for (int e = 0; e < m; ++e) predictions[i + e] = block_predictions[e];",
            "    }",
            "}", ""]

    def with_batch(self, emitted):
        """``emitted`` with the block and batch functions added to the source and the batch entry point to the
        header. The block function re-emits each node: what that records again (constants already in the
        source, kernel reports, constant bytes) is dropped; constants and helpers only it uses are added."""
        saved = len(self.constants), self.const_bytes, list(self.kernel_report), set(self.helpers), \
            set(self.const_arrays)
        functions = self.block_function() + self.batch_function()
        added = [c for c in self.constants[saved[0]:] if c not in emitted.source]
        added += [text for name, text in self.helpers.items() if name not in saved[3]]
        del self.constants[saved[0]:]
        # the batch kernels' own tables (padded copies) count as constants of the build
        self.const_bytes = saved[1] + sum(n for s, n in self.const_arrays.items() if s not in saved[4])
        self.kernel_report[:] = saved[2]
        arenas = [f"static {ARENA_CTYPE[k]} {self.sym('block_arena_' + k)}[{BLOCK_ROWS}][{n}];"
                  for k, n in self.graph.analyses.arenas.items()]
        ahead = self.sym("predict_batch_ahead")
        arenas += [f"static const char *{ahead}_at; /* the caller's next rows: the first kernel prefetches them */",
                   f"static long {ahead}_lines; /* cache lines of them */"]
        api = self._api
        decl = (f"/* Host builds: n rows (x: n x {api.input_dim}) at once, {BLOCK_ROWS} per pass over the weights;\n"
                f"   scores (n x {api.n_scores}) and predictions (n) as {self.prefix}_scores and {self.prefix}_predict "
                "give them (either may be NULL). */\n"
                f"void {self.prefix}_predict_batch(const {api.input_ctype} *x, int n, {api.score_ctype} *scores, "
                "int *predictions);\n"
                f"/* The next calls of {self.prefix}_predict_batch prefetch the 64-byte lines ahead[0 .. lines - 1] "
                "while they compute\n   (rows the caller reads next; lines 0: none). */\n"
                f"void {self.prefix}_predict_batch_ahead(const void *ahead, long lines);\n")
        marker = "\n#ifdef __cplusplus\n}\n#endif\n"
        header = emitted.header
        at = header.rfind(marker)
        if at < 0:
            raise ValueError("host header: no closing extern C block")
        header = header[:at] + "\n" + decl + header[at:]
        source = "\n".join([emitted.source.rstrip("\n"), "", "/* ---- the batch entry point (host builds) */",
                            *added, *arenas, "", *functions])
        return replace(emitted, source=source, header=header, const_bytes=self.const_bytes)


# ---- block kernels: (op, precision) -> lines computing all of a block's rows, or None (the per-row loop)


VEC = 8  # floats per vector (GCC/clang vector extension): one AVX2 register (host builds compile -mno-avx512f)
TILE_VECTORS, TILE_ROWS = 1, 8  # a float tile: 8 rows x 8 outputs, 8 vector sums (AVX2's 16 registers)
# an integer mat-vec's tile: 2 rows x 32 outputs (8 sums, 4 weight vectors, a broadcast pair of x)
FIXED_TILE_VECTORS, FIXED_TILE_ROWS = 4, 2


def vector_type(em: HostEmitter) -> str:
    name = em.sym(f"f32x{VEC}")
    em.helpers.setdefault(name, f"typedef float {name} __attribute__((vector_size({4 * VEC})));\n")
    return name


def padded_columns(em: HostEmitter, symbol: str, matrix, comment: str) -> tuple[str, int]:
    """``matrix`` (n, w) stored with its rows padded with zeros to a multiple of VEC: (symbol, padded w)."""
    n, w = matrix.shape
    wide = -(-w // VEC) * VEC
    padded = np.zeros((n, wide), dtype=matrix.dtype)
    padded[:, :w] = matrix
    return em.add_const_array(em.sym(symbol), padded, "float", comment), wide


def vector_tiles(em: HostEmitter, width: int, wide: int, depth: int, table: str, update, out_of,
                 prefetch: list[str] = ()) -> list[str]:
    """Output elements 0..width-1 of every block row, VEC x TILE_VECTORS at a time for TILE_ROWS rows: accumulators
    ``a<v>_<r>`` (vector v of row r, from zero) take ``update(v, r, "t<v>")`` for k = 0..depth-1, ``t<v>`` the VEC
    floats of ``table`` at k * wide + the tile's start + v * VEC; then stored to ``out_of(r)`` (the first
    ``width``). A tile's accumulators and weights fit the vector registers (AVX2's 16: 8 sums, a weight vector and a
    broadcast x), so nothing spills inside the k loop."""
    vt = vector_type(em)
    full = width // (TILE_VECTORS * VEC) * (TILE_VECTORS * VEC)

    def tile(start: str, n_vec: int, stored: int | None, rows: range) -> list[str]:
        accs = ", ".join(f"a{v}_{r} = {{0}}" for r in rows for v in range(n_vec))
        lines = [f"    {vt} {accs};",
                 f"    for (int k = 0; k < {depth}; ++k) {{", *prefetch,
                 f"        const float *w = {table} + (long)k * {wide} + {start};",
                 f"        {vt} {', '.join(f't{v}' for v in range(n_vec))};",
                 *(f"        __builtin_memcpy(&t{v}, w + {v * VEC}, sizeof t{v});" for v in range(n_vec))]
        for r in rows:
            lines.append("        { " + " ".join(update(v, r, f"t{v}") for v in range(n_vec)) + " }")
        lines.append("    }")
        for r in rows:
            for v in range(n_vec):
                count = VEC if stored is None else min(VEC, stored - v * VEC)
                if count > 0:
                    lines.append(f"    __builtin_memcpy({out_of(r)} + {start} + {v * VEC}, &a{v}_{r}, "
                                 f"{count} * sizeof(float));")
        return lines

    groups = [range(first, min(first + TILE_ROWS, BLOCK_ROWS)) for first in range(0, BLOCK_ROWS, TILE_ROWS)]
    lines = []
    if full:
        lines += [f"for (int j0 = 0; j0 < {full}; j0 += {TILE_VECTORS * VEC}) {{"]
        for rows in groups:
            lines += ["{", *tile("j0", TILE_VECTORS, None, rows), "}"]
        lines.append("}")
    if width > full:
        rest = width - full
        for rows in groups:
            lines += ["{", *tile(str(full), -(-rest // VEC), rest, rows), "}"]
    return lines


def lane_text(text: str, r: int) -> str:
    """C naming block row ``r`` (a constant) where ``text`` names row lane_r."""
    return re.sub(rf"\b{LANE}\b", str(r), text)


def matvec_float_block(em: HostEmitter, node: Node) -> list[str] | None:
    """W x for the block's rows: W stored transposed, rows padded to VEC; per column k, each row's x[k]
    times the column's weights added into that row's vector sums (the single-row kernel's sums, in its
    order: acc[i] += w[k][i] * x[k], k = 0, 1, ...)."""
    a_name, x_name = node.inputs
    g = em.graph
    if g.op(a_name) != "const" or g.op(x_name) in ("const", "sparse_const") or node.type.rank != 1 \
            or em.target.word_flash is not None:
        return None
    rows, cols = g.type(a_name).shape
    if rows < 4:  # the single-row C: one sum per row over k (the shared loop), row by row here too
        return None
    table, wide = padded_columns(em, f"{a_name}_tp", np.asarray(g.node(a_name).attrs["value"]).T,
                                 f"%{a_name}: {g.type(a_name)}, transposed, rows padded with zeros to {VEC}n "
                                 "(the batch kernel's)")
    out = em.var(node.name)
    x_k = em.at(x_name, "k")
    return vector_tiles(em, rows, wide, cols, table,
                        lambda v, r, t: (f"const float x{r} = {lane_text(x_k, r)};" if v == 0 else "")
                        + f" a{v}_{r} += {t} * x{r};",
                        lambda r: lane_text(out, r), em.prefetch_ahead(1, "k"))


def sqdist_float_block(em: HostEmitter, node: Node) -> list[str] | None:
    """||p - b_j||^2 for every prototype j (columns of the constant B, padded to VEC) and block row: per
    coordinate k, d = b_j[k] - p[k], sum += d * d: the single-row loop's sums, in its order."""
    x_name, m_name = node.inputs
    if em.graph.op(m_name) != "const" or em.target.word_flash is not None:
        return None
    k, m = em.graph.type(m_name).shape
    table, wide = padded_columns(em, f"{m_name}_p", np.asarray(em.graph.node(m_name).attrs["value"]),
                                 f"%{m_name}: {em.graph.type(m_name)}, columns padded with zeros to {VEC}n "
                                 "(the batch kernel's)")
    out = em.var(node.name)
    x_k = em.at(x_name, "k")
    vt = vector_type(em)
    return vector_tiles(em, m, wide, k, table,
                        lambda v, r, t: (f"const float x{r} = {lane_text(x_k, r)};" if v == 0 else "")
                        + f" {{ const {vt} d = {t} - x{r}; a{v}_{r} += d * d; }}",
                        lambda r: lane_text(out, r))


FIXED_DOT = re.compile(r"^        acc \+= \(int32_t\)(\w+\[[^\]]*\]) \* (.+);$")


def matvec_fixed_block(em: HostEmitter, node: Node) -> list[str] | None:
    """The shared integer mat-vec (``for i: acc = sum_k W[i][k] x[k]; <its epilogue>``) with the block's rows
    in one pass over row i of W: per k, W[i][k] times each row's x[k] into that row's sum (integer sums: the
    order changes nothing), then the shared epilogue row by row. Other forms: None (the per-row loop)."""
    lines = CEmitter.emit_node(em, node)  # the shared C, named per row (lane_r)
    if len(lines) < 5 or not re.match(r"^for \(int i = 0; i < \d+; \+\+i\) \{$", lines[0]) \
            or lines[1] != "    int32_t acc = 0;" or lines[-1] != "}" \
            or not re.match(r"^    for \(int k = 0; k < \d+; \+\+k\)$", lines[2]):
        return None
    dot = FIXED_DOT.match(lines[3])
    if dot is None or LANE in dot.group(1) or LANE not in dot.group(2):
        return None
    rows = int(re.match(r"^for \(int i = 0; i < (\d+);", lines[0]).group(1))
    epilogue = [ln[4:] for ln in lines[4:-1]]
    a_name = node.inputs[0]
    # a table of its own (W in column pairs): worth it where there are many outputs and columns to vectorise
    if (em.graph.op(a_name) == "const" and rows >= 2 * VEC and em.graph.type(a_name).shape[1] >= 4 * VEC
            and em.target.word_flash is None
            and em.graph.type(a_name).dtype.bits in (8, 16) and em.graph.type(node.inputs[1]).dtype.bits == 16):
        return _matvec_fixed_vectors(em, node, rows, dot.group(2), epilogue)

    def pass_over(first: str, count: int) -> list[str]:
        """Rows first .. first + count - 1 of W (count 1 or 2) for the block's rows, then their epilogues."""
        w_of = [re.sub(r"\bi\b", f"({first} + {h})", dot.group(1)) for h in range(count)]
        sums = ", ".join(f"a{h}_{r} = 0" for h in range(count) for r in range(BLOCK_ROWS))
        body = [f"    int32_t {sums};", lines[2] + " {",
                *(f"        const int32_t w{h} = (int32_t){w_of[h]};" for h in range(count))]
        for r in range(BLOCK_ROWS):
            x_r = lane_text(dot.group(2), r)
            body.append(f"        {{ const int32_t x{r} = {x_r}; "
                        + " ".join(f"a{h}_{r} += w{h} * x{r};" for h in range(count)) + " }")
        body.append("    }")
        for h in range(count):
            body += [f"    {{ /* row {first} + {h} of W */",
                     f"        const int32_t sums[{BLOCK_ROWS}] = {{"
                     + ", ".join(f"a{h}_{r}" for r in range(BLOCK_ROWS)) + "};",
                     f"        const int i = {first} + {h};", "        (void)i;",
                     *lanes([f"int32_t acc = sums[{LANE}];", *epilogue], "        "), "    }"]
        return body

    out = []  # (no prefetch here: a branch in the k loop keeps GCC from vectorising it, 3x slower)
    if rows >= 2:  # two rows of W per pass: each x[k] loaded feeds both
        out += [f"for (int i2 = 0; i2 < {rows // 2 * 2}; i2 += 2) {{", *pass_over("i2", 2), "}"]
    if rows % 2:
        out += ["{", *pass_over(str(rows - 1), 1), "}"]
    return out


def _matvec_fixed_vectors(em: HostEmitter, node: Node, rows: int, x_of: str, epilogue: list[str]) -> list[str]:
    """An int16 (or int8) x int16 mat-vec by a constant, VEC outputs of every block row at a time (8 int32 vector
    sums), the sums then through the shared epilogue row by row (integer sums: the single-row C's, in another
    order). W is stored transposed in pairs of columns (per pair of k and output i: W[i][k], W[i][k + 1]): one
    vector load gives both columns' weights of VEC outputs, split into even and odd lanes and widened, each
    multiplied by a row's broadcast x[k] or x[k + 1] (GCC/clang's vector extension); with AVX2 one vpmaddwd per
    weight vector and row (both columns' products summed, int32 wrap), with AVX-VNNI one vpdpwssd (the same sums
    added to the accumulator in the same instruction: equal modulo 2^32)."""
    a_name = node.inputs[0]
    g = em.graph
    cols = g.type(a_name).shape[1]
    W = np.asarray(g.node(a_name).attrs["value"]).astype(np.int64)
    wide, pairs = -(-rows // VEC) * VEC, -(-cols // 2)
    table = np.zeros((pairs, wide, 2), dtype=np.int64)
    table[:, :rows, 0] = W[:, 0::2].T
    table[:, :rows, 1][: (cols // 2)] = W[:, 1::2].T
    sym = em.add_const_array(em.sym(f"{a_name}_pairs"), table, "int16_t",
                             f"%{a_name}: {g.type(a_name)}, per pair of columns k, k + 1 and output i: W[i][k], "
                             f"W[i][k + 1]; outputs padded with zeros to {VEC}n (the batch kernel's)")
    simd_prelude(em)
    iv = em.sym(f"i32x{VEC}")
    em.helpers.setdefault(iv, f"typedef int32_t {iv} __attribute__((vector_size({4 * VEC})));\n")
    hv = em.sym(f"i16x{2 * VEC}")
    em.helpers.setdefault(hv, f"typedef int16_t {hv} __attribute__((vector_size({4 * VEC})));\n")
    sums = em.sym(f"{node.name}_block_sums")
    em.helpers.setdefault(sums, f"static int32_t {sums}[{BLOCK_ROWS}][{wide}];\n")

    def x_at(r: int, k: str) -> str:
        return lane_text(re.sub(r"\bk\b", f"({k})", x_of), r)

    def pair(r: int) -> str:
        """Row r's (x[2p], x[2p + 1]) as one int32 (x[2p + 1] 0 past the last column)."""
        second = f"(2 * p + 1 < {cols} ? {x_at(r, '2 * p + 1')} : 0)" if cols % 2 else x_at(r, "2 * p + 1")
        return f"(int32_t)((uint16_t){x_at(r, '2 * p')} | ((uint32_t)(uint16_t){second} << 16))"

    def tile(start: str, n_vec: int, block_rows: range) -> list[str]:
        """Outputs start .. start + VEC n_vec - 1 of the block rows ``block_rows``: per pair p, each row's x pair
        broadcast once for the n_vec weight vectors."""
        acc = [(v, r) for r in block_rows for v in range(n_vec)]
        second = (lambda r: f"2 * p + 1 < {cols} ? {x_at(r, '2 * p + 1')} : 0") if cols % 2 else \
            (lambda r: x_at(r, "2 * p + 1"))
        return [
            f"    {iv} {', '.join(f'a{v}_{r} = {{0}}' for v, r in acc)};",
            f"    for (int p = 0; p < {pairs}; ++p) {{", *prefetch,
            f"        const int16_t *wp = {sym} + ((long)p * {wide} + {start}) * 2;",
            *(line for v in range(n_vec) for line in (
                f"        {hv} t{v};", f"        __builtin_memcpy(&t{v}, wp + {2 * VEC * v}, sizeof t{v});",
                "#if !defined(__AVX2__)",
                f"        const {iv} lo{v} = __builtin_convertvector(__builtin_shufflevector(t{v}, t{v}, "
                + ", ".join(str(2 * j) for j in range(VEC)) + f"), {iv});",
                f"        const {iv} hi{v} = __builtin_convertvector(__builtin_shufflevector(t{v}, t{v}, "
                + ", ".join(str(2 * j + 1) for j in range(VEC)) + f"), {iv});",
                "#endif")),
            "#if defined(__AVXVNNI__)",  # vpdpwssd: both columns' products added to the sums in one instruction
            *(f"        {{ const __m256i u = _mm256_set1_epi32({pair(r)}); "
              + " ".join(f"a{v}_{r} = ({iv})_mm256_dpwssd_avx_epi32((__m256i)a{v}_{r}, u, (__m256i)t{v});"
                         for v in range(n_vec)) + " }"
              for r in block_rows),
            "#elif defined(__AVX2__)",  # vpmaddwd: both columns' products summed in one instruction (int32 wrap)
            *(f"        {{ const __m256i u = _mm256_set1_epi32({pair(r)}); "
              + " ".join(f"a{v}_{r} = ({iv})_mm256_add_epi32((__m256i)a{v}_{r}, _mm256_madd_epi16(u, (__m256i)t{v}));"
                         for v in range(n_vec)) + " }"
              for r in block_rows),
            "#else",
            *(f"        {{ const int32_t u = {x_at(r, '2 * p')}, v = {second(r)}; "
              + " ".join(f"a{v}_{r} += lo{v} * u + hi{v} * v;" for v in range(n_vec)) + " }"
              for r in block_rows),
            "#endif",
            "    }",
            *(f"    __builtin_memcpy(&{sums}[{r}][{start} + {VEC * v}], &a{v}_{r}, sizeof a{v}_{r});"
              for v, r in acc)]

    prefetch = em.prefetch_ahead(2, "p")  # a pair of columns per step: two lines of 8 float64 rows
    # FIXED_TILE_ROWS rows x FIXED_TILE_VECTORS vectors: each broadcast pair feeds that many vpmaddwd
    step = FIXED_TILE_VECTORS * VEC
    full = wide // step * step
    groups = [range(first, min(first + FIXED_TILE_ROWS, BLOCK_ROWS)) for first in range(0, BLOCK_ROWS, FIXED_TILE_ROWS)]
    out = []
    if full:
        out += [f"for (int j0 = 0; j0 < {full}; j0 += {step}) {{",
                *(line for g in groups for line in ("{", *tile("j0", FIXED_TILE_VECTORS, g), "}")), "}"]
    if wide > full:
        out += [line for g in groups for line in ("{", *tile(str(full), (wide - full) // VEC, g), "}")]
    out += [f"for (int i = 0; i < {rows}; ++i) {{",
            *lanes([f"int32_t acc = {sums}[{LANE}][i];", *epilogue], "    "), "}"]
    return out


SQDIST_LINES = (re.compile(r"^for \(int j = 0; j < (\d+); \+\+j\) \{$"), re.compile(r"^    int32_t acc = 0;$"),
                re.compile(r"^    for \(int k = 0; k < (\d+); \+\+k\) \{$"),
                re.compile(r"^        int32_t d = \(int32_t\)\w+\[j \* \d+ \+ k\] - (.+);$"),
                re.compile(r"^        acc \+= d \* d;$"), re.compile(r"^    \}$"))


def sqdist_fixed_block(em: HostEmitter, node: Node) -> list[str] | None:
    """The shared integer squared distances to constant prototypes (``for j: acc = sum_k (b_j[k] - p[k])^2;
    <its epilogue>``) with VEC prototypes of every block row at a time in int32 vectors (B stored (k, j), padded
    to whole vectors), then the shared epilogue row by row: the single-row C's integer sums, in another order.
    Other forms: None (the per-row loop)."""
    x_name, m_name = node.inputs
    g = em.graph
    if g.op(m_name) != "const" or em.target.word_flash is not None or g.type(m_name).dtype.bits > 16:
        return None
    lines = CEmitter.emit_node(em, node)
    if len(lines) < 8 or lines[-1] != "}" or not all(rx.match(ln) for rx, ln in zip(SQDIST_LINES, lines)):
        return None
    k, m = g.type(m_name).shape
    if (int(SQDIST_LINES[0].match(lines[0]).group(1)), int(SQDIST_LINES[2].match(lines[2]).group(1))) != (m, k):
        return None
    x_k = SQDIST_LINES[3].match(lines[3]).group(1)
    if LANE not in x_k:
        return None
    epilogue = [ln[4:] for ln in lines[6:-1]]
    wide = -(-m // VEC) * VEC
    table = np.zeros((k, wide), dtype=np.int64)
    table[:, :m] = np.asarray(g.node(m_name).attrs["value"]).astype(np.int64)
    sym = em.add_const_array(em.sym(f"{m_name}_p16"), table, "int16_t",
                             f"%{m_name}: {g.type(m_name)}, prototypes padded with zeros to {VEC}n "
                             "(the batch kernel's)")
    iv, hv = em.sym(f"i32x{VEC}"), em.sym(f"i16x{VEC}")
    em.helpers.setdefault(iv, f"typedef int32_t {iv} __attribute__((vector_size({4 * VEC})));\n")
    em.helpers.setdefault(hv, f"typedef int16_t {hv} __attribute__((vector_size({2 * VEC})));\n")
    sums = em.sym(f"{node.name}_block_sums")
    em.helpers.setdefault(sums, f"static int32_t {sums}[{BLOCK_ROWS}][{wide}];\n")
    rows = range(BLOCK_ROWS)
    return [f"for (int j0 = 0; j0 < {wide}; j0 += {VEC}) {{",
            f"    {iv} {', '.join(f'a{r} = {{0}}' for r in rows)};",
            f"    for (int k = 0; k < {k}; ++k) {{",
            f"        {hv} b16;", f"        __builtin_memcpy(&b16, {sym} + (long)k * {wide} + j0, sizeof b16);",
            f"        const {iv} b = __builtin_convertvector(b16, {iv});",
            *(f"        {{ const {iv} d = b - (int32_t){lane_text(x_k, r)}; a{r} += d * d; }}" for r in rows),
            "    }",
            *(f"    __builtin_memcpy(&{sums}[{r}][j0], &a{r}, sizeof a{r});" for r in rows),
            "}",
            f"for (int j = 0; j < {m}; ++j) {{",
            *lanes([f"int32_t acc = {sums}[{LANE}][j];", *epilogue], "    "), "}"]


TREE_LOOP = re.compile(r"^    for \(int t = 0; t < (\d+); \+\+t\) \{$")


def trees_block(em: HostEmitter, node: Node) -> list[str] | None:
    """The shared table walk (trees.ensemble_code) with the block's rows walking each tree in lock step:
    its lines rewritten where their form is the one expected, else None (the per-row loop)."""
    lines = CEmitter.emit_node(em, node)  # the shared C, named per row (lane_r)
    try:
        start = next(n for n, ln in enumerate(lines) if TREE_LOOP.match(ln))
        root_line, walk = lines[start + 1], lines[start + 2:start + 9]
        end = next(n for n in range(start + 9, len(lines)) if lines[n] == "    }")
    except StopIteration:
        return None
    m_root = re.match(r"^        (\w+) i = (.+);$", root_line)
    if not (m_root and walk[0] == "        while (i >= 0) {" and walk[5] == "        }"
            and walk[3].startswith("            i = (") and lines[1].lstrip().split()[1].startswith("acc[")
            and walk[6].startswith("        ") and " leaf = " in walk[6]):
        return None
    ref_type = m_root.group(1)
    acc_decl = lines[1]
    acc_ctype = acc_decl.split()[0]
    acc_size = acc_decl[acc_decl.index("[") + 1:acc_decl.index("]")]

    def per_row(text: str) -> str:
        return re.sub(r"\bacc\[", f"acc[{LANE}][", text)

    step = [ln.replace("[i]", "[j]") for ln in walk[1:5]]
    step[2] = step[2].replace("i = (", f"const {ref_type} next = (", 1)
    out = ["{", f"    {acc_ctype} acc[{BLOCK_ROWS}][{acc_size}];",
           *lanes([per_row(lines[2].strip())], "    ")]
    out += [ln for ln in lines[3:start] if "(void)" not in ln]
    out += [lines[start],
            f"        {ref_type} at[{BLOCK_ROWS}];",
            f"        for (int {LANE} = 0; {LANE} < {BLOCK_ROWS}; ++{LANE}) at[{LANE}] = {m_root.group(2)};",
            "        for (;;) { /* one level of every row's walk; a row at its leaf stays there */",
            "            int live = 0;",
            f"            for (int {LANE} = 0; {LANE} < {BLOCK_ROWS}; ++{LANE}) {{",
            f"                const {ref_type} i = at[{LANE}];",
            f"                const {ref_type} j = i < 0 ? 0 : i;",
            *("    " + ln for ln in step),
            f"                at[{LANE}] = i < 0 ? i : next;",
            f"                live |= at[{LANE}] >= 0;",
            "            }",
            "            if (!live)",
            "                break;",
            "        }",
            f"        for (int {LANE} = 0; {LANE} < {BLOCK_ROWS}; ++{LANE}) {{",
            f"            const {ref_type} i = at[{LANE}];",
            *("    " + per_row(ln) for ln in lines[start + 8:end]),
            "        }",
            "    }"]
    tail = lines[end + 1:-1]
    out += lanes([per_row(ln.strip()) for ln in tail], "    ")
    return out + ["}"]


def trees_level_block(em: HostEmitter, node: Node) -> list[str] | None:
    """Every tree walked level by level by the block's rows, branch-free (host/tree_block.py); else the
    lock-step table walk (trees_block)."""
    fixed_c = None if node.type.dtype.is_float else (rshift_c, saturate_c)
    lines = walk_block(em, node, BLOCK_ROWS, LANE, fixed_c)
    return lines if lines is not None else trees_block(em, node)


BLOCK_KERNELS = {("matvec", "float"): matvec_float_block, ("matvec", "fixed"): matvec_fixed_block,
                 ("sqdist", "float"): sqdist_float_block, ("sqdist", "fixed"): sqdist_fixed_block,
                 ("tree_ensemble", "float"): trees_level_block, ("tree_ensemble", "fixed"): trees_level_block}
