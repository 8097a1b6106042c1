"""A forest's leaf sums and their first maximum as straight-line Thumb-2 assembly (Cortex-M4/M33; int16 inputs,
vector leaves of ints): every decision node a halfword load, a compare with its threshold as an immediate and one
branch; every leaf its non-zero values added as immediates to sums held in registers; no table read.

A node goes left when x <= T. Where a missing value (the code M, the lowest int16) goes right the node reads a copy
of x with 1 subtracted from every feature, wrapping (M - 1 is the largest value), made on the stack once a call
(UADD16 of 0xffff to two features a word: LDM/STM where x is word-aligned, a word at a time where not), and tests
``x - 1 < T``: no extra instruction on the path. A child testing the feature its parent loaded from the same array
skips the load; a threshold that is no immediate takes one subtract more.

The sums, in one of two forms (the one predicted to run fewer instructions):

- **words**: each output's sum a 32-bit register (those added to most often; the rest stack slots), starting at
  the rounding half so that the op's result is ``sum >> shift`` (SSAT where it saturates), compared in place.
- **lanes**: where every leaf value is a multiple of g = 2^j >= 2^shift (no saturation, values >= 0) the sums' order is
  their rounded results' order, ties included (a sum above another is at least 2^shift above it), so sum / g
  is counted instead, packed in bit fields of registers as wide as its largest value: a leaf adds one immediate
  per register it touches (letter-26's 26 outputs of pure leaves: 4-bit vote counts, 4 registers).

Then the first maximum of the results is taken in registers and returned; the sums (the op's, without the bias)
are stored at acc where it is not null. Branches take the shortest form that reaches: the layout is computed here
(each instruction's width is written out), so the size is exact. Counts are predicted with each branch taken half
the time.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

X_REG, TMP = "r0", "r1"
POOL = ["r2", "r3", "r4", "r5", "r6", "r7", "r8", "r9", "r10", "r11", "r12", "lr"]
LOW = {f"r{i}" for i in range(8)}
STACK_LIMIT = 4000  # bytes of copy and slots: sp-relative loads reach 4095
INT16_MIN, INT16_MAX = -(2 ** 15), 2 ** 15 - 1
UPDATE_WEIGHT = 0.25  # predicted share of outputs that replace the maximum so far
INVERSE = {"gt": "le", "le": "gt", "ge": "lt", "lt": "ge", "eq": "ne", "ne": "eq", "hs": "lo", "lo": "hs",
           "hi": "ls", "ls": "hi"}
# branch forms: (bytes, the farthest backward and forward offset from the branch's address + 4)
COND_FORMS = [(2, -256, 254), (4, -1048576, 1048574), (6, -(2 ** 24), 2 ** 24 - 2)]
UNCOND_FORMS = [(2, -2048, 2046), (4, -(2 ** 24), 2 ** 24 - 2)]


def modified_immediate(v: int) -> bool:
    """Whether ``v`` (taken mod 2^32) is a Thumb-2 modified immediate: an 8-bit span of bits, or a byte repeated
    as 0x00XY00XY, 0xXY00XY00, 0xXYXYXYXY."""
    v &= 0xFFFFFFFF
    if v == 0:
        return True
    b = v & 0xFF
    if v in (b * 0x00010001, b * 0x01010101) or v == ((v >> 8) & 0xFF) * 0x01000100:
        return True
    low = (v & -v).bit_length() - 1
    return v >> low < 256


def add_constant(reg: str, v: int) -> list[tuple[str, int]]:
    """The fewest instructions adding ``v`` (mod 2^32) to ``reg``: (text, bytes) each."""
    v &= 0xFFFFFFFF
    if v == 0:
        return []
    best = None
    for op, u in (("add", v), ("sub", (-v) & 0xFFFFFFFF)):
        out = []
        if reg in LOW and u < 256:
            out = [(f"{op}s.n {reg}, #{u}", 2)]
        elif modified_immediate(u):
            out = [(f"{op}.w {reg}, {reg}, #{u}", 4)]
        elif u < 4096:
            out = [(f"{op}w {reg}, {reg}, #{u}", 4)]
        else:  # the low 12 bits, then 8-bit spans from the lowest set bit
            out = [(f"{op}w {reg}, {reg}, #{u & 0xFFF}", 4)] if u & 0xFFF else []
            rest = u & ~0xFFF
            while rest:
                low = (rest & -rest).bit_length() - 1
                part = rest & (0xFF << low)
                out.append((f"{op}.w {reg}, {reg}, #{part}", 4))
                rest &= ~part
        if best is None or len(out) < len(best) or (len(out) == len(best) and sum(s for _, s in out) <
                                                     sum(s for _, s in best)):
            best = out
    return best


def compare(u: int) -> tuple[list[tuple[str, int]], str, bool]:
    """Instructions comparing TMP with ``u`` (|u| < 2^16) for going left when TMP <= u: (them, the condition going
    right, whether TMP no longer holds the value it was loaded with)."""
    forms = [(u, "gt"), (u + 1, "ge")]
    for c, cond in forms:
        if 0 <= c < 256:
            return [(f"cmp.n {TMP}, #{c}", 2)], cond, False
        if modified_immediate(c) and c >= 0:
            return [(f"cmp.w {TMP}, #{c}", 4)], cond, False
        if c < 0 and modified_immediate(-c):
            return [(f"cmn.w {TMP}, #{-c}", 4)], cond, False
    if u >= 0:  # TMP - lo <= hi, hi = u & ~0xfff (4 bits at 12-15)
        lo, hi = u & 0xFFF, u & ~0xFFF
        return [(f"subw {TMP}, {TMP}, #{lo}", 4), (f"cmp.w {TMP}, #{hi}", 4)], "gt", True
    v = -u  # TMP + lo <= -hi
    lo, hi = v & 0xFFF, v & ~0xFFF
    return [(f"addw {TMP}, {TMP}, #{lo}", 4), (f"cmn.w {TMP}, #{hi}", 4) if hi else (f"cmp.n {TMP}, #0", 2)], "gt", True


@dataclass
class _Item:
    text: str = ""  # an instruction, or a label's name
    size: int = 0
    weight: float = 0.0  # predicted executions a call
    label: bool = False
    cond: str | None = None  # a branch: "" unconditional, else its condition
    target: str = ""
    form: int = 0  # index into COND_FORMS / UNCOND_FORMS


@dataclass
class _Program:
    name: str
    items: list[_Item] = field(default_factory=list)
    labels: int = 0
    weight: float = 1.0

    def new_label(self) -> str:
        self.labels += 1
        return f".L{self.name}_{self.labels}"

    def ins(self, text: str, size: int) -> None:
        self.items.append(_Item(text, size, self.weight))

    def many(self, ins: list[tuple[str, int]]) -> None:
        for text, size in ins:
            self.ins(text, size)

    def label(self, name: str) -> None:
        self.items.append(_Item(name, label=True))

    def branch(self, cond: str, target: str) -> None:
        self.items.append(_Item(weight=self.weight, cond=cond, target=target))

    def layout(self) -> tuple[list[str], int]:
        """The lines with each branch in its shortest form that reaches (forms only grow: it settles); the
        bytes."""
        items = [it for i, it in enumerate(self.items)  # a jump to the label right after it falls through
                 if not (it.cond == "" and i + 1 < len(self.items) and self.items[i + 1].label
                         and self.items[i + 1].text == it.target)]
        while True:
            at, pos = 0, {}
            for it in items:
                if it.label:
                    pos[it.text] = at
                it.address = at
                at += self._size(it)
            grown = False
            for it in items:
                if it.cond is None or it.label:
                    continue
                forms = UNCOND_FORMS if it.cond == "" else COND_FORMS
                offset = pos[it.target] - (it.address + 4)
                _, lo, hi = forms[it.form]
                if not lo <= offset <= hi:
                    it.form += 1
                    grown = True
            if not grown:
                break
        self.items = items
        lines = []
        for it in items:
            if it.label:
                lines.append(f"{it.text}:")
            elif it.cond is None:
                lines.append(it.text)
            elif it.cond == "":
                lines.append(f"b.{'nw'[it.form]} {it.target}")
            elif it.form < 2:
                lines.append(f"b{it.cond}.{'nw'[it.form]} {it.target}")
            else:  # beyond a conditional branch's reach: over an unconditional one
                skip = self.new_label()
                lines += [f"b{INVERSE[it.cond]}.n {skip}", f"b.w {it.target}", f"{skip}:"]
        return lines, at

    def _size(self, it: _Item) -> int:
        if it.label:
            return 0
        if it.cond is None:
            return it.size
        return (UNCOND_FORMS if it.cond == "" else COND_FORMS)[it.form][0]

    def predicted(self) -> float:
        return sum(it.weight for it in self.items if not it.label)


@dataclass
class _Sums:
    """Where each output's sum lives: ("reg", register, 0, 32), ("slot", sp offset, 0, 32), ("lane", register,
    position, width) or ("zero", ...) for an output no leaf adds to."""
    kind: str  # "words" or "lanes"
    where: list[tuple[str, str | int, int, int]]
    half: int  # the bias the words start at (0 for lanes)
    g: int  # lanes: the unit counted
    registers: list[str]  # the pool registers holding sums
    slots: int = 0


def _probabilities(layout) -> np.ndarray:
    """Each decision node's chance of being reached (each branch taken half the time)."""
    p = np.zeros(len(layout.feature))
    for r in layout.roots.tolist():
        if r >= 0:
            p[r] = 1.0
    for i in range(len(layout.feature)):  # preorder: parents first
        for child in (int(layout.left[i]), int(layout.right[i])):
            if child >= 0:
                p[child] = p[i] / 2
    return p


