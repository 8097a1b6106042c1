"""ATmega328P runs under libsimavr through support/avr_runner.c (see simulate.py)."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tinycc_ml.avr.chips import ATMEGA328P, ATMEGA1284P
from tinycc_ml.target import (
    DEFAULT_MAX_CYCLES,
    SCORE_DTYPES,
    SIMAVR_PACKAGES,
    BuildSpec,
    Chip,
    CompileError,
    FirmwareSizes,
    FitError,
    TargetRun,
    ToolchainError,
    cache_root,
    compile_objects,
    find_host_cc,
    find_simavr_include,
    find_tool,
    install_hint,
    linked_once,
    model_symbol_sizes,
    run_tool,
    support_file,
    wait_all,
)

RUNNER_SOURCE = "avr_runner.c"
HARNESS_SOURCE = "tcm_avr_harness.c"
SIM_CYCLES_PER_SECOND = 30e6  # conservative simulation speed, for wall-clock timeouts
AVR_MIN_STACK = 64  # bytes left for the call chain; the runner reports the real peak
ICALL_CYCLES = 3  # the stub's ICALL (ATmega328P); the callee's RET is counted


def cache_dir() -> str:
    """Where built helpers live (tinycc_ml.cache.cache_root)."""
    return str(cache_root())


def runner_path() -> str:
    """Build the libsimavr runner on first use; cached under a hash of its source and compiler."""
    src = support_file(RUNNER_SOURCE)
    cc = find_host_cc()
    include = find_simavr_include()
    with open(src, "rb") as f:
        key = hashlib.sha256(f.read() + cc.encode() + include.encode()).hexdigest()[:16]
    for base in (cache_dir(), os.path.join(tempfile.gettempdir(), f"tinycc-ml-{os.getuid()}")):
        exe = os.path.join(base, f"avr_runner-{key}")
        if os.access(exe, os.X_OK):
            return exe
        try:
            os.makedirs(base, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".avr_runner-", dir=base)
            os.close(fd)
        except OSError:
            continue
        try:
            # built to a temporary name then renamed, so concurrent first uses never see half a file
            try:
                run_tool([cc, "-O2", "-I" + include, src, "-o", tmp, "-lsimavr"],
                         "building the simavr runner")
            except ToolchainError as exc:
                raise ToolchainError(f"{exc}\n{install_hint(SIMAVR_PACKAGES)}") from exc
            os.chmod(tmp, 0o755)
            os.replace(tmp, exe)
            return exe
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    raise ToolchainError(f"no writable cache directory for the simavr runner (tried {cache_dir()})")


@dataclass
class AvrBuild:
    elf: str
    bin: str
    sizes: FirmwareSizes


def avr_size(elf: str, chip: Chip = ATMEGA328P) -> tuple[int, int]:
    """(flash, ram) from avr-size -C: Program = text+data, Data = data+bss+noinit."""
    cmd = [find_tool("avr-size"), "-C", f"--mcu={chip.mcu}", elf]
    out = run_tool(cmd, "avr-size").stdout.decode()
    prog = re.search(r"Program:\s+(\d+)", out)
    data = re.search(r"Data:\s+(\d+)", out)
    if not prog or not data:
        raise ToolchainError(f"cannot parse avr-size output:\n{out}")
    return int(prog.group(1)), int(data.group(1))


NEAR_FLASH_BYTES = 65536


def progmem_end(elf: str) -> int:
    """The flash address where the PROGMEM constants end: avr-libc's linker scripts place them after the
    vectors and start the constructors table (__ctors_start) right after them."""
    out = run_tool([find_tool("avr-nm"), elf], "avr-nm").stdout.decode()
    found = re.search(r"^([0-9a-fA-F]+) \S __ctors_start$", out, re.M)
    if not found:
        raise ToolchainError(f"{elf}: no __ctors_start symbol; cannot tell where the constants end")
    return int(found.group(1), 16)


def build(spec: BuildSpec, work: str, chip: Chip = ATMEGA328P) -> AvrBuild:
    cc = find_tool("avr-gcc")
    model_objs, harness_objs = compile_objects(cc, chip.cflags, spec, [support_file(HARNESS_SOURCE)], work)
    elf = os.path.join(work, "fw_avr.elf")
    binf = os.path.join(work, "fw_avr.bin")

    def link() -> tuple[bytes, bytes, FirmwareSizes]:
        run_tool([cc, *chip.ldflags, *spec.extra_cflags, *harness_objs, *model_objs, "-o", elf, "-lm"],
                 "linking the AVR firmware")
        flash, ram = avr_size(elf, chip)
        if flash > chip.flash:
            raise CompileError(f"AVR firmware needs {flash} bytes of flash; the {chip.name} has {chip.flash}")
        if ram + AVR_MIN_STACK > chip.ram:
            raise CompileError(f"AVR firmware needs {ram} bytes of static RAM plus stack; "
                               f"the {chip.name} has {chip.ram}")
        end = progmem_end(elf)
        if end > NEAR_FLASH_BYTES:
            raise FitError(f"{spec.prefix} cannot run on the {chip.name}: its constants end at byte {end} of "
                           f"flash, past the first {NEAR_FLASH_BYTES} bytes pgm_read_* (near pointers) reach")
        mflash, mram = model_symbol_sizes(find_tool("avr-nm"), model_objs, elf)
        run_tool([find_tool("avr-objcopy"), "-O", "binary", "-R", ".eeprom", "-R", ".fuse",
                  "-R", ".lock", "-R", ".signature", elf, binf], "avr-objcopy")
        with open(elf, "rb") as f_elf, open(binf, "rb") as f_bin:
            return f_elf.read(), f_bin.read(), FirmwareSizes(flash, ram, mflash, mram)

    # the fit check and the simulation build the same firmware: linked once per process
    elf_bytes, bin_bytes, sizes = linked_once([*harness_objs, *model_objs],
                                              ["avr", cc, chip.mcu, *chip.ldflags, *spec.extra_cflags], link)
    for path, data in ((elf, elf_bytes), (binf, bin_bytes)):
        if not os.path.exists(path):
            with open(path, "wb") as f:
                f.write(data)
    return AvrBuild(elf, binf, sizes)


def _run_chunk(runner: str, fw: AvrBuild, spec: BuildSpec, x: np.ndarray, work: str, tag: int,
               max_cycles: int, timeout: float | None, chip: Chip = ATMEGA328P):
    """One runner process over inputs x; returns (predictions, scores, cycles, stacks)."""
    n = x.shape[0]
    sdt = SCORE_DTYPES[spec.score_ctype]
    inp = os.path.join(work, f"inputs{tag}.bin")
    outp = os.path.join(work, f"outputs{tag}.bin")
    # each input is preceded by a 1 ("another follows"); a final 0 ends the firmware's loop
    rows = np.concatenate([np.ones((n, 1), np.uint8), x.view(np.uint8).reshape(n, -1)], axis=1)
    with open(inp, "wb") as f:
        f.write(rows.tobytes() + b"\x00")
    # a hang stops after max_cycles inside one call; the total cap only guards the harness itself
    cap = int(max_cycles) * (2 * n + 1) + 10_000_000
    limit = timeout if timeout is not None else 60 + cap / SIM_CYCLES_PER_SECOND
    proc = run_tool([runner, fw.bin, inp, outp, str(cap), str(int(max_cycles)), chip.mcu, str(chip.clock_hz)],
                    "simulating the AVR firmware (simavr)", timeout=limit, check=False)
    if proc.returncode != 0:
        err = proc.stderr.decode(errors="replace").strip()
        what = {3: f"{spec.prefix} crashed the simulated {chip.name}",
                4: f"a call of {spec.prefix} ran over {max_cycles} cycles (hang?)"}.get(
                    proc.returncode, f"the simavr runner failed (exit {proc.returncode})")
        raise ToolchainError(f"{what}: {err[-400:]}")
    with open(outp, "rb") as f:
        raw = f.read()
    # brackets: calibration (code 2), then predict and scores alternately (code 4), the task's call (code 6)
    calib, brackets, task_stack = None, [], 0
    for line in proc.stdout.decode().splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[0] == "B":
            if parts[1] == "2":
                calib = int(parts[2])
            elif parts[1] == "4":
                brackets.append((int(parts[2]), int(parts[3])))
            elif parts[1] == "6":
                task_stack = max(task_stack, int(parts[3]))
    n_scores_bytes = spec.n_scores * sdt.itemsize
    rec = 2 + n_scores_bytes + spec.task_bytes
    if calib is None or len(brackets) != 2 * n or len(raw) != n * rec:
        raise ToolchainError(f"AVR run ended early: {len(brackets) // 2} of {n} inferences, "
                             f"{len(raw)} output bytes\n{proc.stdout.decode()[-500:]}")
    cycles = np.asarray([c - calib - ICALL_CYCLES for c, _ in brackets[0::2]], np.int64)
    recs = np.frombuffer(raw, np.uint8).reshape(n, rec)
    preds = recs[:, :2].copy().view("<i2").reshape(n).astype(np.int64)
    scores = recs[:, 2:2 + n_scores_bytes].copy().view(sdt).reshape(n, spec.n_scores)
    task = spec.task_results(recs[:, 2 + n_scores_bytes:])
    return preds, scores, cycles, max(task_stack, *(s for _, s in brackets)), task


def require(method: str = "auto") -> None:
    """ToolchainError naming what is missing to build and simulate AVR firmware."""
    if method not in ("auto", "simavr"):
        raise CompileError(f"unknown AVR method {method!r}; use simavr")
    for tool in ("avr-gcc", "avr-size", "avr-nm", "avr-objcopy"):
        find_tool(tool)
    find_host_cc()
    find_simavr_include()


def run(spec: BuildSpec, x: np.ndarray, max_cycles: int, timeout: float | None,
        chip: Chip = ATMEGA328P) -> TargetRun:
    require()
    runner = runner_path()
    n = x.shape[0]
    # one runner process per core: each is single-threaded and independent
    jobs = max(1, min(os.cpu_count() or 1, 8, n // 32))
    chunks = np.array_split(x, jobs)
    with tempfile.TemporaryDirectory(prefix="tinycc-ml-avr-") as work:
        fw = build(spec, work, chip)
        with ThreadPoolExecutor(jobs) as pool:
            futures = [pool.submit(_run_chunk, runner, fw, spec, chunk, work, i, max_cycles, timeout, chip)
                       for i, chunk in enumerate(chunks)]
            parts = wait_all(futures, f"simavr: {spec.prefix}", [len(c) for c in chunks])
    return TargetRun(
        target="avr",
        predictions=np.concatenate([p[0] for p in parts]),
        scores=np.concatenate([p[1] for p in parts]),
        cycles=np.concatenate([p[2] for p in parts]),
        instructions=None,
        stack_bytes=int(max(p[3] for p in parts)),
        flash_bytes=fw.sizes.flash_bytes,
        ram_bytes=fw.sizes.ram_bytes,
        model_flash_bytes=fw.sizes.model_flash_bytes,
        model_ram_bytes=fw.sizes.model_ram_bytes,
        method="simavr",
        **{key: np.concatenate([p[4][key] for p in parts]) for key in parts[0][4]},
    )


# ---------------------------------------------------------------- per-function profile

def _function_symbols(elf: str) -> list[tuple[int, str]]:
    out = subprocess.run([find_tool("avr-nm"), "-n", elf], capture_output=True, text=True,
                         check=True).stdout
    syms = []
    for line in out.splitlines():
        parts = line.split()
        # __stack: the linker's RAM end (weak, a data address below 0x800000): not code
        if len(parts) == 3 and parts[1] in "tTwW" and not parts[2].startswith(".L") and parts[2] != "__stack":
            addr = int(parts[0], 16)
            if addr < 0x800000:  # flash, not data
                syms.append((addr, parts[2].split(".")[0]))  # gcc's clones (f.constprop.0) count as f
    return syms


def profile(spec: BuildSpec, x: np.ndarray, chip: Chip = ATMEGA328P) -> dict[str, float]:
    require()
    with tempfile.TemporaryDirectory(prefix="tinycc-ml-prof-") as work:
        fw = build(spec, work, chip)
        n = x.shape[0]
        rows = np.concatenate([np.ones((n, 1), np.uint8), np.ascontiguousarray(x).view(np.uint8).reshape(n, -1)],
                              axis=1)
        inp, outp, prof = (os.path.join(work, f) for f in ("in.bin", "out.bin", "prof.txt"))
        Path(inp).write_bytes(rows.tobytes() + b"\x00")
        proc = subprocess.run([runner_path(), fw.bin, inp, outp, str(10**10), str(10**8), chip.mcu,
                               str(chip.clock_hz), prof], capture_output=True)
        if proc.returncode != 0 or not os.path.exists(prof):
            raise ToolchainError(f"simavr profile run failed (exit {proc.returncode}): "
                                 f"{proc.stderr.decode(errors='replace')[-300:]}")
        counts = np.loadtxt(prof, dtype=np.int64, ndmin=2)
        syms = _function_symbols(fw.elf)
    addrs = np.array([a for a, _ in syms])
    per: dict[str, float] = {}
    for pc, cyc in counts:
        i = int(np.searchsorted(addrs, pc, side="right")) - 1
        name = syms[i][1] if i >= 0 else "?"
        per[name] = per.get(name, 0) + int(cyc)
    calls = 2 * n  # the harness times predict and scores for each row
    return {k: v / calls for k, v in per.items()}


class AvrSimulator:
    """An AVR chip under simavr, as registered in simulate.SIMULATORS."""

    unit = "cycles"

    def __init__(self, chip: Chip = ATMEGA328P):
        self.chip = chip

    def require(self, method: str = "auto") -> None:
        require(method)

    def run(self, spec: BuildSpec, x: np.ndarray, *, method: str = "auto", max_count: int = DEFAULT_MAX_CYCLES,
            timeout: float | None = None) -> TargetRun:
        require(method)
        return run(spec, x, max_count, timeout, spec.chip or self.chip)

    def firmware_sizes(self, spec: BuildSpec) -> FirmwareSizes:
        with tempfile.TemporaryDirectory(prefix="tinycc-ml-") as work:
            return build(spec, work, spec.chip or self.chip).sizes

    def profile(self, spec: BuildSpec, x: np.ndarray) -> dict[str, float]:
        return profile(spec, x, spec.chip or self.chip)


SIMULATOR = AvrSimulator()
ATMEGA1284P_SIMULATOR = AvrSimulator(ATMEGA1284P)
