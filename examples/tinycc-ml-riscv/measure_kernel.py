"""Instructions per prediction of dense linear classifiers on the RV32IMC, with and without this package's
mat-vec kernel (QEMU under -icount: retired instructions, exact). Run: python measure_kernel.py

"kernel predicted" is the kernel's KernelCost for the mat-vec node alone (the build's kernel report); the
measured counts are whole predictions (the input clamp, the bias and the argmax too)."""

from __future__ import annotations

import tempfile

import numpy as np
from sklearn.linear_model import RidgeClassifier
from tinycc_ml_riscv import RiscvBackend

import tinycc_ml
from tinycc_ml.target import CTarget, get_backend, register_backend

CASES = [(10, 64, "int16"), (32, 64, "int16"), (10, 64, "int8"), (16, 256, "int16")]  # rows, columns, precision


@register_backend
class SharedCBackend(RiscvBackend):
    """The same chip and simulator, every op on tinycc-ml's shared C: the baseline."""

    name = "riscv-shared-c"

    def c_target(self, graph) -> CTarget:
        return CTarget("riscv")


def measure(target: str, rows: int, cols: int, precision: str) -> tuple[int, int, int | None]:
    """Median instructions per prediction, the model's flash bytes, the kernel's predicted instructions."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(20 * rows, cols))
    model = RidgeClassifier().fit(X, np.arange(len(X)) % rows)  # a dense rows x cols weight matrix
    X = X[:20]
    with tempfile.TemporaryDirectory() as out:
        result = tinycc_ml.compile(model, target=target, precision=precision, calibration=X, out_dir=out, name="m")
        run = get_backend(target).simulate(out, result.output, X)
    predicted = next((k["predicted_cycles"] for k in result.output.kernels), None)
    return int(np.median(run.instructions)), run.model_flash_bytes, predicted


def main() -> None:
    print("| model (rows x columns, weights) | MACs | shared C | kernel | saved | kernel predicted "
          "| flash shared C / kernel |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for rows, cols, precision in CASES:
        base, base_flash, _ = measure(SharedCBackend.name, rows, cols, precision)
        kern, kern_flash, predicted = measure("riscv", rows, cols, precision)
        print(f"| linear {rows} x {cols}, {precision} | {rows * cols} | {base} | {kern} | {base - kern} "
              f"({(base - kern) / base:.0%}) | {predicted} | {base_flash} / {kern_flash} B |")


if __name__ == "__main__":
    main()