def _leaf_weights(layout) -> np.ndarray:
    """Each leaf row's expected uses a call."""
    p = _probabilities(layout)
    w = np.zeros(len(layout.leaves))
    for r in layout.roots.tolist():
        if r < 0:
            w[-1 - r] += 1.0
    for i in range(len(layout.feature)):
        for child in (int(layout.left[i]), int(layout.right[i])):
            if child < 0:
                w[-1 - child] += p[i] / 2
    return w


def _word_sums(leaves: np.ndarray, weights: np.ndarray, shift: int, saturation: int | None) -> _Sums:
    k = leaves.shape[1]
    adds = (weights[:, None] * (leaves != 0)).sum(axis=0)
    live = [c for c in range(k) if np.any(leaves[:, c])]
    n_regs = len(POOL) if len(live) <= len(POOL) else len(POOL) - 1  # one left to load slots into
    in_regs = sorted(live, key=lambda c: -adds[c])[:n_regs]
    where, slots = [], 0
    regs = iter(POOL)
    for c in range(k):
        if c not in live:
            where.append(("zero", "", 0, 0))
        elif c in in_regs:
            where.append(("reg", next(regs), 0, 32))
        else:
            where.append(("slot", 4 * slots, 0, 32))
            slots += 1
    half = 1 << (shift - 1) if shift > 0 else 0
    return _Sums("words", where, half, 1, [w[1] for w in where if w[0] == "reg"], slots)


