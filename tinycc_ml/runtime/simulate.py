"""Run a compiled model on a simulated microcontroller and measure it.

    run = run_on_target("avr", sources, header, prefix, inputs, n_scores, "int16_t", "int32_t")

Targets (SIMULATORS, a plug-in registry; entry-point group tinycc_ml.simulators):
  "avr"        ATmega328P @ 16 MHz under libsimavr (cycle exact), through a small C runner
               (support/avr_runner.c) built once into a cache directory; inputs are streamed into
               the firmware through GPIOR2 because a test set does not fit 32 KB of flash.
  "cortex-m0"  nRF51822 (256 KB flash, 16 KB RAM). Method "qemu" (default when installed) runs
               whole firmware under QEMU -M microbit -icount shift=10 and counts instructions with
               TIMER0 (inputs embedded in flash, in batches); "unicorn" (Python emulator) calls
               <prefix>_predict directly and counts executed blocks. Both give the same exact counts.

Counts are exact and cover the callee only: from the first instruction of <prefix>_predict
through its return (AVR: RET's 4 cycles included, the caller's CALL not; M0 likewise for BL).
stack_bytes: AVR includes the 2-byte return address the call pushes; M0 is what the callee pushes.

The model exports `int <prefix>_predict(const IN_T *x)` and
`void <prefix>_scores(const IN_T *x, SCORE_T *scores)`, declared in `header`. With task
"regression" the harness also calls `SCORE_T <prefix>_predict_value(const IN_T *x)` (TargetRun.values),
with "multilabel" `void <prefix>_predict_labels(const IN_T *x, uint8_t *out)` (TargetRun.labels);
their stack use counts in stack_bytes, their time is not counted.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import subprocess
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Protocol, runtime_checkable

import numpy as np

from tinycc_ml.chips import Chip
from tinycc_ml.errors import CompileError, DataError, ToolchainError
from tinycc_ml.plugins import Registry

INPUT_DTYPES = {"int16_t": np.dtype("<i2"), "int8_t": np.dtype("i1"), "float": np.dtype("<f4"),
                "int32_t": np.dtype("<i4")}  # int32_t: indices (an ONNX Embedding's input)
SCORE_DTYPES = {"int32_t": np.dtype("<i4"), "int16_t": np.dtype("<i2"), "int8_t": np.dtype("i1"),
                "uint8_t": np.dtype("u1"), "float": np.dtype("<f4")}  # uint8_t: a bool mask
# the task's own entry point the harnesses call besides predict and scores (TCM_TASK in the harness)
TASK_ENTRY_POINTS = {"classification": 0, "regression": 1, "multilabel": 2}
# Simulators by name (the Simulator protocol below); backends name theirs in McuBackend.simulator.
SIMULATORS = Registry("simulator", "tinycc_ml.simulators", {
    "avr": "tinycc_ml.avr.simulator:SIMULATOR",
    "avr-atmega1284p": "tinycc_ml.avr.simulator:ATMEGA1284P_SIMULATOR",
    "cortex-m0": "tinycc_ml.arm.sim_m0:SIMULATOR",
    "cortex-m4": "tinycc_ml.arm.sim_m4:SIMULATOR",
    "cortex-m33": "tinycc_ml.arm.sim_m4:M33_SIMULATOR",
})
log = logging.getLogger(__name__)
DEFAULT_MAX_CYCLES = 50_000_000  # per call; beyond this a run is taken for a hang

WARN_FLAGS = ("-std=c99", "-Wall", "-Wextra")


@dataclass
class TargetRun:
    """Results and measurements of one run_on_target call."""

    target: str
    predictions: np.ndarray  # (n,) int
    scores: np.ndarray  # (n, n_scores), score dtype
    cycles: np.ndarray | None  # AVR: simavr cycles per <prefix>_predict call
    instructions: np.ndarray | None  # Cortex-M0: instructions per <prefix>_predict call
    stack_bytes: int | None  # peak stack use over all predict and scores calls
    flash_bytes: int | None  # whole firmware: text + data (None: not a firmware, e.g. the host)
    ram_bytes: int | None  # whole firmware: data + bss
    model_flash_bytes: int | None = None  # the model's own symbols only
    model_ram_bytes: int | None = None
    method: str = ""  # "simavr", "unicorn", "qemu", "cffi" (host)
    wall_seconds: float = 0.0
    values: np.ndarray | None = None  # regression: (n,) <prefix>_predict_value, score dtype
    labels: np.ndarray | None = None  # multilabel: (n, n_scores) uint8 from <prefix>_predict_labels


# the measurement harness's own symbols (runtime/support/tcm_*: tcm_x, TCM_LABELS, ...); a model prefix in
# this namespace defines the same names (<prefix>_labels, <PREFIX>_LABELS) and its builds would not link
HARNESS_NAMESPACE = "tcm"


def harness_name_clash(prefix: str) -> str | None:
    """Why ``prefix`` cannot name a model the harness measures, or None."""
    lowered = (prefix or "").lower()
    if lowered == HARNESS_NAMESPACE or lowered.startswith(HARNESS_NAMESPACE + "_"):
        return (f"name {prefix!r} is reserved: the measurement harness's own symbols are "
                f"{HARNESS_NAMESPACE}_* and {HARNESS_NAMESPACE.upper()}_*, which this model's would redefine; "
                "choose another name")
    return None


@dataclass
class FirmwareSizes:
    flash_bytes: int
    ram_bytes: int
    model_flash_bytes: int
    model_ram_bytes: int


@dataclass
class BuildSpec:
    """Everything needed to build the measurement firmware for one model."""

    sources: list[str]
    header: str
    prefix: str
    n_features: int
    n_scores: int
    input_ctype: str
    score_ctype: str
    extra_cflags: tuple[str, ...] = field(default_factory=tuple)
    task: str = "classification"  # a TASK_ENTRY_POINTS key: which task entry point is run too
    chip: Chip | None = None  # the backend's chip, when a backend asked (memory map, flags, clock)

    def harness_defines(self) -> list[str]:
        return [
            f'-DTCM_HEADER="{self.header}"',
            f"-DTCM_PREFIX={self.prefix}",
            f"-DTCM_IN_T={self.input_ctype}",
            f"-DTCM_SCORE_T={self.score_ctype}",
            f"-DTCM_D={self.n_features}",
            f"-DTCM_NS={self.n_scores}",
            f"-DTCM_TASK={TASK_ENTRY_POINTS[self.task]}",
            *(["-DTCM_STATEFUL=1"] if self.stateful else []),
        ]

    @property
    def stateful(self) -> bool:
        """Whether the model keeps state between calls (its header declares <prefix>_step): one call per row."""
        with open(self.header, encoding="utf-8") as header:
            return f"{self.prefix}_step(" in header.read()

    @property
    def task_bytes(self) -> int:
        """Bytes the task's entry point adds to each row's results (value, or the 0/1 labels)."""
        return {"regression": SCORE_DTYPES[self.score_ctype].itemsize, "multilabel": self.n_scores}.get(self.task, 0)

    def task_results(self, raw: np.ndarray) -> dict:
        """TargetRun's values or labels from the (n, task_bytes) uint8 block of the rows' results."""
        if self.task == "regression":
            return {"values": raw.copy().view(SCORE_DTYPES[self.score_ctype]).reshape(len(raw))}
        if self.task == "multilabel":
            return {"labels": raw.copy()}
        return {}


def make_spec(sources, header, prefix, n_features, n_scores, input_ctype, score_ctype,
              extra_cflags=(), task: str | None = None, chip: Chip | None = None) -> BuildSpec:
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", prefix or ""):
        raise CompileError(f"model prefix {prefix!r} is not a C identifier")
    if harness_name_clash(prefix):
        raise CompileError(harness_name_clash(prefix))
    if input_ctype not in INPUT_DTYPES:
        raise CompileError(f"input C type {input_ctype!r} not supported; use one of {list(INPUT_DTYPES)}")
    if score_ctype not in SCORE_DTYPES:
        raise CompileError(f"score C type {score_ctype!r} not supported; use one of {list(SCORE_DTYPES)}")
    if isinstance(sources, (str, os.PathLike)):
        sources = [sources]
    srcs = [os.path.abspath(os.fspath(s)) for s in sources]
    for path in srcs + [os.path.abspath(os.fspath(header))]:
        if not os.path.isfile(path):
            raise CompileError(f"{path}: model source or header not found")
    if n_features < 1 or n_scores < 1:
        raise CompileError(f"need n_features >= 1 and n_scores >= 1, got {n_features}, {n_scores}")
    task = task or "classification"
    if task not in TASK_ENTRY_POINTS:
        raise CompileError(f"task {task!r} not supported; use one of {list(TASK_ENTRY_POINTS)}")
    return BuildSpec(srcs, os.path.abspath(os.fspath(header)), prefix, int(n_features), int(n_scores),
                     input_ctype, score_ctype, tuple(extra_cflags), task, chip)


@runtime_checkable
class Simulator(Protocol):
    """What a simulator registered in SIMULATORS provides (a plug-in's too).

    unit: "cycles" or "instructions", what TargetRun counts.
    require(method): ToolchainError naming what is missing to build and run here.
    run(spec, x, method=, max_count=, timeout=): build the measurement firmware for ``spec`` (its ``chip`` is
        the backend's), run every row of ``x`` (already in the input C type), measure: a TargetRun. A call
        longer than ``max_count`` units is a hang (ToolchainError); ``timeout`` bounds wall time in seconds.
    firmware_sizes(spec): the firmware without inputs: FirmwareSizes (whole firmware, the model's own symbols).
    Optional: profile(spec, x) -> {function symbol: units per predict call} (the report's kernel costs).
    """

    unit: str

    def require(self, method: str = "auto") -> None: ...

    def run(self, spec: BuildSpec, x: np.ndarray, *, method: str = "auto", max_count: int = ...,
            timeout: float | None = None) -> TargetRun: ...

    def firmware_sizes(self, spec: BuildSpec) -> FirmwareSizes: ...


def support_file(name: str, package: str = "tinycc_ml.runtime", folder: str = "support") -> str:
    """Path of a data file shipped in a package: tinycc_ml's harness sources by default, or a plug-in's own
    (``support_file("my_harness.c", package="my_backend")``)."""
    path = resources.files(package).joinpath(folder, name) if folder else resources.files(package).joinpath(name)
    if not path.is_file():
        raise ToolchainError(f"{name}: no such file in package {package} ({os.fspath(path)})")
    return os.fspath(path)


def run_tool(cmd: Sequence[str], what: str, timeout: float = 300, cwd: str | None = None,
             check: bool = True) -> subprocess.CompletedProcess:
    """Run a tool; ToolchainError with its output if it times out or (check) exits non-zero."""
    try:
        proc = subprocess.run(list(cmd), capture_output=True, timeout=timeout, cwd=cwd)
    except subprocess.TimeoutExpired as exc:
        raise ToolchainError(f"{what} timed out after {timeout:.0f} s: {' '.join(cmd[:3])} ...") from exc
    except OSError as exc:
        raise ToolchainError(f"{what}: cannot run {cmd[0]}: {exc}") from exc
    if check and proc.returncode != 0:
        out = (proc.stderr or b"").decode(errors="replace") + (proc.stdout or b"").decode(errors="replace")
        tail = "\n".join(out.strip().splitlines()[-30:])
        raise ToolchainError(f"{what} failed (exit {proc.returncode}): {' '.join(cmd)}\n{tail}")
    return proc


def compile_objects(cc: str, cflags: Sequence[str], spec: BuildSpec, harness: Sequence[str],
                    workdir: str, harness_defines: Sequence[str] = ()) -> tuple[list[str], list[str]]:
    """Compile the model sources and the harness files; returns (model objects, harness objects).

    Harness files get -Werror; model sources get the same warnings without it (add "-Werror"
    to extra_cflags to make model warnings fatal too)."""
    incdir = ["-I" + os.path.dirname(spec.header)]
    model_objs, harness_objs = [], []
    for i, src in enumerate(spec.sources):
        obj = os.path.join(workdir, f"model{i}_{os.path.splitext(os.path.basename(src))[0]}.o")
        _compile_once([cc, *cflags, *WARN_FLAGS, *incdir, *spec.extra_cflags, "-c", src, "-o", obj], src, obj,
                      f"compiling {src}")
        model_objs.append(obj)
    for src in harness:
        obj = os.path.join(workdir, "h_" + os.path.splitext(os.path.basename(src))[0] + ".o")
        _compile_once([cc, *cflags, *WARN_FLAGS, "-Werror", *incdir, *spec.harness_defines(), *harness_defines,
                       *spec.extra_cflags, "-c", src, "-o", obj], src, obj,
                      f"compiling harness {os.path.basename(src)}")
        harness_objs.append(obj)
    return model_objs, harness_objs


# Objects this process compiled, by everything that decides them: a model's C is compiled for the fit check,
# again to simulate it, and its harness once more for streaming; each compile after the first is a copy.
_OBJECTS: OrderedDict[str, bytes] = OrderedDict()
_OBJECTS_LOCK = threading.Lock()
OBJECTS_KEPT = 256


def _compile_key(cmd: Sequence[str], src: str, obj: str) -> str:
    """Compiler, flags and defines (paths of folders replaced by their headers' contents), the source's name
    and content: what the object depends on."""
    digest = hashlib.sha256()
    folders = [os.path.dirname(os.path.abspath(src))]
    for arg in cmd:
        if arg.startswith("-I"):
            folders.append(os.path.abspath(arg[2:]))
            arg = "-I"
        elif arg in (src, obj):
            arg = "<source>" if arg == src else "<object>"
        else:  # a define naming a file (the harness's -DTCM_HEADER="...") stands for the file's content
            named = re.fullmatch(r'(-D\w+=)"(/[^"]+)"', arg)
            if named and os.path.isfile(named.group(2)):
                folders.append(os.path.dirname(named.group(2)))
                with open(named.group(2), "rb") as f:
                    arg = named.group(1) + hashlib.sha256(f.read()).hexdigest()
        digest.update(arg.encode() + b"\0")
    digest.update(os.path.basename(src).encode() + b"\0")
    with open(src, "rb") as f:
        digest.update(f.read())
    for folder in folders:  # "x.h" and <x.h> from these folders (sorted: a stable order)
        for name in sorted(os.listdir(folder)):
            if name.endswith(".h"):
                with open(os.path.join(folder, name), "rb") as f:
                    digest.update(b"\0" + name.encode() + b"\0" + f.read())
    return digest.hexdigest()


_LINKED: OrderedDict[str, object] = OrderedDict()
LINKED_KEPT = 64


def linked_once(objects: Sequence[str], parts: Sequence[str], link):
    """``link()``'s result, or the one this process got for the same object files (by content, in order) and
    ``parts`` (flags, scripts: whatever else decides the firmware)."""
    digest = hashlib.sha256("\0".join(parts).encode())
    for obj in objects:
        with open(obj, "rb") as f:
            digest.update(b"\0" + hashlib.sha256(f.read()).digest())
    key = digest.hexdigest()
    with _OBJECTS_LOCK:
        made = _LINKED.get(key)
    if made is None:
        made = link()
        with _OBJECTS_LOCK:
            _LINKED[key] = made
            while len(_LINKED) > LINKED_KEPT:
                _LINKED.popitem(last=False)
    return made


def _compile_once(cmd: Sequence[str], src: str, obj: str, what: str) -> None:
    key = _compile_key(cmd, src, obj)
    with _OBJECTS_LOCK:
        made = _OBJECTS.get(key)
        if made is not None:
            _OBJECTS.move_to_end(key)
    if made is None:
        run_tool(cmd, what)
        with open(obj, "rb") as f:
            made = f.read()
        with _OBJECTS_LOCK:
            _OBJECTS[key] = made
            while len(_OBJECTS) > OBJECTS_KEPT:
                _OBJECTS.popitem(last=False)
        return
    with open(obj, "wb") as f:
        f.write(made)


_FLASH_TYPES = set("TtRrDd")
_RAM_TYPES = set("DdBb")


def model_symbol_sizes(nm: str, model_objs: Sequence[str], elf: str) -> tuple[int, int]:
    """(flash, ram) bytes of the linked symbols defined by the model's object files.

    Counts what the model defines (functions, tables, state); library helpers it pulls in
    (e.g. libgcc's __mulhisi3, soft-float) are not attributed to it."""
    names: set[str] = set()
    out = run_tool([nm, "--defined-only", *model_objs], "nm").stdout.decode()  # ("file:" lines between objects)
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in _FLASH_TYPES | _RAM_TYPES:
            names.add(parts[2])
    flash = ram = 0
    seen: set[tuple[str, str]] = set()
    out = run_tool([nm, "-S", "--defined-only", elf], "nm").stdout.decode()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) != 4 or parts[3] not in names or (parts[0], parts[3]) in seen:
            continue
        seen.add((parts[0], parts[3]))
        size, kind = int(parts[1], 16), parts[2]
        if kind in _FLASH_TYPES:
            flash += size
        if kind in _RAM_TYPES:
            ram += size
    return flash, ram


def check_inputs(inputs, spec_ctype: str) -> np.ndarray:
    dtype = INPUT_DTYPES[spec_ctype]
    arr = np.asarray(inputs)
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.ndim != 2 or arr.shape[0] == 0 or arr.shape[1] == 0:
        raise DataError(f"inputs must be a non-empty (n, D) array, got shape {arr.shape}")
    if arr.dtype != dtype:
        cast = arr.astype(dtype)
        if not np.array_equal(cast.astype(arr.dtype), arr, equal_nan=arr.dtype.kind == "f"):
            raise DataError(f"inputs of dtype {arr.dtype} do not fit the model's input type {spec_ctype}")
        arr = cast
    return np.ascontiguousarray(arr, dtype=dtype)


def run_on_target(target: str, sources, header, prefix: str, inputs, n_scores: int,
                  input_ctype: str, score_ctype: str, extra_cflags: Sequence[str] = (),
                  *, method: str = "auto", m0_method: str | None = None,
                  max_cycles_per_inference: int = DEFAULT_MAX_CYCLES, timeout: float | None = None,
                  task: str | None = None, chip: Chip | None = None) -> TargetRun:
    """Build the model with a measurement harness for `target`, run every input, measure.

    target: a simulator name (SIMULATORS: "avr", "cortex-m0", plug-ins).
    method: the simulator's choice of engine; Cortex-M0: "auto" (QEMU if installed, else unicorn),
    "unicorn" or "qemu" (m0_method is the older name of this argument).
    max_cycles_per_inference: a call longer than this (AVR cycles / M0 instructions) is treated
    as a hang and raises ToolchainError (the simulators stop it themselves).
    timeout: wall-clock limit per simulator process in seconds (default: generous, from the cap).
    task: "regression" or "multilabel" also runs that task's entry point (see the module docstring).
    chip: the backend's Chip, passed to the simulator in the BuildSpec (None: the simulator's own).
    """
    t_start = time.perf_counter()
    simulator = SIMULATORS.load(target)
    arr0 = np.asarray(inputs)
    n_features = arr0.shape[-1] if arr0.ndim >= 1 else 0
    spec = make_spec(sources, header, prefix, n_features, n_scores, input_ctype, score_ctype, extra_cflags, task,
                     chip)
    x = check_inputs(inputs, input_ctype)
    run = simulator.run(spec, x, method=m0_method or method, max_count=max_cycles_per_inference, timeout=timeout)
    run.wall_seconds = time.perf_counter() - t_start
    log.info("ran %s on %d rows under %s (%s) in %.1f s", prefix, len(x), target, run.method, run.wall_seconds)
    return run


def firmware_sizes(target: str, sources, header, prefix: str, n_features: int, n_scores: int,
                   input_ctype: str, score_ctype: str, extra_cflags: Sequence[str] = (),
                   chip: Chip | None = None) -> FirmwareSizes:
    """Build the measurement firmware only; sizes of the whole firmware and of the model alone."""
    simulator = SIMULATORS.load(target)
    spec = make_spec(sources, header, prefix, n_features, n_scores, input_ctype, score_ctype, extra_cflags,
                     chip=chip)
    return simulator.firmware_sizes(spec)
