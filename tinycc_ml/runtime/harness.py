"""The portable measurement harness (support/tcm_harness.c) and a Simulator built on it.

A new chip needs a board file (five C functions: counter, output, exit, init, stack limit; see the
harness source), its compiler flags (a Chip), a linker script if the toolchain has none, and the command
that runs an ELF: ``HarnessSimulator`` then builds the firmware, runs it, parses the line protocol and
measures it, as the built-in simulators do. ``parse_harness_output`` reads the protocol on its own for a
simulator that runs firmware another way.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from tinycc_ml.chips import Chip
from tinycc_ml.errors import ToolchainError
from tinycc_ml.runtime import toolchains
from tinycc_ml.runtime.simulate import (
    DEFAULT_MAX_CYCLES,
    SCORE_DTYPES,
    BuildSpec,
    FirmwareSizes,
    TargetRun,
    compile_objects,
    model_symbol_sizes,
    run_tool,
    support_file,
)

HARNESS_SOURCE = "tcm_harness.c"


def harness_source() -> str:
    """Path of the portable harness C file (compile it with ``BuildSpec.harness_defines()``)."""
    return support_file(HARNESS_SOURCE)


def input_image_source(x: np.ndarray, work: str, tag: str = "rows") -> str:
    """A C file defining ``tcm_inputs`` (the rows' bytes, read-only data) and ``tcm_n_inputs``; returns its path.
    The bytes go through ``.incbin``: a C literal of many kilobytes costs the compiler seconds."""
    x = np.ascontiguousarray(x)
    binf = os.path.join(work, f"inputs_{tag}.bin")
    src = os.path.join(work, f"inputs_{tag}.c")
    with open(binf, "wb") as f:
        f.write(x.tobytes() if x.size else b"\0\0\0\0")
    escaped = binf.replace("\\", "\\\\").replace('"', '\\"')
    with open(src, "w") as f:
        f.write("#include <stdint.h>\n"
                f"const uint32_t tcm_n_inputs = {x.shape[0] if x.ndim == 2 else 0}u;\n"
                '__asm__(".section .rodata.tcm_inputs,\\"a\\"\\n"\n'
                '        ".balign 4\\n.global tcm_inputs\\ntcm_inputs:\\n"\n'
                f'        ".incbin \\"{escaped}\\"\\n.text\\n");\n')
    return src


@dataclass
class HarnessRows:
    """What the harness printed for each row."""

    predictions: np.ndarray  # (n,) int64
    counts: np.ndarray  # (n,) int64: counter units of one predict call, the calibration subtracted
    stack_bytes: int  # peak over all calls
    scores: np.ndarray  # (n, n_scores) of the score dtype
    task: dict  # TargetRun's values or labels (BuildSpec.task_results)


def parse_harness_output(text: str, spec: BuildSpec, n_rows: int, what: str = "the firmware") -> HarnessRows:
    """Parse the line protocol of tcm_harness.c; ToolchainError when a line is missing or malformed."""
    calib = re.search(r"^C([0-9a-f]{8})\r?$", text, re.M)
    rows = re.findall(r"^R([0-9a-f]+)\r?$", text, re.M)
    if calib is None or len(rows) != n_rows or not re.search(r"^E\r?$", text, re.M):
        raise ToolchainError(f"{what} ended early or printed something else: {len(rows)} of {n_rows} result lines"
                             f"{'' if calib else ', no calibration line'}\n{text[-500:]}")
    c = int(np.frombuffer(bytes.fromhex(calib.group(1)), "<u4")[0])
    sdt = SCORE_DTYPES[spec.score_ctype]
    end = 12 + spec.n_scores * sdt.itemsize
    want = end + spec.task_bytes
    preds, counts, scores, task, stack = [], [], [], [], 0
    for row in rows:
        raw = bytes.fromhex(row)
        if len(raw) != want:
            raise ToolchainError(f"{what}: a result line of {len(raw)} bytes, expected {want}")
        pred, = np.frombuffer(raw[:4], "<i4")
        count, st = np.frombuffer(raw[4:12], "<u4")
        preds.append(int(pred))
        counts.append(int(count) - c)
        stack = max(stack, int(st))
        scores.append(np.frombuffer(raw[12:end], sdt))
        task.append(np.frombuffer(raw[end:want], np.uint8))
    task_raw = np.stack(task).reshape(n_rows, spec.task_bytes) if task else np.zeros((0, spec.task_bytes), np.uint8)
    return HarnessRows(np.asarray(preds, np.int64), np.asarray(counts, np.int64), stack,
                       np.stack(scores).reshape(n_rows, spec.n_scores) if scores else np.zeros((0, spec.n_scores), sdt),
                       spec.task_results(task_raw))


def elf_sizes(size_tool: str, elf: str) -> tuple[int, int]:
    """(flash, ram) = (text + data, data + bss) from a Berkeley-format ``size``."""
    out = run_tool([toolchains.find_tool(size_tool), elf], size_tool).stdout.decode()
    try:
        text, data, bss = (int(v) for v in out.strip().splitlines()[1].split()[:3])
    except (IndexError, ValueError) as exc:
        raise ToolchainError(f"cannot parse {size_tool} output:\n{out}") from exc
    return text + data, data + bss


@dataclass
class HarnessSimulator:
    """A Simulator (see runtime.simulate.Simulator) for firmware made of the portable harness, the target's
    board file(s) and the model, run by one command per batch of rows.

    target: the name TargetRun reports; unit: "instructions" or "cycles";
    chip: compiler and linker flags (a BuildSpec's own chip wins when a backend passes one);
    compiler, size_tool, nm_tool: executables on PATH (``tools`` adds any others ``require`` checks);
    board_sources: paths of the board file(s); link_flags: e.g. ("-T", linker_script), after the chip's;
    command(elf): the argv that runs the firmware and prints the protocol on stdout or stderr;
    install_hint: what to install when a tool is missing (one line);
    batch_bytes: input bytes per firmware image.
    """

    target: str
    unit: str
    chip: Chip
    compiler: str
    size_tool: str
    nm_tool: str
    board_sources: Sequence[str]
    command: Callable[[str], list[str]]
    link_flags: Sequence[str] = ()
    tools: Sequence[str] = ()
    install_hint: str = ""
    batch_bytes: int = 64 * 1024
    instructions_per_second: float = 20e6  # conservative, for wall-clock limits
    libraries: Sequence[str] = field(default_factory=lambda: ("-lm",))

    def require(self, method: str = "auto") -> None:
        for tool in (self.compiler, self.size_tool, self.nm_tool, *self.tools):
            try:
                toolchains.find_tool(tool)
            except ToolchainError as exc:
                raise ToolchainError(f"{exc}" + (f" ({self.install_hint})" if self.install_hint else "")) from None

    def _chip(self, spec: BuildSpec) -> Chip:
        return spec.chip or self.chip

    def _objects(self, spec: BuildSpec, work: str) -> tuple[list[str], list[str]]:
        return compile_objects(toolchains.find_tool(self.compiler), self._chip(spec).cflags, spec,
                               [harness_source(), *self.board_sources], work)

    def _link(self, spec: BuildSpec, objs: tuple[list[str], list[str]], x: np.ndarray | None, work: str,
              tag: str) -> str:
        cc, chip = toolchains.find_tool(self.compiler), self._chip(spec)
        src = input_image_source(np.zeros((0, spec.n_features), np.uint8) if x is None else x, work, tag)
        obj = src[:-2] + ".o"
        run_tool([cc, *chip.cflags, "-c", src, "-o", obj], f"compiling the {self.target} input image")
        elf = os.path.join(work, f"fw_{tag}.elf")
        model_objs, harness_objs = objs
        run_tool([cc, *chip.ldflags, *self.link_flags, *spec.extra_cflags, *harness_objs, *model_objs, obj,
                  "-o", elf, *self.libraries], f"linking the {self.target} firmware")
        return elf

    def _sizes(self, spec: BuildSpec, model_objs: list[str], elf: str) -> FirmwareSizes:
        flash, ram = elf_sizes(self.size_tool, elf)
        mflash, mram = model_symbol_sizes(toolchains.find_tool(self.nm_tool), model_objs, elf)
        return FirmwareSizes(flash, ram, mflash, mram)

    def firmware_sizes(self, spec: BuildSpec) -> FirmwareSizes:
        self.require()
        with tempfile.TemporaryDirectory(prefix="tinycc-ml-") as work:
            objs = self._objects(spec, work)
            return self._sizes(spec, objs[0], self._link(spec, objs, None, work, "sizes"))

    def run(self, spec: BuildSpec, x: np.ndarray, *, method: str = "auto", max_count: int = DEFAULT_MAX_CYCLES,
            timeout: float | None = None) -> TargetRun:
        self.require(method)
        x = np.ascontiguousarray(x)
        per_batch = max(1, self.batch_bytes // max(1, x[0].nbytes))
        parts = []
        with tempfile.TemporaryDirectory(prefix="tinycc-ml-") as work:
            objs = self._objects(spec, work)
            for b, start in enumerate(range(0, len(x), per_batch)):
                xb = x[start:start + per_batch]
                elf = self._link(spec, objs, xb, work, f"b{b}")
                limit = timeout if timeout is not None else 30 + 2 * len(xb) * max_count / self.instructions_per_second
                proc = run_tool(self.command(elf), f"simulating the {self.target} firmware", timeout=limit,
                                check=False)
                text = proc.stdout.decode(errors="replace") + "\n" + proc.stderr.decode(errors="replace")
                rows = parse_harness_output(text, spec, len(xb), f"the {self.target} firmware")
                if np.any(rows.counts > max_count):
                    raise ToolchainError(f"a call of {spec.prefix} ran over {max_count} {self.unit}: hang?")
                parts.append(rows)
            sizes = self._sizes(spec, objs[0], self._link(spec, objs, None, work, "sizes"))
        counts = np.concatenate([p.counts for p in parts])
        task = {key: np.concatenate([p.task[key] for p in parts]) for key in parts[0].task}
        return TargetRun(
            target=self.target,
            predictions=np.concatenate([p.predictions for p in parts]),
            scores=np.concatenate([p.scores for p in parts]),
            cycles=counts if self.unit == "cycles" else None,
            instructions=counts if self.unit == "instructions" else None,
            stack_bytes=max(p.stack_bytes for p in parts),
            flash_bytes=sizes.flash_bytes, ram_bytes=sizes.ram_bytes,
            model_flash_bytes=sizes.model_flash_bytes, model_ram_bytes=sizes.model_ram_bytes,
            method=os.path.basename(self.command("fw.elf")[0]), **task)