def _lane_sums(leaves: np.ndarray, bounds: np.ndarray, shift: int, saturation: int | None) -> _Sums | None:
    if saturation is not None or np.any(leaves < 0):
        return None
    nz = leaves[leaves != 0]
    if not nz.size:
        return None
    g = int(np.gcd.reduce(nz.astype(np.int64)))
    g &= -g  # a power of two: the stored sums are lane << log2(g)
    if shift > 0 and g < 1 << shift:
        return None
    where, regs, reg, pos = [], [], None, 32
    for c in range(leaves.shape[1]):
        top = int(bounds[c]) // g
        if not np.any(leaves[:, c]):
            where.append(("zero", "", 0, 0))
            continue
        width = top.bit_length()
        if pos + width > 32:
            if len(regs) == len(POOL) - 1:  # one left for the maximum's scratch
                return None
            reg, pos = POOL[len(regs)], 0
            regs.append(reg)
        where.append(("lane", reg, pos, width))
        pos += width
    return _Sums("lanes", where, 0, g, regs)


@dataclass
class _Copy:
    """The stack copy of x - 1 (wrapping) over features' words [start, end) bytes of x, and a last halfword."""
    start: int
    end: int
    tail: int | None  # byte offset of a last feature copied alone (past the last whole word of x)

    @property
    def bytes(self) -> int:
        return self.end - self.start + (4 if self.tail is not None else 0)


def _copy_span(layout, input_dim: int) -> _Copy | None:
    right = np.flatnonzero(~layout.default_left.astype(bool))
    if not right.size:
        return None
    fmin, fmax = int(layout.feature[right].min()), int(layout.feature[right].max())
    start = (2 * fmin) & ~3
    end = min((2 * fmax + 2 + 3) & ~3, (2 * input_dim) & ~3)
    tail = 2 * fmax if 2 * fmax + 2 > end else None
    return _Copy(start, max(end, start), tail)


