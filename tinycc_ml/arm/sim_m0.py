"""Cortex-M0 (nRF51822) runs: QEMU -M microbit (default when installed) or unicorn (see simulate.py).

The QEMU firmware path serves every Cortex-M board of a ``Board`` (sim_m4.py: the MPS2 AN386): the same
harness protocol (support/tcm_arm_harness.h), a board timer at the chip's clock under -icount shift=10."""

from __future__ import annotations

import os
import re
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from tinycc_ml.arm import m4_cycles
from tinycc_ml.arm.chips import NRF51822
from tinycc_ml.target import (
    DEFAULT_MAX_CYCLES,
    INPUT_DTYPES,
    SCORE_DTYPES,
    BuildSpec,
    Chip,
    CompileError,
    FirmwareSizes,
    TargetRun,
    ToolchainError,
    compile_objects,
    find_tool,
    have_qemu,
    have_unicorn,
    linked_once,
    model_symbol_sizes,
    run_tool,
    support_file,
    wait_all,
)

HARNESS_SOURCES = ("tcm_m0_harness.c", "tcm_m0_startup.c")
LINKER_SCRIPT = "tcm_nrf51.ld"
FLASH_BASE, FLASH_SIZE = NRF51822.flash_base, NRF51822.flash
RAM_BASE, RAM_SIZE = NRF51822.ram_base, NRF51822.ram
INPUT_BUDGET = 128 * 1024  # bytes of inputs per QEMU firmware image
ONE_BATCH_ROWS = 512  # rows run as one QEMU process (more are split between the cores)
PAINT = 0xC5A5C5A5
QEMU_INSTR_PER_SECOND = 20e6  # conservative, for wall-clock timeouts
MIN_WATCHDOG_INSTR = 100_000
STUB_STACK = 16  # the timing stub's push {r4-r6, lr}, not the model's
NS_PER_INSTRUCTION = 1024  # -icount shift=10


