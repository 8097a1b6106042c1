"""Cortex-M4F (MPS2 AN386 in QEMU; the core of the STM32F4/L4, nRF52): Thumb-2 C from the shared MCU
emitter, constants in flash (plain static const), float builds on the single-precision FPU
(-mfpu=fpv4-sp-d16 -mfloat-abi=hard). Integer mat-vecs and distances use the DSP extension's dual
16-bit multiply-accumulate (arm.m4_kernels: SMLAD on packed pairs, int8 weights widened by SXTB16).
cortex-m33: the same code for the Cortex-M33 (MPS2 AN505 in QEMU; Armv8-M Mainline with the DSP
extension and the FPv5 single-precision FPU, as in the nRF53, STM32L5/U5).
"""

from __future__ import annotations

from dataclasses import dataclass

from tinycc_ml.arm import m4_fft, m4_forest
from tinycc_ml.arm.boards import M4_BOARD, M33_BOARD, NRF52840_BOARD, STM32F405_BOARD
from tinycc_ml.arm.chips import MPS2_AN386, MPS2_AN505
from tinycc_ml.arm.kernel_table import M4_KERNELS
from tinycc_ml.target import CTarget, McuBackend, McuEmitter

ACLE = "#include <arm_acle.h>"  # __ssat
# a forest's straight-line code where it is faster: up to a quarter of the chip's flash (c_target; the STM32F4/L4
# and nRF52 have 256 KB-2 MB: digits' RF(50, depth 6) takes about 60 KB, letter-26's RF(10) of full depth 400 KB)
TREE_CODE_BUDGET = 64 * 1024
TREE_CODE_FLASH_SHARE = 4


@dataclass
class M4Target(CTarget):
    name: str = "cortex-m4"
    extra_includes: tuple[str, ...] = (ACLE,)
    tree_code_budget: int = TREE_CODE_BUDGET

    def real_fft(self, em, dtype, fft_length):
        return m4_fft.real_fft(em, dtype, fft_length)

    def forest_asm(self, em, name, layout, n_outputs, input_dim, acc_bytes, bounds, shift, saturation):
        # acc_bytes: ARM's int_fast16_t is 32 bits, so the sums are stored as words whatever the C type
        return m4_forest.forest_asm(name, layout, n_outputs, input_dim, bounds, shift, saturation)


@dataclass
class M4Emitter(McuEmitter):
    """The MCU emitter with the saturating stores on SSAT, always inlined (at -Os GCC keeps the shared
    ``static inline`` clamp out of line: a call per stored element)."""

    def assemble(self, api, functions):
        for bits in (8, 16):
            name = self.sym(f"sat{bits}")
            if name in self.helpers:
                self.helpers[name] = (f"static inline __attribute__((always_inline)) int{bits}_t {name}(int32_t v)\n"
                                      f"{{\n    return (int{bits}_t)__ssat(v, {bits});\n}}\n")
        return super().assemble(api, functions)


class CortexM4Backend(McuBackend):
    name = "cortex-m4"
    description = "Cortex-M4F (MPS2 AN386): Thumb-2 C, DSP dual-MAC kernels, float on the FPU; QEMU-runnable"
    chip = MPS2_AN386
    simulator = "cortex-m4"
    board = M4_BOARD
    network_ops = None  # TFLite networks: arm.m4_network's kernels, equal to tflite-micro's in QEMU
    boards = {"mps2-an386": M4_BOARD, "stm32f405": STM32F405_BOARD, "nrf52840": NRF52840_BOARD}

    def emit(self, graph, prefix, model_description):
        # no sparse x-page kernels here: one emission (McuBackend.emit's retry is for those)
        return M4Emitter(graph, prefix, self.c_target(graph), header_lines=list(model_description)).build_output()

    def c_target(self, graph) -> CTarget:
        share = self.chip.flash // TREE_CODE_FLASH_SHARE
        return M4Target(kernels=M4_KERNELS, tree_code_budget=share, forest_asm_budget=share)


@dataclass
class M33Target(CTarget):
    name: str = "cortex-m33"
    extra_includes: tuple[str, ...] = (ACLE,)
    tree_code_budget: int = TREE_CODE_BUDGET

    def real_fft(self, em, dtype, fft_length):
        return m4_fft.real_fft(em, dtype, fft_length)

    def forest_asm(self, em, name, layout, n_outputs, input_dim, acc_bytes, bounds, shift, saturation):
        return m4_forest.forest_asm(name, layout, n_outputs, input_dim, bounds, shift, saturation)


class CortexM33Backend(CortexM4Backend):
    name = "cortex-m33"
    description = "Cortex-M33 (MPS2 AN505): the Cortex-M4 kernels (DSP extension), float on the FPU; QEMU-runnable"
    chip = MPS2_AN505
    simulator = "cortex-m33"
    board = M33_BOARD
    boards = {"mps2-an505": M33_BOARD}

    def c_target(self, graph) -> CTarget:
        share = self.chip.flash // TREE_CODE_FLASH_SHARE
        return M33Target(kernels=M4_KERNELS, tree_code_budget=share, forest_asm_budget=share)