def _emit_copy(p: _Program, copy: _Copy, unaligned: str, copied: str) -> None:
    """The aligned path's LDM/UADD16/STM (the unaligned path is written out of line by _emit_copy_words)."""
    p.ins(f"tst.w {X_REG}, #3", 4)
    p.branch("ne", unaligned)
    words = (copy.end - copy.start) // 4
    if words:
        p.ins(f"add.w {TMP}, {X_REG}, #{copy.start}" if copy.start else f"mov.n {TMP}, {X_REG}", 4 if copy.start
              else 2)
        p.ins("mov.n ip, sp", 2)
        p.ins("mov.w lr, #-1", 4)
        regs = [f"r{i}" for i in range(2, 12)]
        done = 0
        while done < words:
            n = min(len(regs), words - done)
            reglist = regs[0] if n == 1 else f"{regs[0]}-{regs[n - 1]}"
            p.ins(f"ldmia.w {TMP}!, {{{reglist}}}", 4)
            for r in regs[:n]:
                p.ins(f"uadd16 {r}, {r}, lr", 4)
            p.ins(f"stmia.w ip!, {{{reglist}}}", 4)
            done += n
    _emit_tail(p, copy)
    p.label(copied)


def _emit_tail(p: _Program, copy: _Copy) -> None:
    if copy.tail is not None:
        p.ins(f"ldrh.w r2, [{X_REG}, #{copy.tail}]", 4)
        p.ins("subs.n r2, #1", 2)
        p.ins(f"strh.w r2, [sp, #{copy.tail - copy.start}]", 4)


def _emit_copy_words(p: _Program, copy: _Copy, unaligned: str, copied: str) -> None:
    p.label(unaligned)
    p.ins("mov.w lr, #-1", 4)
    for at in range(copy.start, copy.end, 4):
        p.ins(f"ldr.w r2, [{X_REG}, #{at}]", 4)
        p.ins("uadd16 r2, r2, lr", 4)
        p.ins(f"str.w r2, [sp, #{at - copy.start}]", 4)
    _emit_tail(p, copy)
    p.branch("", copied)


def _sp_access(op: str, reg: str, offset: int) -> tuple[str, int]:
    if reg in LOW and offset < 1024 and offset % 4 == 0:
        return f"{op}.n {reg}, [sp, #{offset}]", 2
    return f"{op}.w {reg}, [sp, #{offset}]", 4


