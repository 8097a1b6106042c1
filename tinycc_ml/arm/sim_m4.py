"""Cortex-M4F and Cortex-M33 runs: the MPS2 AN386 / AN505 boards under QEMU -M mps2-an386 / mps2-an505
-icount shift=10.

The measurement firmware of sim_m0 (one harness protocol, support/tcm_arm_harness.h) on another
``Board``: support/tcm_m4_harness.c counts instructions with the CMSDK APB TIMER0 at 25 MHz (25.6
ticks per instruction under icount; QEMU models no DWT cycle counter), the Cortex-M startup switches
the FPU on, support/tcm_mps2.ld maps 4 MB of code SSRAM at 0 and 4 MB of data SSRAM at 0x20000000
with a 16 KB stack above .bss. The AN505 (Cortex-M33, secure state) has the same timer at its secure alias
0x50000000 (IRQ 3, 20 MHz) and its memories at 0x10000000 / 0x38000000 (support/tcm_mps2_an505.ld).
Counts are exact and cover the callee, as on the M0.
"""

from __future__ import annotations

import tempfile

import numpy as np

from tinycc_ml.arm import sim_m0
from tinycc_ml.arm.chips import MPS2_AN386, MPS2_AN505
from tinycc_ml.target import DEFAULT_MAX_CYCLES, BuildSpec, CompileError, FirmwareSizes, TargetRun, find_tool

AN386 = sim_m0.Board("cortex-m4", MPS2_AN386, "mps2-an386", ("tcm_m4_harness.c", "tcm_m0_startup.c"),
                     "tcm_mps2.ld", "M4", "UC_CPU_ARM_CORTEX_M4")
AN505 = sim_m0.Board("cortex-m33", MPS2_AN505, "mps2-an505", ("tcm_m4_harness.c", "tcm_m0_startup.c"),
                     "tcm_mps2_an505.ld", "M33", "UC_CPU_ARM_CORTEX_M33",
                     ("-DTCM_TIMER_BASE=0x50000000", "-DTCM_TIMER_IRQ=3"))


def require(method: str = "auto") -> None:
    """ToolchainError naming what is missing to build and run Cortex-M4 / M33 firmware."""
    if method not in ("auto", "qemu"):
        raise CompileError(f"unknown Cortex-M4/M33 method {method!r}; use auto or qemu")
    for tool in ("arm-none-eabi-gcc", "arm-none-eabi-size", "arm-none-eabi-nm", "qemu-system-arm"):
        find_tool(tool)


class M4Simulator:
    """An MPS2 board under QEMU (the AN386; M33_SIMULATOR: the AN505), as registered in simulate.SIMULATORS."""

    unit = "instructions"

    def __init__(self, board: sim_m0.Board = AN386):
        self.board = board

    def require(self, method: str = "auto") -> None:
        require(method)

    def run(self, spec: BuildSpec, x: np.ndarray, *, method: str = "auto", max_count: int = DEFAULT_MAX_CYCLES,
            timeout: float | None = None) -> TargetRun:
        require(method)
        with tempfile.TemporaryDirectory(prefix="tinycc-ml-m4-") as work:
            objs = sim_m0._Objects(spec, work, max_count, self.board)
            return sim_m0._run_qemu(objs, spec, x, max_count, timeout)

    def firmware_sizes(self, spec: BuildSpec) -> FirmwareSizes:
        with tempfile.TemporaryDirectory(prefix="tinycc-ml-") as work:
            return sim_m0.firmware_sizes(sim_m0._Objects(spec, work, DEFAULT_MAX_CYCLES, self.board))

    def profile(self, spec: BuildSpec, x: np.ndarray) -> dict[str, float]:
        """Instructions per predict call by function symbol (unicorn's Cortex-M4 / M33; integer builds)."""
        return sim_m0.profile(spec, x, self.board)

    def cycles(self, spec: BuildSpec, x: np.ndarray, wait_states: int = 0):
        """``m4_cycles.CycleCount``: cycles and instructions per predict call (one per row), cycles per function
        symbol; the TRM's timings on the executed instruction stream, ``wait_states`` on flash reads and refills."""
        return sim_m0.cycles(spec, x, self.board, wait_states)


SIMULATOR = M4Simulator()
M33_SIMULATOR = M4Simulator(AN505)
