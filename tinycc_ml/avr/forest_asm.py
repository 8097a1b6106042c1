"""A forest's leaf sums as straight-line AVR assembly (int16 inputs, vector leaves of non-negative ints, up to 10
outputs): every decision node a compare with its threshold as immediates, every leaf its values added to
accumulators held in registers, no table read.

Registers: Y = x and Z = x + 64 (LDD reaches the first 64 features), r24:r25 the feature, r23 and r24 scratch.
Each output's sum is a 16-bit register pair plus a count of its carries out of 16 bits, a small field of r16-r18
(a carry is rare: at most a few a row), so the sum = field * 65536 + the pair, exactly the op's int32 sum (the
fields are wide enough for the largest sum the leaves allow). Where the fields do not fit r16-r18 (many trees:
20 of digits' pure leaves already carry up to 5 times), each output counts its carries in a byte of static RAM
instead, a call on the rare carry (12 cycles) to a counter of its own. A node goes left when x <= T: ``x < T + 1``
(signed) where a missing value (the code M, the lowest) goes left; where it goes right, ``x - 1 < T`` with x - 1
wrapping (M - 1 is the largest value); a child testing the feature its parent holds skips the loads. The
smaller subtree follows its node (the branch over it short more often); a leaf's code is emitted once per tree
and jumped to from its other parents; r0 holds the most common high byte of a pure leaf's value. Branches take
the shortest form that reaches: the layout is computed here, byte for byte, so the size is exact (the cost
model's flash). At the end the first maximum of the rounded (saturated) sums is taken in registers.
About 9-10 cycles a level and 4-6 cycles a leaf value (the stream walk with table leaves: about 35 and 30).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# the accumulator pairs (low, high) in the order outputs take them, and the carry registers
PAIRS = [(2, 3), (4, 5), (6, 7), (8, 9), (10, 11), (12, 13), (14, 15), (19, 20), (21, 22), (26, 27)]
CARRY_REGS = (16, 17, 18)
SAVED = [2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 28, 29]  # call-saved registers it uses
LDD_REACH = 128  # bytes of x reachable by LDD from Y and Z = x + 64
# cycles: a node (left; right one more through the long branch), a leaf value, a carry check, fixed per call
CYCLES = {"node": 9.5, "node_right_default": 2.0, "value": 5.0, "leaf": 2.0, "call": 160.0}


@dataclass
class _Ins:
    text: str  # the instruction (a jump's form and target come from the layout)
    size: int = 2  # bytes (short form for branches)
    target: str | None = None
    kind: str = ""  # "brge" / "brlt" conditional, "rjmp"


RAM_COUNTER = -2  # plan's register of an output whose carries are counted in a byte of RAM
COUNTERS_SPAN = 7 * 1024  # predicted bytes of trees between two copies of the RAM counters' code


def plan(n_outputs: int, bounds: np.ndarray, ram: bool = False) -> list[tuple[int, int, int]] | None:
    """Per output, (carry register, field shift, field width), register -1 where the sum never passes 16 bits;
    None where the fields do not fit r16-r18, or with ``ram``, (RAM_COUNTER, 0, 8) for every output that carries
    (a byte of RAM counts them: the sums stay below 2^24)."""
    if ram:
        fields = plan(n_outputs, bounds)
        if fields is not None or n_outputs > len(PAIRS):
            return fields
        return [(RAM_COUNTER, 0, 8) if int(b) >> 16 else (-1, 0, 0) for b in bounds.tolist()]
    fields, reg, used = [], 0, 0
    for b in bounds.tolist():
        carries = int(b) >> 16
        if not carries:
            fields.append((-1, 0, 0))
            continue
        width = int(carries).bit_length()
        if used + width > 8:
            reg, used = reg + 1, 0
        if reg >= len(CARRY_REGS) or width > 8:
            return None
        fields.append((CARRY_REGS[reg], used, width))
        used += width
    return fields if n_outputs <= len(PAIRS) else None


def applies(layout, n_outputs: int, input_dim: int, bounds: np.ndarray, shift: int, saturation: int | None) -> bool:
    """Where the kernel computes the op: int16 x within LDD's reach, non-negative leaves, sums (rounding add
    included) within the carry fields and 24 bits, a saturation (``saturation``: the result's bits) at a bit
    of the sums' top byte."""
    half = (1 << (shift - 1)) if shift > 0 else 0
    return ((saturation is None or saturation - 1 + shift >= 16) and n_outputs <= len(PAIRS)
            and 2 * input_dim <= LDD_REACH and bool(np.all(layout.leaves >= 0))
            and int(layout.leaves.max(initial=0)) <= 0x7FFF and int(bounds.max(initial=0)) + half < 1 << 24
            and 0 <= shift <= 23 and plan(n_outputs, bounds + half, ram=True) is not None)


def _x(offset: int, byte: int) -> str:
    at = offset + byte
    return f"Y+{at}" if at < 64 else f"Z+{at - 64}"


def emit(layout, n_outputs: int, shift: int, acc_bytes: int, bounds: np.ndarray, name: str,
         saturation: int | None = None) -> tuple[str, int, float]:
    """(the lines of the asm defining ``int name(const int16_t *x, void *acc)``, its bytes, predicted cycles of a
    row walking every tree to its deepest leaf): the sums stored at acc (``acc_bytes`` each, little-endian) unless
    acc is null, and the first maximum of the op's rounded results ``(sum + half) >> shift`` returned (the
    results saturate to ``saturation`` bits where given)."""
    fields = plan(n_outputs, bounds + ((1 << (shift - 1)) if shift > 0 else 0), ram=True)
    counters = f"{name}_carries"  # the RAM counters' bytes (where the fields do not fit r16-r18)
    m, top = -(2 ** 15), 2 ** 15 - 1
    items: list = []
    counter = [0]

    def fresh(stem: str) -> str:
        counter[0] += 1
        return f".L{name}_{stem}{counter[0]}"

    def ins(text, size=2, target=None, kind=""):
        items.append(_Ins(text, size, target, kind))

    # r0 holds the most common high byte of a leaf value whose low byte is 0 (a pure leaf's): one ADD adds it
    his = [int(v) >> 8 for v in layout.leaves.ravel().tolist() if v and not int(v) & 0xFF]
    r0 = max(set(his), key=lambda h: (his.count(h), -h)) if his else 0

    def leaf_code(row: np.ndarray) -> list[_Ins]:
        out = []
        for c in np.flatnonzero(row).tolist():
            v = int(row[c])
            lo, hi = PAIRS[c]
            if v & 0xFF:
                out += [_Ins(f"ldi r24, {v & 0xFF}"), _Ins(f"add r{lo}, r24")]
                out += ([_Ins(f"ldi r24, {v >> 8}"), _Ins(f"adc r{hi}, r24")] if v >> 8
                        else [_Ins(f"adc r{hi}, __zero_reg__")])
            elif v >> 8 == r0:
                out.append(_Ins(f"add r{hi}, r0"))
            else:
                out += [_Ins(f"ldi r24, {v >> 8}"), _Ins(f"add r{hi}, r24")]
            reg, shift, _ = fields[c]
            if reg >= 0:  # a carry out of 16 bits counts in the output's field
                out += [_Ins("brcc .+2"), _Ins(f"subi r{reg}, {(-(1 << shift)) & 0xFF}")]
            elif reg == RAM_COUNTER:  # or in its RAM counter (the counter's code clobbers r24: scratch here)
                out.append(_Ins("", 4, f".L{name}_carry{c}_", "brcc_call"))  # the nearest copy (_resolve)
        return out

    def leaf_cycles(row: int) -> float:
        return CYCLES["leaf"] + CYCLES["value"] * int(np.count_nonzero(layout.leaves[row]))

    sizes: dict[int, int] = {}

    def estimate(ref: int) -> int:
        """Bytes of the subtree's code, leaves unshared (orders the children: the smaller one falls through)."""
        if ref < 0:
            return 2 + sum(i.size for i in leaf_code(layout.leaves[-1 - ref]))
        if ref not in sizes:
            sizes[ref] = 14 + estimate(int(layout.left[ref])) + estimate(int(layout.right[ref]))
        return sizes[ref]

    def tree_code(root: int) -> float:
        """A tree's code (its leaves jump to its end); its worst-case cycles."""
        end = fresh("end")
        placed: dict[int, str] = {}  # leaf row -> its code's label in this tree

        def visit(ref: int, held) -> float:
            """The code of the subtree at ``ref``; its worst-case cycles. ``held``: (feature, minus one) that
            r24:r25 hold on entry (x or x - 1), or None."""
            if ref < 0:
                row = -1 - ref
                if row in placed:
                    ins("rjmp", target=placed[row], kind="rjmp")
                    return 2.0 + leaf_cycles(row)
                label = fresh("leaf")
                placed[row] = label
                items.append(("label", label))
                items.extend(leaf_code(layout.leaves[row]))
                ins("rjmp", target=end, kind="rjmp")
                return leaf_cycles(row)
            f, thr, dl = int(layout.feature[ref]), int(layout.threshold[ref]), bool(layout.default_left[ref])
            left, right = int(layout.left[ref]), int(layout.right[ref])
            if dl and thr >= top:  # every input goes left
                return visit(left, held)
            if not dl and thr <= m:  # only the missing code is <= M, and it goes right
                return visit(right, held)
            off, cost = 2 * f, CYCLES["node"]
            if held != (f, not dl):
                if held != (f, False):
                    ins(f"ldd r24, {_x(off, 0)}")
                    ins(f"ldd r25, {_x(off, 1)}")
                else:
                    cost -= 4
                if not dl:  # x - 1 (wrapping) < T: the missing code goes right
                    ins("subi r24, 1")
                    ins("sbci r25, 0")
                    cost += CYCLES["node_right_default"]
            else:
                cost -= 4
            k = thr + 1 if dl else thr  # x <= T  <=>  x < T + 1 (T < top)
            ins(f"cpi r24, {k & 0xFF}")
            if (k >> 8) & 0xFF:
                ins(f"ldi r23, {(k >> 8) & 0xFF}")
                ins("cpc r25, r23")
            else:
                ins("cpc r25, __zero_reg__")
            here = (f, not dl)
            # the branch goes to a leaf already placed, else past the smaller subtree (in BR's reach more often)
            placed_left, placed_right = (c < 0 and (-1 - c) in placed for c in (left, right))
            jump_right = placed_right or (not placed_left and estimate(left) <= estimate(right))
            near, far = (left, right) if jump_right else (right, left)
            direct = far < 0 and (-1 - far) in placed
            label = placed[-1 - far] if direct else fresh("n")
            branch = "brge" if jump_right else "brlt"
            ins(branch, target=label, kind=branch)
            a = visit(near, here)
            if direct:
                return cost + max(a, leaf_cycles(-1 - far))
            items.append(("label", label))
            return cost + max(a, visit(far, here))

        cycles = visit(root, None)
        items.append(("label", end))
        return cycles

    ram_outputs = [c for c in range(n_outputs) if fields[c][0] == RAM_COUNTER]

    def counters_code(at: int) -> None:
        """Copy ``at`` of each output's carry counter (jumped over): called on a carry, r24 its scratch."""
        start = fresh("trees")
        ins("rjmp", target=start, kind="rjmp")
        for c in ram_outputs:
            items.append(("label", f".L{name}_carry{c}_{at}"))
            items.extend([_Ins(f"lds r24, {counters}+{c}", 4), _Ins("subi r24, 0xFF"),
                          _Ins(f"sts {counters}+{c}, r24", 4), _Ins("ret")])
        items.append(("label", start))

    roots = [int(root) for root in layout.roots.tolist()]
    # a copy of the counters' code in the middle of every COUNTERS_SPAN of trees (an RCALL reaches 4 KB either way;
    # predicted sizes), each call to the nearest (_resolve)
    starts = np.concatenate([[0], np.cumsum([estimate(r) for r in roots] if ram_outputs else np.zeros(len(roots)))])
    segments = [0]  # the first tree of each run of trees within COUNTERS_SPAN
    for t in range(len(roots)):
        if t and starts[t + 1] - starts[segments[-1]] > COUNTERS_SPAN:
            segments.append(t)
    copies = set()  # before the tree in the middle of each run
    for a, b in zip(segments, [*segments[1:], len(roots)]):
        copies.add(min(range(a, b), key=lambda t: abs(starts[t] - (starts[a] + starts[b]) / 2)))
    worst = 0.0
    for t, root in enumerate(roots):
        if ram_outputs and t in copies:
            counters_code(t)
        worst += tree_code(root)
    body = _resolve(items)
    size = sum(i.size for i in items if isinstance(i, _Ins))
    pro = _prologue(n_outputs, fields, r0, counters)
    epi = _epilogue(n_outputs, acc_bytes, fields, shift, saturation, counters)
    size += sum(_bytes(line) for line in pro + epi)
    lines = [f".section .text.{name},\"ax\",@progbits", f".type {name}, @function", f"{name}:",
             *pro, *body, *epi, f".size {name}, .-{name}"]
    if ram_outputs:
        lines.append(f".lcomm {counters}, {n_outputs}")
    return lines, size, worst + CYCLES["call"] + 4 * n_outputs


def _bytes(line: str) -> int:
    """The size of a prologue's or epilogue's line (a label: none; LDS, STS: two words)."""
    if line.endswith(":"):
        return 0
    return 4 if line.split()[0] in ("lds", "sts", "call", "jmp") else 2


def _resolve(items: list) -> list[str]:
    """Branch forms by the layout, each the shortest that reaches: a conditional branch 63 words (else it skips
    an RJMP, 2K words, else a JMP), an RJMP (else a JMP), a call on a carry (BRCC over an RCALL, else over a
    CALL); a jump to the next instruction is dropped."""
    keep = []
    for i, it in enumerate(items):
        if isinstance(it, _Ins) and it.kind == "rjmp":
            j = i + 1
            while j < len(items) and isinstance(items[j], tuple) and items[j][1] != it.target:
                j += 1
            if j < len(items) and isinstance(items[j], tuple):
                continue
        keep.append(it)
    items[:] = keep
    sizes = {"rjmp": (2, 4), "brge": (2, 4, 6), "brlt": (2, 4, 6), "brcc_call": (4, 6)}
    while True:  # sizes only grow, so this ends
        pos, at, copies = 0, {}, {}
        for it in items:
            if isinstance(it, tuple):
                at[it[1]] = pos
                copies.setdefault(it[1].rsplit("_", 1)[0] + "_", []).append(it[1])
            else:
                pos += it.size
        pos = 0
        for it in items:  # a call on a carry: to the copy of its counter's code nearest it
            if isinstance(it, _Ins) and it.kind == "brcc_call":
                it.text = min(copies[it.target], key=lambda label: abs(at[label] - pos))
            pos += 0 if isinstance(it, tuple) else it.size
        grown, pos = [], 0  # every form from this pass's positions (a size grown mid-pass would shift them)
        for it in items:
            if isinstance(it, tuple):
                continue
            if it.kind in sizes:
                target = it.text if it.kind == "brcc_call" else it.target
                size = sizes[it.kind][_form(it.kind, at[target] - pos)]
                if size > it.size:
                    grown.append((it, size))
            pos += it.size
        if not grown:
            break
        for it, size in grown:
            it.size = size
    pos, out = 0, []
    for it in items:
        if isinstance(it, tuple):
            out.append(f"{it[1]}:")
            continue
        if it.kind == "rjmp":
            out.append(f"{'rjmp' if it.size == 2 else 'jmp'} {it.target}")
        elif it.kind == "brcc_call":
            out += ["brcc .+2", f"rcall {it.text}"] if it.size == 4 else ["brcc .+4", f"call {it.text}"]
        elif it.kind in sizes:
            inverse = {"brge": "brlt", "brlt": "brge"}[it.kind]
            out += {2: [f"{it.kind} {it.target}"], 4: [f"{inverse} .+2", f"rjmp {it.target}"],
                    6: [f"{inverse} .+4", f"jmp {it.target}"]}[it.size]
        else:
            out.append(it.text)
        pos += it.size
    return out


def _form(kind: str, distance: int) -> int:
    """0: the short form reaches ``distance`` bytes from the instruction, 1: through an RJMP, 2: a JMP (a call on
    a carry: 0 an RCALL after the BRCC, 1 a CALL)."""
    if kind == "brcc_call":
        return 0 if -2048 <= (distance - 4) // 2 <= 2047 else 1
    if kind != "rjmp" and -64 <= (distance - 2) // 2 <= 63:
        return 0
    if -2048 <= (distance - (2 if kind == "rjmp" else 4)) // 2 <= 2047:
        return 0 if kind == "rjmp" else 1
    return 1 if kind == "rjmp" else 2


def _prologue(k: int, fields, r0: int, counters: str) -> list[str]:
    lines = [f"push r{r}" for r in SAVED]
    lines += ["push r22", "push r23"]  # acc, stored at the end
    lines += ["movw r28, r24", "movw r30, r24", "adiw r30, 63", "adiw r30, 1", f"ldi r24, {r0}", "mov r0, r24"]
    for c in range(k):
        lines += [f"clr r{PAIRS[c][0]}", f"clr r{PAIRS[c][1]}"]
    for reg in sorted({f[0] for f in fields if f[0] >= 0}):
        lines.append(f"clr r{reg}")
    lines += [f"sts {counters}+{c}, __zero_reg__" for c in range(k) if fields[c][0] == RAM_COUNTER]
    return lines


def _epilogue(k: int, acc_bytes: int, fields, shift: int, saturation: int | None, counters: str) -> list[str]:
    """Each sum stored (where acc is not null: predict needs none), then the first maximum of the rounded sums
    ((sum + half) >> shift: compared with the shifted-out bits cleared; saturated: a sum at or past bit
    p = saturation - 1 + shift, in the top byte, is the largest result's) returned in r24."""
    lines = ["pop r31", "pop r30", "sbiw r30, 0", "brne .+2", "rjmp 1f"]

    def field(c: int, to: int) -> list[str]:
        reg, at, width = fields[c]
        if reg == RAM_COUNTER:
            return [f"lds r{to}, {counters}+{c}"]
        if reg < 0:
            return [f"clr r{to}"]
        out = [f"mov r{to}, r{reg}"] + ([f"swap r{to}"] if at >= 4 else [])
        return out + [f"lsr r{to}"] * (at - 4 if at >= 4 else at) + [f"andi r{to}, {(1 << width) - 1}"]

    for c in range(k):
        lo, hi = PAIRS[c]
        lines += [f"st Z+, r{lo}", f"st Z+, r{hi}"]
        if acc_bytes > 2:
            lines += [*field(c, 24), "st Z+, r24"] + ["st Z+, __zero_reg__"] * (acc_bytes - 3)
    lines.append("1:")
    half = (1 << (shift - 1)) if shift > 0 else 0
    for c in range(k):  # the candidate in r23:r24:r25, the best so far in r28:r29:r30, its output in r31
        lo, hi = PAIRS[c]
        lines += [f"mov r23, r{lo}", f"mov r24, r{hi}", *field(c, 25)]
        if half:
            lines += [f"subi r23, {-half & 0xFF}", f"sbci r24, {(-half >> 8) & 0xFF}",
                      f"sbci r25, {(-half >> 16) & 0xFF}"]
        for byte, reg in enumerate((23, 24, 25)):
            kept = ((0xFFFFFF >> max(shift, 0)) << max(shift, 0)) >> (8 * byte) & 0xFF
            if kept == 0:
                lines.append(f"clr r{reg}")
            elif kept != 0xFF:
                lines.append(f"andi r{reg}, {kept}")
        top = saturation - 1 + shift if saturation else 24
        if top < 24:
            cap = ((1 << (saturation - 1)) - 1) << shift
            lines += [f"cpi r25, {1 << (top - 16)}", "brlo 3f", f"ldi r23, {cap & 0xFF}",
                      f"ldi r24, {(cap >> 8) & 0xFF}", f"ldi r25, {cap >> 16}", "3:"]
        if c:  # a later output only where its rounded sum is larger: the first maximum wins
            lines += ["cp r28, r23", "cpc r29, r24", "cpc r30, r25", "brsh 2f"]
        lines += ["mov r28, r23", "mov r29, r24", "mov r30, r25", f"ldi r31, {c}"]
        if c:
            lines.append("2:")
    lines += ["mov r24, r31", "clr r25"]
    lines += [f"pop r{r}" for r in reversed(SAVED)]
    lines.append("ret")
    return lines


def source(lines: list[str], name: str) -> str:
    """The C text: the declaration and a file-scope asm statement (its symbol local to the object: the
    model's exported symbols are its API's)."""
    body = "\n".join('    "' + line.replace('"', '\\"') + '\\n"' for line in lines)
    return (f"int {name}(const int16_t *x, void *acc);\n"
            "/* the forest's sums in AVR assembly (tinycc_ml/avr/forest_asm.py) */\n"
            f"__asm__(\n{body}\n    \".text\\n\");\n")