def _leaf(p: _Program, sums: _Sums, row: np.ndarray, slot_base: int) -> None:
    if sums.kind == "lanes":
        per_reg: dict[str, int] = {}
        for c in np.flatnonzero(row).tolist():
            _, reg, pos, _ = sums.where[c]
            per_reg[reg] = per_reg.get(reg, 0) + (int(row[c]) // sums.g << pos)
        for reg, v in per_reg.items():
            p.many(add_constant(reg, v))
        return
    for c in np.flatnonzero(row).tolist():
        kind, reg, _, _ = sums.where[c]
        if kind == "reg":
            p.many(add_constant(reg, int(row[c])))
        else:
            off = slot_base + reg
            p.many([_sp_access("ldr", TMP, off), *add_constant(TMP, int(row[c])), _sp_access("str", TMP, off)])


def _tree(p: _Program, layout, ref: int, loaded, sums: _Sums, copy: _Copy | None, slot_base: int,
          end: str) -> None:
    """The code of the subtree at ``ref`` (``loaded``: (array, feature) TMP holds on entry); leaves jump to
    ``end``."""
    if ref < 0:
        _leaf(p, sums, layout.leaves[-1 - ref], slot_base)
        p.branch("", end)
        return
    f, t = int(layout.feature[ref]), int(layout.threshold[ref])
    left, right = int(layout.left[ref]), int(layout.right[ref])
    dl = bool(layout.default_left[ref])
    u = t if dl else t - 1  # missing going right: x - 1 <= T - 1 on the copy
    if u >= INT16_MAX:
        return _tree(p, layout, left, loaded, sums, copy, slot_base, end)
    if u < INT16_MIN:
        return _tree(p, layout, right, loaded, sums, copy, slot_base, end)
    src = "x" if dl else "copy"
    if loaded != (src, f):
        p.ins(f"ldrsh.w {TMP}, [{X_REG}, #{2 * f}]" if dl else f"ldrsh.w {TMP}, [sp, #{2 * f - copy.start}]", 4)
        loaded = (src, f)
    ins, cond, dirty = compare(u)
    p.many(ins)
    loaded = None if dirty else loaded
    right_label = p.new_label()
    p.branch(cond, right_label)
    weight = p.weight
    p.weight = weight / 2
    _tree(p, layout, left, loaded, sums, copy, slot_base, end)
    p.label(right_label)
    _tree(p, layout, right, loaded, sums, copy, slot_base, end)
    p.weight = weight


def _stores(p: _Program, sums: _Sums, slot_base: int, stored: str) -> None:
    """acc[c] = the op's sum of output c (TMP = acc; r0 free)."""
    for c, (kind, reg, pos, width) in enumerate(sums.where):
        if kind == "zero":
            p.ins("movs.n r0, #0", 2)
        elif kind == "lane":
            p.ins(f"ubfx r0, {reg}, #{pos}, #{width}" if pos + width < 32 else f"lsr.w r0, {reg}, #{pos}", 4)
            if sums.g > 1:
                p.ins(f"lsl.w r0, r0, #{sums.g.bit_length() - 1}", 4)
        else:
            if kind == "slot":
                p.many([_sp_access("ldr", "r0", slot_base + reg)])
                src = "r0"
            else:
                src = reg
            if sums.half:
                p.ins(f"sub.w r0, {src}, #{sums.half}", 4)
            elif src != "r0":
                p.ins(f"mov.n r0, {src}", 2)
        p.ins(f"str.w r0, [{TMP}, #{4 * c}]", 4)
    p.branch("", stored)


def _argmax(p: _Program, sums: _Sums, slot_base: int, shift: int, saturation: int | None) -> None:
    """r0 = the first maximum of the results (best so far in TMP)."""
    sh = shift if sums.kind == "words" and shift > 0 else 0
    spare = [r for r in POOL if r not in sums.registers]
    freed: list[str] = []

    def scratch() -> str:
        return spare[0] if spare else freed[0]

    def value_into(reg_out: str, c: int) -> None:
        """The result of output c into reg_out."""
        kind, reg, pos, width = sums.where[c]
        if kind == "zero":
            p.ins(f"mov.w {reg_out}, #0", 4)
            return
        if kind == "lane":
            p.ins(f"ubfx {reg_out}, {reg}, #{pos}, #{width}" if pos + width < 32 else f"lsr.w {reg_out}, {reg}, "
                  f"#{pos}", 4)
            return
        if kind == "slot":
            p.ins(*_sp_access("ldr", reg_out, slot_base + reg))
            reg = reg_out
        if saturation is not None:
            p.ins(f"ssat {reg_out}, #{saturation}, {reg}" + (f", asr #{sh}" if sh else ""), 4)
        elif sh:
            p.ins(f"asr.w {reg_out}, {reg}, #{sh}", 4)
        elif reg != reg_out:
            p.ins(f"mov.n {reg_out}, {reg}", 2)

    value_into(TMP, 0)
    p.ins("movs.n r0, #0", 2)
    if sums.where[0][0] == "reg":
        freed.append(sums.where[0][1])
    for c in range(1, len(sums.where)):
        kind, reg, pos, width = sums.where[c]
        skip = p.new_label()
        if kind == "reg" and saturation is None:
            p.ins(f"cmp.w {TMP}, {reg}, asr #{sh}" if sh else f"cmp.n {TMP}, {reg}", 4 if sh else 2)
            source = None
        elif kind == "lane" and pos + width == 32:
            p.ins(f"cmp.w {TMP}, {reg}, lsr #{pos}", 4)
            source = None
        elif kind == "zero":
            p.ins(f"cmp.n {TMP}, #0", 2)
            source = None
        else:
            source = scratch()
            value_into(source, c)
            p.ins(f"cmp.n {TMP}, {source}", 2)
        p.branch("ge", skip)
        weight = p.weight
        p.weight = weight * UPDATE_WEIGHT
        if source is None:
            value_into(TMP, c)
        else:
            p.ins(f"mov.n {TMP}, {source}", 2)
        p.ins(f"movs.n r0, #{c}", 2)
        p.weight = weight
        p.label(skip)


def applies(layout, n_outputs: int, input_dim: int, shift: int, saturation: int | None) -> bool:
    """Where the kernel computes the op: int16 x within a halfword load's reach, sums (rounding add included)
    within int32, a right shift (or none without saturation)."""
    if not len(layout.feature) or 2 * input_dim > 4094 or n_outputs > 255:
        return False
    if shift < 0 and saturation is not None:
        return False
    half = 1 << (shift - 1) if shift > 0 else 0
    n_trees = len(layout.roots)
    peak = int(np.abs(layout.leaves).max(initial=0))
    return n_trees * peak + half < 2 ** 31 and shift <= 31


def _program(name: str, layout, n_outputs: int, input_dim: int, sums: _Sums, shift: int,
             saturation: int | None) -> _Program | None:
    copy = _copy_span(layout, input_dim)
    copy_bytes = (copy.bytes + 3) & ~3 if copy is not None else 0
    frame = (copy_bytes + 4 * sums.slots + 7) & ~7
    if frame > STACK_LIMIT:
        return None
    slot_base = copy_bytes
    p = _Program(name)
    p.ins("push.w {r1, r4-r11, lr}", 4)  # acc at [sp, #frame]
    if frame:
        p.ins(f"sub sp, #{frame}" if frame < 512 else f"subw sp, sp, #{frame}", 2 if frame < 512 else 4)
    unaligned, copied = p.new_label(), p.new_label()
    if copy is not None:
        _emit_copy(p, copy, unaligned, copied)
    first = None
    for reg in sums.registers:  # the words start at the rounding half, lanes at 0
        if first is None:
            p.ins(f"mov.w {reg}, #{sums.half}", 4)
            first = reg
        else:
            p.ins(f"mov.n {reg}, {first}", 2)
    for kind, off, _, _ in sums.where:
        if kind == "slot":
            if first is None:
                p.ins(f"mov.w {TMP}, #{sums.half}", 4)
                first = TMP
            p.ins(*_sp_access("str", first, slot_base + off))
    n_trees = len(layout.roots)
    ends = [p.new_label() for _ in range(n_trees)]
    for t in range(n_trees):
        p.weight = 1.0
        _tree(p, layout, int(layout.roots[t]), None, sums, copy, slot_base, ends[t])
        p.label(ends[t])
    p.weight = 1.0
    store, stored = p.new_label(), p.new_label()
    p.ins(*_sp_access("ldr", TMP, frame))
    p.ins(f"cmp.n {TMP}, #0", 2)
    p.branch("ne", store)
    p.label(stored)
    _argmax(p, sums, slot_base, shift, saturation)
    if frame:
        p.ins(f"add sp, #{frame}" if frame < 512 else f"addw sp, sp, #{frame}", 2 if frame < 512 else 4)
    p.ins("pop.w {r1, r4-r11, pc}", 4)
    p.weight = 0.0  # out of line: the scores' stores, the copy of an unaligned x
    p.label(store)
    _stores(p, sums, slot_base, stored)
    if copy is not None:
        _emit_copy_words(p, copy, unaligned, copied)
    return p


def emit(name: str, layout, n_outputs: int, input_dim: int, bounds: np.ndarray, shift: int,
         saturation: int | None) -> tuple[list[str], int, float] | None:
    """The function's lines, bytes and predicted instructions a call: the sums' form predicted faster."""
    weights = _leaf_weights(layout)
    leaves = layout.leaves.astype(np.int64)
    best = None
    for sums in (_word_sums(leaves, weights, shift, saturation), _lane_sums(leaves, bounds, shift, saturation)):
        if sums is None:
            continue
        p = _program(name, layout, n_outputs, input_dim, sums, shift, saturation)
        if p is not None and (best is None or p.predicted() < best.predicted()):
            best = p
    if best is None:
        return None
    predicted = best.predicted()
    lines, size = best.layout()
    return lines, size, predicted


def source(lines: list[str], name: str) -> str:
    """The C text: the declaration and a file-scope asm statement in a section of its own (its symbol local to
    the object: the model's exported symbols are its API's)."""
    head = [f'.pushsection .text.{name},"ax",%progbits', ".p2align 2", ".syntax unified", ".thumb", ".thumb_func",
            f".type {name}, %function", f"{name}:"]
    tail = [f".size {name}, .-{name}", ".popsection"]
    body = "\n".join('    "' + line.replace('"', '\\"') + '\\n"' for line in head + lines + tail)
    return (f"int {name}(const int16_t *x, void *acc);\n"
            "/* the forest's sums in Thumb-2 assembly (tinycc_ml/arm/m4_forest.py) */\n"
            f"__asm__(\n{body}\n);\n")


def forest_asm(name: str, layout, n_outputs: int, input_dim: int, bounds, shift: int,
               saturation: int | None) -> tuple[str, int, float] | None:
    """CTarget.forest_asm for the Cortex-M4/M33: (the C text, bytes, predicted instructions) or None."""
    if not applies(layout, n_outputs, input_dim, shift, saturation):
        return None
    found = emit(name, layout, n_outputs, input_dim, np.asarray(bounds, dtype=np.int64), shift, saturation)
    if found is None:
        return None
    lines, size, predicted = found
    return source(lines, name), size, predicted