@dataclass(frozen=True)
class Board:
    """A Cortex-M board the measurement firmware runs on in QEMU: the harness (a board file including
    support/tcm_arm_harness.h, whose timer runs at ``chip.clock_hz``) and the memory map."""

    target: str  # the simulator's name (TargetRun.target)
    chip: Chip
    machine: str  # qemu-system-arm -M
    harness: tuple[str, ...]  # support files compiled into the firmware
    linker_script: str
    label: str  # in messages
    unicorn_cpu: str = "UC_CPU_ARM_CORTEX_M0"  # unicorn.arm_const name of the core (per-function profiles)
    defines: tuple[str, ...] = ()  # -D flags of the harness files (the board's timer)

    def instructions(self, ticks: int) -> int:
        """Timer ticks -> instructions (nearest: under icount a tick is a fraction of one)."""
        per = self.chip.clock_hz * NS_PER_INSTRUCTION
        return (2 * ticks * 10**9 + per) // (2 * per)

    def ticks(self, instructions: int) -> int:
        return -(-instructions * self.chip.clock_hz * NS_PER_INSTRUCTION // 10**9)


NRF51 = Board("cortex-m0", NRF51822, "microbit", HARNESS_SOURCES, LINKER_SCRIPT, "M0")


INPUT_BYTES = {ctype: dt.itemsize for ctype, dt in INPUT_DTYPES.items()}


@dataclass
class M0Build:
    elf: str
    sizes: FirmwareSizes | None


class _Objects:
    """Model and harness objects compiled once, linked with one input image per batch."""

    def __init__(self, spec: BuildSpec, work: str, max_instr: int | None = None, board: Board = NRF51):
        self.spec, self.work, self.board = spec, work, board
        self.chip = spec.chip or board.chip  # the backend's flags when it passed its chip
        self.cc = find_tool("arm-none-eabi-gcc")
        defines = list(board.defines)
        if max_instr is not None:
            # QEMU watchdog in timer ticks; at least room for the harness's stack painting
            ticks = min(0xFFFFFFFF, board.ticks(max(int(max_instr), MIN_WATCHDOG_INSTR)))
            defines.append(f"-DTCM_MAX_TICKS={ticks}u")
        self.model_objs, self.harness_objs = compile_objects(
            self.cc, self.chip.cflags, spec, [support_file(s) for s in board.harness], work, defines)

    def link(self, x: np.ndarray | None, tag: str, sizes: bool = True) -> M0Build:
        """Firmware with inputs ``x`` embedded; ``sizes=False`` skips measuring it (``sizes`` is then None)."""
        src = os.path.join(self.work, f"inputs_{tag}.c")
        binf = os.path.join(self.work, f"inputs_{tag}.bin")
        n = 0 if x is None else x.shape[0]
        with open(binf, "wb") as f:
            f.write(b"\0\0\0\0" if x is None else x.tobytes())
        # .incbin: a C array literal of 128 KB takes the compiler a good fraction of a second
        with open(src, "w") as f:
            f.write("#include <stdint.h>\n"
                    f"const uint32_t tcm_n_inputs = {n}u;\n"
                    '__asm__(".section .rodata.tcm_inputs,\\"a\\",%progbits\\n"\n'
                    '        ".balign 4\\n.global tcm_inputs\\ntcm_inputs:\\n"\n'
                    f'        ".incbin \\"{binf}\\"\\n.text\\n");\n')
        obj = src[:-2] + ".o"
        board = self.board
        run_tool([self.cc, *self.chip.cflags, "-c", src, "-o", obj], f"compiling the {board.label} input image")
        elf = os.path.join(self.work, f"fw_{board.label.lower()}_{tag}.elf")
        script = support_file(board.linker_script)  # it may INCLUDE a file next to it
        run_tool([self.cc, *self.chip.ldflags, "-T", script, f"-L{os.path.dirname(script)}", *self.spec.extra_cflags,
                  *self.harness_objs, *self.model_objs, obj, "-o", elf, "-lm"], f"linking the {board.label} firmware")
        if not sizes:
            return M0Build(elf, None)
        flash, ram = arm_size(elf)
        mflash, mram = model_symbol_sizes(find_tool("arm-none-eabi-nm"), self.model_objs, elf)
        return M0Build(elf, FirmwareSizes(flash, ram, mflash, mram))


def arm_size(elf: str) -> tuple[int, int]:
    """(flash, ram) = (text + data, data + bss) from Berkeley arm-none-eabi-size."""
    out = run_tool([find_tool("arm-none-eabi-size"), elf], "arm-none-eabi-size").stdout.decode()
    lines = out.strip().splitlines()
    try:
        text, data, bss = (int(v) for v in lines[1].split()[:3])
    except (IndexError, ValueError) as exc:
        raise ToolchainError(f"cannot parse arm-none-eabi-size output:\n{out}") from exc
    return text + data, data + bss


def build(spec: BuildSpec, work: str, board: Board = NRF51) -> M0Build:
    """Firmware with no inputs embedded: its size is the model plus the harness."""
    return _Objects(spec, work, DEFAULT_MAX_CYCLES, board).link(None, "sizes")


def firmware_sizes(objs: _Objects) -> FirmwareSizes:
    """The sizes of ``objs``' firmware without inputs (linked once per process for the same objects)."""
    board = objs.board
    parts = [board.label, objs.cc, *objs.chip.ldflags, *objs.spec.extra_cflags, board.linker_script]
    return linked_once([*objs.harness_objs, *objs.model_objs], parts, lambda: objs.link(None, "sizes").sizes)


def require(method: str = "auto") -> None:
    """ToolchainError naming what is missing to build and run Cortex-M0 firmware with ``method``."""
    if method not in ("auto", "unicorn", "qemu"):
        raise CompileError(f"unknown Cortex-M0 method {method!r}; use auto, unicorn or qemu")
    for tool in ("arm-none-eabi-gcc", "arm-none-eabi-size", "arm-none-eabi-nm"):
        find_tool(tool)
    if method == "qemu" or (method == "auto" and not have_unicorn()):
        find_tool("qemu-system-arm")
    elif method == "unicorn" and not have_unicorn():
        raise ToolchainError("the unicorn and pyelftools Python packages are missing; "
                             "install them with: pip install 'tinycc-ml[unicorn]'")


def run(spec: BuildSpec, x: np.ndarray, method: str, max_instr: int, timeout: float | None) -> TargetRun:
    require(method)
    if method == "auto":
        # QEMU runs a whole batch in one process: faster than unicorn's Python block hook
        method = "qemu" if have_qemu() or not have_unicorn() else "unicorn"
    with tempfile.TemporaryDirectory(prefix="tinycc-ml-m0-") as work:
        objs = _Objects(spec, work, max_instr)
        if method == "unicorn":
            return _run_unicorn(objs, spec, x, max_instr, timeout)
        return _run_qemu(objs, spec, x, max_instr, timeout)


# ---------------------------------------------------------------- QEMU

def qemu_command(board: Board, elf: str) -> list[str]:
    """qemu-system-arm running ``elf`` on ``board``, semihosting output on stdout."""
    return [find_tool("qemu-system-arm"), "-M", board.machine, "-display", "none", "-monitor", "none",
            "-serial", "null", "-chardev", "stdio,id=sh", "-semihosting-config", "enable=on,target=native,chardev=sh",
            "-icount", "shift=10", "-kernel", elf]


def _qemu_batch(objs: _Objects, spec: BuildSpec, xb: np.ndarray, tag: str, max_instr: int,
                timeout: float | None):
    """Link one firmware image holding inputs xb, run it; (predictions, scores, instructions, stack)."""
    board = objs.board
    sdt = SCORE_DTYPES[spec.score_ctype]
    fw = objs.link(xb, tag, sizes=False)  # the sizes come from the firmware without inputs
    limit = timeout if timeout is not None else 30 + 2 * len(xb) * max_instr / QEMU_INSTR_PER_SECOND
    proc = run_tool(qemu_command(board, fw.elf), f"simulating the {board.label} firmware (QEMU)",
                    timeout=limit, check=False)
    out = proc.stdout.decode(errors="replace")
    m = re.search(r"^C([0-9a-f]{16})$", out, re.M)
    if "TCM-HANG" in out:
        raise ToolchainError(f"a call of {spec.prefix} ran over {max_instr} instructions under QEMU: hang?")
    if "TCM-FAULT" in out:
        raise ToolchainError(f"{spec.prefix} faulted (HardFault) under QEMU")
    if proc.returncode != 0 or m is None:
        err = proc.stderr.decode(errors="replace")
        raise ToolchainError(f"QEMU run of the {board.label} firmware failed (exit {proc.returncode}):\n"
                             f"{err[-500:]}{out[-500:]}")
    c0, c1 = np.frombuffer(bytes.fromhex(m.group(1)), "<u4")
    calib = board.instructions(int(c1) - int(c0))
    rows = re.findall(r"^R([0-9a-f]+)$", out, re.M)
    if len(rows) != len(xb):
        raise ToolchainError(f"QEMU run ended early: {len(rows)} of {len(xb)} results\n{out[-500:]}")
    preds, scores, instrs, stack, task = [], [], [], 0, []
    end = 16 + spec.n_scores * sdt.itemsize
    for row in rows:
        raw = bytes.fromhex(row)
        pred, t0, t1, st = np.frombuffer(raw[:16], "<i4")
        preds.append(int(pred))
        # minus the calibration (two back-to-back captures) and the stub's BLX
        instrs.append(board.instructions((int(t1) - int(t0)) & 0xFFFFFFFF) - calib - 1)
        stack = max(stack, int(st) - STUB_STACK)
        scores.append(np.frombuffer(raw[16:end], sdt))
        task.append(np.frombuffer(raw[end:end + spec.task_bytes], np.uint8))
    return preds, scores, instrs, stack, task


def _run_qemu(objs: _Objects, spec: BuildSpec, x: np.ndarray, max_instr: int,
              timeout: float | None) -> TargetRun:
    find_tool("qemu-system-arm")
    n = x.shape[0]
    # batches bounded by flash; a long run is split between the cores (each batch costs a link, more than
    # QEMU takes for a few hundred rows)
    per_batch = max(1, min(INPUT_BUDGET // max(1, x[0].nbytes),
                           n if n <= ONE_BATCH_ROWS else -(-n // (os.cpu_count() or 1))))
    starts = list(range(0, n, per_batch))
    with ThreadPoolExecutor(min(len(starts), os.cpu_count() or 1)) as pool:
        futures = [pool.submit(_qemu_batch, objs, spec, x[s:s + per_batch], f"b{b}", max_instr, timeout)
                   for b, s in enumerate(starts)]
        sizes = firmware_sizes(objs)  # the firmware without embedded inputs
        parts = wait_all(futures, f"qemu: {spec.prefix}", [len(x[s:s + per_batch]) for s in starts])
    preds = [p for part in parts for p in part[0]]
    scores = [s for part in parts for s in part[1]]
    task = np.stack([t for part in parts for t in part[4]]).reshape(n, spec.task_bytes)
    return TargetRun(
        target=objs.board.target,
        predictions=np.asarray(preds, np.int64),
        scores=np.stack(scores).reshape(n, spec.n_scores),
        cycles=None,
        instructions=np.asarray([i for part in parts for i in part[2]], np.int64),
        stack_bytes=max(part[3] for part in parts),
        flash_bytes=sizes.flash_bytes,
        ram_bytes=sizes.ram_bytes,
        model_flash_bytes=sizes.model_flash_bytes,
        model_ram_bytes=sizes.model_ram_bytes,
        method="qemu",
        **spec.task_results(task),
    )


# ---------------------------------------------------------------- unicorn

def _thumb_count(code: bytes) -> int:
    """Number of Thumb instructions in a straight-line block (32-bit ones start 0b11101/0b11110/0b11111)."""
    i = count = 0
    while i + 1 < len(code):
        hw = code[i] | (code[i + 1] << 8)
        i += 4 if (hw >> 11) >= 0b11101 else 2
        count += 1
    return count


class _UnicornM0:
    """The linked firmware in unicorn: flash and RAM mapped, x and scores buffers above .bss, the
    stack painted below the top of RAM; ``call`` runs one function and counts its instructions."""

    def __init__(self, elf_path: str, spec: BuildSpec, max_instr: int, timeout: float | None):
        from unicorn import UC_ARCH_ARM, UC_HOOK_BLOCK, UC_MODE_MCLASS, UC_MODE_THUMB, Uc

        try:
            from unicorn.arm_const import UC_CPU_ARM_CORTEX_M0
        except ImportError:  # unicorn < 2.0.1: the default M-class core is fine for Thumb-1 code
            UC_CPU_ARM_CORTEX_M0 = None

        self.spec, self.max_instr, self.timeout = spec, max_instr, timeout
        self.uc = Uc(UC_ARCH_ARM, UC_MODE_THUMB | UC_MODE_MCLASS)
        if UC_CPU_ARM_CORTEX_M0 is not None:
            self.uc.ctl_set_cpu_model(UC_CPU_ARM_CORTEX_M0)
        self.uc.mem_map(FLASH_BASE, FLASH_SIZE)
        self.uc.mem_map(RAM_BASE, RAM_SIZE)
        self.syms = self._load(elf_path)
        self._place_buffers()
        self.counts: dict[tuple[int, int], int] = {}
        self.total = 0
        self.deadline = 0.0
        self.uc.hook_add(UC_HOOK_BLOCK, self._on_block)

    def _load(self, elf_path: str) -> dict[str, int]:
        """Write the loadable segments; the symbol table by name."""
        from elftools.elf.elffile import ELFFile

        with open(elf_path, "rb") as f:
            elf = ELFFile(f)
            for seg in elf.iter_segments():
                if seg["p_type"] == "PT_LOAD" and seg["p_memsz"]:
                    data = seg.data()
                    self.uc.mem_write(seg["p_vaddr"], data + bytes(seg["p_memsz"] - len(data)))
            symtab = elf.get_section_by_name(".symtab")
            return {s.name: s["st_value"] for s in symtab.iter_symbols() if s.name}

    def _place_buffers(self) -> None:
        sdt = SCORE_DTYPES[self.spec.score_ctype]
        bss_end = self.syms["__bss_end"]
        self.x_addr = (bss_end + 7) & ~7
        self.s_addr = (self.x_addr + self.spec.n_features * INPUT_BYTES[self.spec.input_ctype] + 7) & ~7
        self.l_addr = (self.s_addr + self.spec.n_scores * sdt.itemsize + 7) & ~7  # predict_labels' out
        self.paint_lo = (self.l_addr + self.spec.n_scores + 7) & ~7
        self.top = RAM_BASE + RAM_SIZE
        if self.paint_lo + 256 > self.top:
            raise ToolchainError(f"no RAM left for the stack: model data ends at {bss_end:#x}")
        self.trap = FLASH_BASE + FLASH_SIZE - 16  # erased flash; execution stops before running it
        self.paint = np.full((self.top - self.paint_lo) // 4, PAINT, "<u4").tobytes()

    def function(self, name: str) -> int:
        try:
            return self.syms[name] & ~1
        except KeyError as exc:
            raise ToolchainError(f"symbol {exc} not in the linked M0 firmware") from exc

    def _on_block(self, uc_, address, size, _data):
        key = (address, size)
        c = self.counts.get(key)
        if c is None:
            c = self.counts[key] = _thumb_count(bytes(uc_.mem_read(address, size)))
        self.total += c
        # a hang; cheaper than emu_start's timeout thread or count hook
        if self.total > self.max_instr or (self.deadline and self.total & 0xFFFF < c
                                           and time.monotonic() > self.deadline):
            uc_.emu_stop()

    def call(self, fn: int, r1: int) -> tuple[int, int, int]:
        """fn(x, r1) from a painted stack: (r0, instructions, stack bytes used)."""
        from unicorn import UcError
        from unicorn.arm_const import UC_ARM_REG_LR, UC_ARM_REG_PC, UC_ARM_REG_R0, UC_ARM_REG_R1, UC_ARM_REG_SP

        uc = self.uc
        uc.mem_write(self.paint_lo, self.paint)
        uc.reg_write(UC_ARM_REG_R0, self.x_addr)
        uc.reg_write(UC_ARM_REG_R1, r1)
        uc.reg_write(UC_ARM_REG_SP, self.top)
        uc.reg_write(UC_ARM_REG_LR, self.trap | 1)
        self.total = 0
        try:
            uc.emu_start(fn | 1, self.trap)
        except UcError as exc:
            pc = uc.reg_read(UC_ARM_REG_PC)
            raise ToolchainError(f"M0 emulation of {self.spec.prefix} faulted at pc={pc:#x}: {exc}") from exc
        if uc.reg_read(UC_ARM_REG_PC) & ~1 != self.trap:
            raise ToolchainError(f"M0 emulation of {self.spec.prefix} did not return within {self.max_instr} "
                                 f"instructions or {self.timeout} s (hang?)")
        words = np.frombuffer(bytes(uc.mem_read(self.paint_lo, self.top - self.paint_lo)), "<u4")
        used = np.flatnonzero(words != PAINT)
        stack = 0 if used.size == 0 else self.top - (self.paint_lo + 4 * int(used[0]))
        return uc.reg_read(UC_ARM_REG_R0), self.total, stack


def _run_unicorn(objs: _Objects, spec: BuildSpec, x: np.ndarray, max_instr: int,
                 timeout: float | None) -> TargetRun:
    fw = objs.link(None, "uc")
    machine = _UnicornM0(fw.elf, spec, max_instr, timeout)
    predict, score_fn = machine.function(f"{spec.prefix}_predict"), machine.function(f"{spec.prefix}_scores")
    machine.deadline = time.monotonic() + timeout if timeout else 0.0
    sdt = SCORE_DTYPES[spec.score_ctype]
    sbytes = spec.n_scores * sdt.itemsize
    task_fn = {"regression": f"{spec.prefix}_predict_value", "multilabel": f"{spec.prefix}_predict_labels"}
    task_fn = machine.function(task_fn[spec.task]) if spec.task in task_fn else None
    preds, instrs, scores, stack, task = [], [], [], 0, []
    for row in x:
        machine.uc.mem_write(machine.x_addr, row.tobytes())
        r0, n_instr, st = machine.call(predict, 0)
        preds.append(r0 - (1 << 32) if r0 & 0x80000000 else r0)
        instrs.append(n_instr)
        _, _, st2 = machine.call(score_fn, machine.s_addr)
        stack = max(stack, st, st2)
        scores.append(np.frombuffer(bytes(machine.uc.mem_read(machine.s_addr, sbytes)), sdt))
        if task_fn is not None:
            value, _, st3 = machine.call(task_fn, machine.l_addr)
            stack = max(stack, st3)
            # a value comes back in r0 (soft-float ABI for float); labels are written to out
            task.append(np.frombuffer(value.to_bytes(4, "little")[:spec.task_bytes], np.uint8)
                        if spec.task == "regression"
                        else np.frombuffer(bytes(machine.uc.mem_read(machine.l_addr, spec.n_scores)), np.uint8))
    return TargetRun(
        target="cortex-m0",
        predictions=np.asarray(preds, np.int64),
        scores=np.stack(scores),
        cycles=None,
        instructions=np.asarray(instrs, np.int64),
        stack_bytes=stack,
        flash_bytes=fw.sizes.flash_bytes,
        ram_bytes=fw.sizes.ram_bytes,
        model_flash_bytes=fw.sizes.model_flash_bytes,
        model_ram_bytes=fw.sizes.model_ram_bytes,
        method="unicorn",
        **spec.task_results(np.stack(task) if task else np.zeros((len(x), 0), np.uint8)),
    )


# ---------------------------------------------------------------- per-function profile (unicorn)

class _UnicornImage:
    """A build's firmware loaded into unicorn's ``board.unicorn_cpu`` on the board's memory map, to call
    ``NAME_predict`` on rows directly (the startup code is not run)."""

    def __init__(self, spec: BuildSpec, board: Board, what: str):
        try:
            from elftools.elf.elffile import ELFFile
            from unicorn import UC_ARCH_ARM, UC_MODE_MCLASS, UC_MODE_THUMB, Uc, arm_const
        except ImportError as exc:
            raise ToolchainError(f"{what} needs the unicorn and pyelftools packages: pip install "
                                 f"'tinycc-ml[unicorn]' ({exc})") from None
        self.spec, self.chip = spec, board.chip
        chip = board.chip
        with tempfile.TemporaryDirectory(prefix="tinycc-ml-uc-") as work:
            fw = _Objects(spec, work, board=board).link(None, "prof")
            uc = self.uc = Uc(UC_ARCH_ARM, UC_MODE_THUMB | UC_MODE_MCLASS)
            if hasattr(arm_const, board.unicorn_cpu):  # unicorn >= 2.0.1
                uc.ctl_set_cpu_model(getattr(arm_const, board.unicorn_cpu))
            uc.mem_map(chip.flash_base, chip.flash)
            uc.mem_map(chip.ram_base, chip.ram)
            with open(fw.elf, "rb") as f:
                elf = ELFFile(f)
                for seg in elf.iter_segments():
                    if seg["p_type"] == "PT_LOAD" and seg["p_memsz"]:
                        data = seg.data()
                        uc.mem_write(seg["p_vaddr"], data + bytes(seg["p_memsz"] - len(data)))
                symtab = elf.get_section_by_name(".symtab")
                self.funcs = sorted((s["st_value"] & ~1, s.name.split(".")[0]) for s in symtab.iter_symbols()
                                    if s.name and s["st_info"]["type"] in ("STT_FUNC", "STT_NOTYPE")
                                    and not s.name.startswith(("$", ".")) and s["st_value"] < chip.ram_base)
                self.syms = {s.name: s["st_value"] for s in symtab.iter_symbols() if s.name}
        self._addrs = np.array([a for a, _ in self.funcs])

    def function_at(self, address: int) -> str:
        i = int(np.searchsorted(self._addrs, address, side="right")) - 1
        return self.funcs[i][1] if i >= 0 else "?"

    def predict(self, row: np.ndarray) -> None:
        """Runs ``NAME_predict`` on one row (the hooks added to ``uc`` see it)."""
        from unicorn.arm_const import UC_ARM_REG_LR, UC_ARM_REG_R0, UC_ARM_REG_SP

        chip, uc = self.chip, self.uc
        x_addr = (self.syms["__bss_end"] + 7) & ~7
        trap = chip.flash_base + chip.flash - 16
        uc.mem_write(x_addr, row.tobytes())
        uc.reg_write(UC_ARM_REG_R0, x_addr)
        uc.reg_write(UC_ARM_REG_SP, chip.ram_base + chip.ram)
        uc.reg_write(UC_ARM_REG_LR, trap | 1)
        uc.emu_start(self.syms[self.spec.prefix + "_predict"] | 1, trap)


def profile(spec: BuildSpec, x: np.ndarray, board: Board = NRF51) -> dict[str, float]:
    """Instructions per predict call by function symbol: unicorn's ``board.unicorn_cpu`` on the board's memory
    map."""
    from unicorn import UC_HOOK_BLOCK

    image = _UnicornImage(spec, board, "a Cortex-M profile (the report's kernels)")
    per: dict[str, float] = {}
    sizes: dict[tuple[int, int], tuple[str, int]] = {}

    def on_block(uc_, address, size, _data):
        key = (address, size)
        if key not in sizes:
            sizes[key] = (image.function_at(address), _thumb_count(bytes(uc_.mem_read(address, size))))
        name, c = sizes[key]
        per[name] = per.get(name, 0) + c

    image.uc.hook_add(UC_HOOK_BLOCK, on_block)
    for row in x:
        image.predict(row)
    return {k: v / len(x) for k, v in per.items()}


def cycles(spec: BuildSpec, x: np.ndarray, board: Board, wait_states: int = 0):
    """``m4_cycles.CycleCount`` of ``NAME_predict``: cycles and instructions per row and, averaged over the rows,
    cycles per function symbol; the executed instruction stream in unicorn priced by the TRM's timings
    (``m4_cycles``), with ``wait_states`` on every data read from flash and every refill from it."""
    from unicorn import UC_HOOK_CODE, UC_HOOK_MEM_READ
    from unicorn import arm_const as uc_regs

    image = _UnicornImage(spec, board, "Cortex-M4 cycles")
    uc, chip = image.uc, board.chip
    decode = m4_cycles.Decoder(lambda a, n: uc.mem_read(a, n))
    flash = (chip.flash_base, chip.flash_base + chip.flash)
    counter = m4_cycles.CycleCounter(decode, wait_states, flash)
    aliases = {"sb": "r9", "sl": "r10", "fp": "r11", "ip": "r12"}  # capstone's names of r9-r12
    regs = {}  # capstone register id -> unicorn register id, for divides' operands
    per: dict[str, float] = {}
    names: dict[int, str] = {}
    last = [0, spec.prefix + "_predict"]  # cycles when the previous instruction was stepped, and its function

    def operand_values(insn):
        values = []
        for r in insn.divide_regs:
            if r not in regs:
                name = decode.cs.reg_name(r)
                regs[r] = getattr(uc_regs, "UC_ARM_REG_" + aliases.get(name, name).upper())
            values.append(uc.reg_read(regs[r]) & 0xFFFFFFFF)
        return tuple(values)

    def on_code(uc_, address, size, _data):
        insn = decode(address)
        counter.step(address, operand_values(insn) if insn.kind == "divide" else None)
        name = names.get(address)
        if name is None:
            name = names[address] = image.function_at(address)
        per[last[1]] = per.get(last[1], 0) + counter.cycles - last[0]
        last[0], last[1] = counter.cycles, name

    def on_read(uc_, access, address, size, value, _data):
        if flash[0] <= address < flash[1]:
            counter.flash_reads(1)

    uc.hook_add(UC_HOOK_CODE, on_code)
    if wait_states:
        uc.hook_add(UC_HOOK_MEM_READ, on_read)
    rows, counts = [], []
    for row in x:
        start, executed = counter.cycles, counter.instructions
        image.predict(row)
        counter.finish()  # the return to the trap address
        per[last[1]] = per.get(last[1], 0) + counter.cycles - last[0]
        last[0] = counter.cycles
        rows.append(counter.cycles - start)
        counts.append(counter.instructions - executed)
    return m4_cycles.CycleCount(np.array(rows, dtype=np.int64), np.array(counts, dtype=np.int64),
                                {k: v / len(x) for k, v in per.items()})


class M0Simulator:
    """The nRF51822 under QEMU or unicorn, as registered in simulate.SIMULATORS."""

    unit = "instructions"
    board = NRF51

    def require(self, method: str = "auto") -> None:
        require(method)

    def run(self, spec: BuildSpec, x: np.ndarray, *, method: str = "auto", max_count: int = DEFAULT_MAX_CYCLES,
            timeout: float | None = None) -> TargetRun:
        return run(spec, x, method, max_count, timeout)

    def firmware_sizes(self, spec: BuildSpec) -> FirmwareSizes:
        with tempfile.TemporaryDirectory(prefix="tinycc-ml-") as work:
            return firmware_sizes(_Objects(spec, work, DEFAULT_MAX_CYCLES))

    def profile(self, spec: BuildSpec, x: np.ndarray) -> dict[str, float]:
        return profile(spec, x)


SIMULATOR = M0Simulator()
