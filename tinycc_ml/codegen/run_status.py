"""``int <prefix>_status(void)``: run-time faults of a call the C finishes anyway, where TFLite Micro's Invoke would
stop with an error (a GATHER or GATHER_ND index outside its tensor: clamped, never read outside the array). An op's
C sets the fault flag and defines the function (ir/ops/network/gather.py ``fault_flag``); here the header declares
it. 0: no fault since the last read; the read clears it, so a caller checks it after each call (or a batch)."""

from __future__ import annotations

from tinycc_ml.codegen.backend import BuildOutput
from tinycc_ml.codegen.labels import add_to_c, built_c


def has_status(source: str, prefix: str) -> bool:
    return f"int {prefix}_status(void)\n{{" in source


def add_status(output: BuildOutput) -> None:
    """Declare ``<prefix>_status`` in ``<prefix>.h`` where the C defines it."""
    if not built_c(output) or not has_status(output.files[f"{output.prefix}.c"], output.prefix):
        return
    add_to_c(output, ["/* Nonzero when a call since the last status() met an index outside its tensor (GATHER,",
                      " * GATHER_ND, EMBEDDING_LOOKUP): the C clamped it into the tensor and finished the call, where",
                      " * TFLite Micro's Invoke stops with an error. Reading the status clears it. */",
                      f"int {output.prefix}_status(void);", ""], [])
