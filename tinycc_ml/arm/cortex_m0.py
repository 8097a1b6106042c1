"""Cortex-M0 (nRF51822: 256 KB flash, 16 KB RAM): Thumb-1 friendly C from the shared MCU emitter.

Constants are plain static const (they stay in flash); no divide; products are 32-bit MULS.
Dense mat-vecs use the row-blocked kernel of arm.m0_kernels (x loaded once per 4 rows).
"""

from __future__ import annotations

from dataclasses import dataclass

from tinycc_ml.arm.boards import M0_BOARD
from tinycc_ml.arm.chips import NRF51822
from tinycc_ml.arm.kernel_table import M0_KERNELS
from tinycc_ml.arm.m0_fused import chain_offset_store
from tinycc_ml.target import CTarget, McuBackend

# a forest's straight-line code where it is faster: up to 32 KB, an eighth of the nRF51822's flash (the digits
# forest of benchmarks/trees.py: 1,455 -> 785 instructions at 26 KB against the top levels' 14 KB)
TREE_CODE_BUDGET = 32 * 1024


@dataclass
class M0Target(CTarget):
    name: str = "cortex-m0"
    inline_saturation: bool = True
    tree_code_budget: int = TREE_CODE_BUDGET

    def offset_store(self, em, name: str) -> str | None:
        return chain_offset_store(em, name)


class CortexM0Backend(McuBackend):
    name = "cortex-m0"
    description = "Cortex-M0 (nRF51822): Thumb-1 C, constants in flash, integer-only; QEMU/unicorn-runnable"
    chip = NRF51822
    simulator = "cortex-m0"
    board = M0_BOARD
    network_ops = None  # TFLite networks: the shared C, equal to tflite-micro's in QEMU and unicorn
    boards = {"microbit": M0_BOARD}

    def c_target(self, graph) -> CTarget:

        return M0Target(kernels=M0_KERNELS)
