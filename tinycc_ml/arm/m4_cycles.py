"""Cortex-M4 / M33 cycles from the executed instruction stream: the Technical Reference Manual's timings.

QEMU counts instructions; a Cortex-M4 spends one to fourteen cycles on one. This model prices each executed
instruction with the Cortex-M4 TRM (ARM DDI 0439, Table 3-1 "Processor instruction set summary", section
3.3.2 "Load/store timings", and the FPU chapter's instruction timings), at zero wait states unless told:

- data processing, multiplies (MUL/MLA/MLS and the 64-bit SMULL/UMULL/SMLAL/UMLAL), saturation, the DSP
  extension (SIMD, SMLAD/SMLALD, ...), extends, bit fields: 1 cycle; SDIV/UDIV 2 to 12 (early termination:
  modelled as growing with the quotient's bits, see ``_divide_cycles``);
- single loads 2 cycles; a load or store right after a single load is pipelined, one cycle less, unless its
  address needs the register that load wrote; ``STR Rx, [Ry, #imm]`` 1 cycle, a store with a register offset
  2 (1 pipelined after a load); a load or store whose address register the instruction just before it (data
  processing) wrote stalls one cycle (no forwarding path); LDRD/STRD 3, never pipelined; LDM/STM/PUSH/POP
  1 + N; a load into the PC (LDR PC, POP {.., pc}, LDM {.., pc}) and TBB/TBH block: + P with P = 3;
- branches: 1 cycle not taken, 1 + P taken. The TRM gives P as 1 to 3 "depending on the alignment and width
  of the target instruction, and whether the processor manages to speculate the address early": here 2 for a
  branch to an immediate target (speculated), 3 for a register target (BX, BLX, MOV/ADD PC), and one more when
  the target is a 32-bit instruction on a halfword boundary (two fetches), at most 3;
- FPU: VADD/VSUB/VMUL/VABS/VNEG/VCVT/VCMP/VMOV 1 (a VMOV of two core registers 2), VMLA/VMLS/VNMLA/VNMLS/VFMA/
  VFMS/VFNMA/VFNMS 3, VDIV/VSQRT 14, VLDR/VSTR 2, VLDM/VSTM/VPUSH/VPOP 1 + N, VMRS/VMSR 1.
- an instruction of an IT block whose condition fails still issues: 1 cycle;
- flash wait states W (``wait_states``, with the flash's address range): every read of data in flash costs W
  more, and every refill from flash (a taken branch) W more; sequential fetches are taken as hidden by the
  prefetch buffer, as on parts with a flash accelerator.

What it leaves out: the occasional cycle of ``LDR Rx, [PC, #imm]`` contending with the fetch unit ("might add a
cycle"), IT folding (IT costs its cycle), bus contention and interrupts. The counts are a model, not a
measurement: the TRM's own figures for short sequences are reproduced exactly (tests/backends/test_m4_cycles.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

DIRECT_REFILL = 2  # P for a taken branch to an immediate target
INDIRECT_REFILL = 3  # P for a register target, at most the TRM's 3
LOAD_PC_REFILL = 3  # "three cycles for the pipeline reload" (LDR PC, TBB/TBH)

_SINGLE_LOADS = {"ldr", "ldrb", "ldrh", "ldrsb", "ldrsh", "ldrt", "ldrbt", "ldrht", "ldrsbt", "ldrsht", "ldrex",
                 "ldrexb", "ldrexh", "pld", "pli", "pldw"}
_SINGLE_STORES = {"str", "strb", "strh", "strt", "strbt", "strht"}
_EXCLUSIVE_STORES = {"strex", "strexb", "strexh"}  # "treated more like an LDR"
_MULTIPLE = {"ldm", "ldmdb", "stm", "stmdb", "push", "pop"}
_DOUBLE = {"ldrd", "strd"}
_TABLE_BRANCH = {"tbb", "tbh"}
_DIRECT_BRANCH = {"b", "bl", "cbz", "cbnz"}
_INDIRECT_BRANCH = {"bx", "blx"}
_DIVIDE = {"sdiv", "udiv"}
_FP_THREE = {"vmla", "vmls", "vnmla", "vnmls", "vfma", "vfms", "vfnma", "vfnms"}
_FP_FOURTEEN = {"vdiv", "vsqrt"}
_FP_MEMORY_SINGLE = {"vldr", "vstr"}
_FP_MULTIPLE = {"vldmia", "vldmdb", "vstmia", "vstmdb", "vpush", "vpop"}


class CycleCount(NamedTuple):
    """A priced run: cycles and instructions per row, and cycles per call by function symbol."""

    cycles: np.ndarray
    instructions: np.ndarray
    per_function: dict


@dataclass(frozen=True)
class Insn:
    """One decoded instruction, as the model prices it."""

    address: int
    size: int
    name: str  # capstone's instruction name without condition or width suffixes ("ldr", "smlad", ...)
    kind: str  # "alu", "load", "store", "store_reg", "double", "multiple", "load_pc", "table", "branch",
    # "indirect", "divide", "fp", "fp_memory", "fp_multiple"
    base: int  # cycles before pipelining, stalls, refills and wait states
    writes: frozenset = field(default_factory=frozenset)  # register ids written
    address_regs: frozenset = field(default_factory=frozenset)  # registers the memory address is formed from
    divide_regs: tuple = ()  # (dividend, divisor) register ids of SDIV/UDIV

    @property
    def pipelines_next(self) -> bool:
        """Whether a load or store right after this one can overlap it (after single loads only)."""
        return self.kind == "load"


def _name(insn) -> str:
    from capstone import arm_const

    global _NAMES
    if _NAMES is None:
        _NAMES = {getattr(arm_const, n): n[8:].lower() for n in dir(arm_const) if n.startswith("ARM_INS_")}
    return _NAMES.get(insn.id, insn.mnemonic.split(".")[0])


_NAMES: dict | None = None


def classify(insn) -> Insn:
    """The model's view of one capstone instruction (``detail`` on)."""
    from capstone import arm_const

    name = _name(insn)
    reads, writes = insn.regs_access()
    pc = arm_const.ARM_REG_PC
    writes = frozenset(w for w in writes if w not in (arm_const.ARM_REG_ITSTATE,))
    mems = [o.mem for o in insn.operands if o.type == arm_const.ARM_OP_MEM]
    address_regs = frozenset(r for m in mems for r in (m.base, m.index) if r)
    if name in ("ldm", "ldmdb", "stm", "stmdb"):  # the base register is the first operand
        address_regs = frozenset([insn.operands[0].reg])
    regs_listed = sum(1 for o in insn.operands if o.type == arm_const.ARM_OP_REG)

    def make(kind: str, base: int, **kw) -> Insn:
        return Insn(insn.address, insn.size, name, kind, base, writes, address_regs, **kw)

    if name in _TABLE_BRANCH:
        return make("table", 2 + 1)
    if name in _SINGLE_LOADS or name in _EXCLUSIVE_STORES:
        if pc in writes:
            return make("load_pc", 2)
        return make("load", 2)
    if name in _SINGLE_STORES:
        indexed = any(m.index for m in mems)
        return make("store_reg" if indexed else "store", 2 if indexed else 1)
    if name in _DOUBLE:
        return make("double", 3)
    if name in _MULTIPLE:
        n = regs_listed - (1 if name in ("ldm", "ldmdb", "stm", "stmdb") else 0)
        if pc in writes:
            return make("load_pc", 1 + n)
        return make("multiple", 1 + n)
    if name in _DIRECT_BRANCH:
        return make("branch", 1)
    if name in _INDIRECT_BRANCH or (pc in writes and name in ("mov", "add")):
        return make("indirect", 1)
    if name in _DIVIDE:
        return make("divide", 2, divide_regs=(insn.operands[-2].reg, insn.operands[-1].reg))
    if name in _FP_FOURTEEN:
        return make("fp", 14)
    if name in _FP_THREE:
        return make("fp", 3)
    if name in _FP_MEMORY_SINGLE:
        return make("fp_memory", 2)
    if name in _FP_MULTIPLE:
        n = sum(1 for o in insn.operands if o.type == arm_const.ARM_OP_REG) - (0 if name in ("vpush", "vpop")
                                                                               else 1)
        return make("fp_multiple", 1 + n)
    if name == "vmov" and insn.op_count(arm_const.ARM_OP_REG) == 4:  # two core registers <-> two singles
        return make("fp", 2)
    if name.startswith("v"):
        return make("fp", 1)
    return make("alu", 1)


