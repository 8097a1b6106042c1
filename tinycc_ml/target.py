"""The public backend API: everything a new target needs, in one module.

A target is a ``Backend`` subclass registered under a name (entry-point group ``tinycc_ml.backends``, or
``register_backend`` at run time). What it can do besides ``emit`` is declared by the methods it
overrides (``CAPABILITIES``: load, simulate, profile, project_files, arduino_library); the command line,
``tinycc-ml report``, ``tinycc_ml.fit`` and the profiler ask ``backend.supports(name)``, never its name,
and a missing capability is a ``CapabilityError`` naming the target and what it lacks.

A microcontroller subclasses ``McuBackend``: a ``Chip`` (memory, clock, compiler and linker flags), a
``c_target(graph)`` (a ``CTarget``: how constants are declared and read, optional kernels), the name of a
``Simulator`` registered in ``SIMULATORS`` (entry-point group ``tinycc_ml.simulators``), and optionally a
``Board`` for ``--project`` firmware. It then gets the shared MCU emitter (streaming, ``predict_float``),
the fit check (FitError with the sizes), ``simulate`` and ``profile``.

A simulator built on the portable measurement harness (``harness_source()``, its C file documents the five
board functions and the line protocol) is a ``HarnessSimulator``: a board file, the tools, and the command
that runs an ELF. ``parse_harness_output`` reads the protocol for a simulator that runs firmware its own
way; ``compile_objects``, ``run_tool``, ``model_symbol_sizes`` and ``elf_sizes`` are the build helpers the
built-in simulators use. ``TargetAttributes`` are what a backend tells the passes
(``Backend.target_attributes``). ``tinycc_ml.testing`` holds the conformance checks a plug-in runs.

The names in ``__all__`` are the API: they keep their meaning across releases; anything else of
tinycc_ml's modules may change.
"""

from __future__ import annotations

from tinycc_ml.backends.base import (
    BACKENDS,
    CAPABILITIES,
    Backend,
    BuildOutput,
    CapabilityError,
    Fit,
    available_backends,
    get_backend,
    register_backend,
    targets_supporting,
)
from tinycc_ml.backends.c_emitter import CEmitter, CTarget
from tinycc_ml.backends.mcu import McuBackend
from tinycc_ml.backends.project import Board
from tinycc_ml.chips import Chip
from tinycc_ml.errors import CompileError, FitError, ToolchainError
from tinycc_ml.passes.manager import TargetAttributes
from tinycc_ml.plugins import PluginError
from tinycc_ml.runtime.harness import (
    HarnessRows,
    HarnessSimulator,
    elf_sizes,
    harness_source,
    input_image_source,
    parse_harness_output,
)
from tinycc_ml.runtime.simulate import (
    INPUT_DTYPES,
    SCORE_DTYPES,
    SIMULATORS,
    BuildSpec,
    FirmwareSizes,
    Simulator,
    TargetRun,
    compile_objects,
    model_symbol_sizes,
    run_tool,
    support_file,
)
from tinycc_ml.runtime.toolchains import find_tool

__all__ = [
    "BACKENDS", "CAPABILITIES", "INPUT_DTYPES", "SCORE_DTYPES", "SIMULATORS", "Backend", "Board", "BuildOutput",
    "BuildSpec", "CEmitter", "CTarget", "CapabilityError", "Chip", "CompileError", "FirmwareSizes", "Fit",
    "FitError", "HarnessRows", "HarnessSimulator", "McuBackend", "PluginError", "Simulator", "TargetAttributes",
    "TargetRun", "ToolchainError", "available_backends", "compile_objects", "elf_sizes", "find_tool",
    "get_backend", "harness_source", "input_image_source", "model_symbol_sizes", "parse_harness_output",
    "register_backend", "run_tool", "support_file", "targets_supporting",
]
