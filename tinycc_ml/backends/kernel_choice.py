"""Which hand-written kernel, if any, a target uses for a fixed-point node: the targets' override
tables of the shared code tables (CTarget.code_overrides).

The choice sits apart from the kernel modules so that they import one another's helpers in one
direction only: kernels_sparse and kernels_distance use kernels_avr and kernels_m0_fused; nothing
imports back.
"""

from __future__ import annotations

from tinycc_ml.backends import kernels_avr, kernels_clip, kernels_knn, kernels_m0, kernels_m0_fused, kernels_m4
from tinycc_ml.backends.c_emitter import CEmitter
from tinycc_ml.backends.kernels_distance import avr_clamp_squares, avr_sqdist8
from tinycc_ml.backends.kernels_sparse import avr_sparse_kernel, m0_sparse_kernel
from tinycc_ml.ir.graph import Node


def first_of(*codes):
    """One table entry from several kernels: the first that does not decline (None)."""
    def entry(em: CEmitter, node: Node) -> list[str] | None:
        for code in codes:
            lines = code(em, node)
            if lines is not None:
                return lines
        return None
    return entry


def _when(ok, code):
    return lambda em, node: code(em, node) if ok(em, node) else None


k = kernels_avr
# AVR: sparse matrices first (with the input clamp fused into them), then the dense kernels
AVR_CODE_OVERRIDES = {
    ("matvec", "fixed"): first_of(avr_sparse_kernel, _when(k.matvec_ok, k.kernel_matvec)),
    # prototypes with 8 significant bits first; then distances on the mat-vec kernel
    ("sqdist", "fixed"): first_of(avr_sparse_kernel, avr_sqdist8, _when(k.sqdist_dot_ok, k.kernel_sqdist_dot),
                                  _when(k.sqdist_ok, k.kernel_sqdist)),
    # a distance's input clamp with its sums and squares
    ("clip", "fixed"): first_of(avr_sparse_kernel, avr_clamp_squares, k.kernel_clip),
    ("scale", "fixed"): first_of(avr_sparse_kernel, k.kernel_scale),
    ("exp_lut", "fixed"): first_of(avr_sparse_kernel, k.kernel_exp_lut),
    ("matvec_at", "fixed"): k.kernel_matvec_at,
    ("mul", "fixed"): k.kernel_mul,
    ("tanh_lut", "fixed"): k.kernel_tanh_lut,
    # kNN: distances on the mat-vec kernel a block at a time, the k best kept while scanning
    ("sqdist_kvote", "fixed"): kernels_knn.avr_sqdist_kvote,
    # the input clamp applied on read (no RAM copy of the input): a few features at a time
    ("matvec", "on_read"): k.kernel_matvec_on_read,
}

# Cortex-M0: sparse kernels, then the 9-row kernels with the input pass fused (distances on them),
# then the 4-row kernels
M0_CODE_OVERRIDES = {
    ("matvec", "fixed"): first_of(m0_sparse_kernel, kernels_m0_fused.kernel_matvec, kernels_m0.kernel_matvec),
    ("sqdist", "fixed"): first_of(m0_sparse_kernel, kernels_m0_fused.kernel_sqdist8, kernels_m0_fused.kernel_sqdist,
                                  kernels_m0.kernel_sqdist),
    ("clip", "fixed"): first_of(m0_sparse_kernel, kernels_m0_fused.kernel_clip,
                                kernels_clip.kernel_clip16),
    ("matvec_at", "fixed"): kernels_m0_fused.kernel_matvec_at,
    # similarities storing the offset input and its sum for the mat-vec kernel reading them
    ("exp_lut", "fixed"): kernels_m0_fused.kernel_exp_lut,
    ("sqdist_kvote", "fixed"): kernels_knn.m0_sqdist_kvote,
}

# Cortex-M4: dense mat-vecs and distances on SMLAD (sparse matrices and the rest: the shared C)
M4_CODE_OVERRIDES = {
    ("matvec", "fixed"): kernels_m4.kernel_matvec,
    ("sqdist", "fixed"): kernels_m4.kernel_sqdist,
}