def _divide_cycles(dividend: int, divisor: int, signed: bool) -> int:
    """SDIV/UDIV: the TRM's 2 to 12 cycles, early termination modelled as 2 plus 10 cycles over the 32 bits a
    quotient can have (a divisor larger than the dividend, or zero, ends at 2)."""
    if signed:
        dividend = abs(dividend - (1 << 32) if dividend & 0x80000000 else dividend)
        divisor = abs(divisor - (1 << 32) if divisor & 0x80000000 else divisor)
    if divisor == 0 or divisor > dividend:
        return 2
    bits = dividend.bit_length() - divisor.bit_length() + 1
    return 2 + (bits * 10 + 31) // 32  # 1 quotient bit: 3 cycles; 32 bits: the TRM's 12


class CycleCounter:
    """Prices an executed instruction stream: ``step`` each instruction as it is about to run (its decoded
    ``Insn``, and for SDIV/UDIV the operand values), then ``finish``. A branch is priced when the next
    instruction shows whether it was taken."""

    def __init__(self, decode, wait_states: int = 0, flash: tuple[int, int] | None = None):
        self.decode = decode  # address -> Insn
        self.wait_states, self.flash = int(wait_states), flash
        self.cycles = self.instructions = 0
        self._prev: Insn | None = None  # the instruction priced last
        self._pending: Insn | None = None  # a branch (or PC write) waiting for the next address
        self._pending_cost = 0

    def _in_flash(self, address: int) -> bool:
        return self.flash is not None and self.flash[0] <= address < self.flash[1]

    def flash_reads(self, n: int) -> None:
        """``n`` data reads from flash by the instruction being priced (wait states)."""
        self.cycles += n * self.wait_states

    def _refill(self, insn: Insn, target: int) -> int:
        """P of a taken branch or PC write of ``insn`` to ``target``."""
        if insn.kind in ("load_pc", "table"):
            p = LOAD_PC_REFILL
        else:
            p = DIRECT_REFILL if insn.kind == "branch" else INDIRECT_REFILL
            if self.decode(target).size == 4 and target % 4 == 2:
                p = min(3, p + 1)
        if self._in_flash(target):
            p += self.wait_states
        return p

    def _skipped(self, start: int, end: int) -> None:
        """Instructions of an IT block whose condition failed, which the emulator does not report: each is
        issued and takes a cycle."""
        address = start
        while address < end:
            self.cycles += 1
            self.instructions += 1
            address += self.decode(address).size
        if address != end:
            raise ValueError(f"the instruction stream jumps from 0x{start:08x} to 0x{end:08x} with no branch")

    def step(self, address: int, operands: tuple[int, int] | None = None) -> None:
        if self._pending is not None:
            branch = self._pending
            taken = address != branch.address + branch.size
            self.cycles += self._pending_cost + (self._refill(branch, address) if taken else 0)
            self._pending = None
        elif self._prev is not None and address != self._prev.address + self._prev.size:
            self._skipped(self._prev.address + self._prev.size, address)
        insn = self.decode(address)
        self.instructions += 1
        cost = insn.base
        prev = self._prev
        if insn.kind in ("load", "store", "store_reg") and prev is not None:
            if prev.pipelines_next and not (prev.writes & insn.address_regs):
                cost = 1  # pipelined behind the load
            elif prev.kind == "alu" and prev.writes & insn.address_regs:
                cost += 1  # the address waits for the register bank
        elif insn.kind in ("double", "multiple", "fp_memory", "fp_multiple", "load_pc", "table") and prev is not None:
            if prev.kind == "alu" and prev.writes & insn.address_regs:
                cost += 1
        if insn.kind == "divide" and operands is not None:
            cost = _divide_cycles(*operands, signed=insn.name == "sdiv")
        self._prev = insn
        if insn.kind in ("branch", "indirect", "load_pc", "table"):
            self._pending, self._pending_cost = insn, cost
        else:
            self.cycles += cost

    def finish(self) -> int:
        """The cycles so far, a trailing branch priced as taken to somewhere else (the run ended on it); the
        next ``step`` starts a new run."""
        if self._pending is not None:
            branch = self._pending
            refill = {"branch": DIRECT_REFILL, "indirect": INDIRECT_REFILL}.get(branch.kind, LOAD_PC_REFILL)
            self.cycles += self._pending_cost + refill
            self._pending = None
        self._prev = None  # the next instruction stepped starts another run
        return self.cycles


