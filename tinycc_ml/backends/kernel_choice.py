"""Which hand-written kernel, if any, a target uses for a fixed-point node (CTarget.fixed_kernel).

The choice sits apart from the kernel modules so that they import one another's helpers in one
direction only: kernels_sparse and kernels_distance use kernels_avr and kernels_m0_fused; nothing
imports back.
"""

from __future__ import annotations

from tinycc_ml.backends import kernels_avr, kernels_m0, kernels_m0_fused
from tinycc_ml.backends.c_emitter import CEmitter
from tinycc_ml.backends.kernels_distance import avr_clamp_squares, avr_sqdist8
from tinycc_ml.backends.kernels_sparse import avr_sparse_kernel, m0_sparse_kernel
from tinycc_ml.ir.graph import Node


def avr_fixed_kernel(em: CEmitter, node: Node) -> list[str] | None:
    lines = avr_sparse_kernel(em, node)  # sparse matrices, and the input clamp fused into them
    if lines is None:  # prototypes with 8 significant bits; a distance's input clamp with its sums
        lines = avr_sqdist8(em, node) or avr_clamp_squares(em, node)
    if lines is not None:
        return lines
    k = kernels_avr
    if node.op == "matvec" and k.matvec_ok(em, node):
        return k.kernel_matvec(em, node)
    if node.op == "sqdist" and k.sqdist_dot_ok(em, node):
        return k.kernel_sqdist_dot(em, node)
    if node.op == "sqdist" and k.sqdist_ok(em, node):
        return k.kernel_sqdist(em, node)
    if node.op == "clip":
        return k.kernel_clip(em, node)
    if node.op == "scale":
        return k.kernel_scale(em, node)
    if node.op == "exp_lut":
        return k.kernel_exp_lut(em, node)
    return None


def m0_fused_kernel(em: CEmitter, node: Node) -> list[str] | None:
    """The 9-row kernels with the input pass fused (kernels_m0_fused), sparse ones first."""
    lines = m0_sparse_kernel(em, node)  # sparse matrices, and the input clamp fused into them
    if lines is not None:
        return lines
    if node.op == "clip":
        return kernels_m0_fused.kernel_clip(em, node)
    if node.op == "matvec":
        return kernels_m0_fused.kernel_matvec(em, node)
    if node.op == "sqdist":
        return kernels_m0_fused.kernel_sqdist(em, node)
    return None


def m0_fixed_kernel(em: CEmitter, node: Node) -> list[str] | None:
    lines = m0_fused_kernel(em, node)  # 9-row kernels with the input pass fused, distances on them
    if lines is not None:
        return lines
    if node.op == "matvec":
        return kernels_m0.kernel_matvec(em, node)
    if node.op == "sqdist":
        return kernels_m0.kernel_sqdist(em, node)
    if node.op == "clip":
        return kernels_avr.kernel_clip(em, node, fuse=False)
    return None
