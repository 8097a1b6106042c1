"""A tinycc-ml backend for RISC-V RV32IMC chips (GD32VF103-class: 128 KB flash, 32 KB RAM), written as an
outside package against the public API (``tinycc_ml.target``) alone.

Builds use Debian's riscv64-unknown-elf-gcc with picolibc (``-march=rv32imc -mabi=ilp32``); runs use
``qemu-system-riscv32 -M virt`` under ``-icount shift=0``, where ``minstret`` counts retired instructions
exactly. The measurement firmware is tinycc-ml's portable harness with this package's board file
(support/board_virt.c: minstret, semihosting output and exit, the stack limit).

Dense mat-vecs run on the package's own kernel (kernels.py), which it lists in ``CTarget.kernels``.
"""

from __future__ import annotations

from tinycc_ml.target import Chip, CTarget, HarnessSimulator, McuBackend, support_file
from tinycc_ml_riscv.kernels import RV32_KERNELS

__all__ = ["RV32IMC", "RV32_KERNELS", "RiscvBackend", "SIMULATOR"]

_ARCH = ("-march=rv32imc", "-mabi=ilp32", "--specs=picolibc.specs", "--oslib=semihost")
FLASH_BASE, FLASH_SIZE = 0x80000000, 128 * 1024
RAM_BASE, RAM_SIZE = 0x80400000, 32 * 1024

RV32IMC = Chip(
    "RV32IMC (GD32VF103-class)", "rv32imc", FLASH_SIZE, RAM_SIZE, 108_000_000,
    cflags=(*_ARCH, "-Os", "-ffunction-sections", "-fdata-sections"),
    ldflags=(*_ARCH, "-Wl,--gc-sections", f"-Wl,--defsym=__flash={FLASH_BASE:#x}",
             f"-Wl,--defsym=__flash_size={FLASH_SIZE:#x}", f"-Wl,--defsym=__ram={RAM_BASE:#x}",
             f"-Wl,--defsym=__ram_size={RAM_SIZE:#x}", "-Wl,--defsym=__stack_size=0x1000"),
    code_estimate=3000, stack_estimate=256, flash_base=FLASH_BASE, ram_base=RAM_BASE)


def _qemu(elf: str) -> list[str]:
    return ["qemu-system-riscv32", "-M", "virt", "-display", "none", "-monitor", "none", "-serial", "none",
            "-bios", "none", "-icount", "shift=0", "-semihosting-config", "enable=on,target=native", "-kernel", elf]


SIMULATOR = HarnessSimulator(
    target="riscv", unit="instructions", chip=RV32IMC,
    compiler="riscv64-unknown-elf-gcc", size_tool="riscv64-unknown-elf-size", nm_tool="riscv64-unknown-elf-nm",
    board_sources=(support_file("board_virt.c", package="tinycc_ml_riscv"),), command=_qemu,
    tools=("qemu-system-riscv32",),
    install_hint="apt-get install -y --no-install-recommends gcc-riscv64-unknown-elf picolibc-riscv64-unknown-elf "
                 "qemu-system-misc")


class RiscvBackend(McuBackend):
    name = "riscv"
    description = "RISC-V RV32IMC (GD32VF103-class): C with constants in flash; qemu-system-riscv32-runnable"
    chip = RV32IMC
    simulator = "riscv"

    def c_target(self, graph) -> CTarget:
        return CTarget("riscv", kernels=RV32_KERNELS)