class Decoder:
    """Decodes and classifies Thumb-2 instructions from a memory image, once per address."""

    def __init__(self, read):
        from capstone import CS_ARCH_ARM, CS_MODE_MCLASS, CS_MODE_THUMB, Cs

        self.read = read  # (address, size) -> bytes
        self.cs = Cs(CS_ARCH_ARM, CS_MODE_THUMB | CS_MODE_MCLASS)
        self.cs.detail = True
        self.cache: dict[int, Insn] = {}

    def __call__(self, address: int) -> Insn:
        insn = self.cache.get(address)
        if insn is None:
            decoded = next(self.cs.disasm(bytes(self.read(address, 4)), address, 1), None)
            if decoded is None:
                raise ValueError(f"no Thumb-2 instruction decodes at 0x{address:08x}")
            insn = self.cache[address] = classify(decoded)
        return insn


def straight_line_cycles(code: bytes, base: int = 0, wait_states: int = 0, flash=None) -> int:
    """Cycles of ``code`` run once from its first to its last instruction, no branch taken but a last one
    (a sequence to check against the TRM). Divides are priced at their shortest."""
    padded = code + bytes(4)
    decode = Decoder(lambda a, n: padded[a - base: a - base + n])
    counter = CycleCounter(decode, wait_states, flash)
    address = base
    while address < base + len(code):
        counter.step(address)
        address += decode(address).size
    return counter.finish()
