"""The ATmega328P's hand-written kernels, in the order the emitter asks them (``CTarget.kernels``): for a
mat-vec the sparse kernel first (its cost model also decides for the dense one), then the dense kernel;
for a distance the 8-bit prototypes, then the dot-product form on the mat-vec kernel."""

from __future__ import annotations

from tinycc_ml.avr import kernels as k
from tinycc_ml.avr import network_pow2
from tinycc_ml.avr.distance import avr_clamp_squares, avr_sqdist8
from tinycc_ml.avr.kernels import dot8_avr, muls8
from tinycc_ml.avr.knn import avr_sqdist_kvote
from tinycc_ml.avr.sparse import avr_sparse_kernel
from tinycc_ml.avr.wsqdist import avr_wsqdist, avr_wsqdist_cost, avr_wsqdist_ok
from tinycc_ml.target import Kernel, small_network_kernels

AVR_KERNELS = (
    # sparse matrices first (with the input clamp fused into them), then the dense kernels
    Kernel("matvec", avr_sparse_kernel),
    Kernel("matvec", k.kernel_matvec, claims=k.matvec_ok),
    # prototypes with 8 significant bits first; then distances on the mat-vec kernel
    Kernel("sqdist", avr_sparse_kernel),
    Kernel("sqdist", avr_sqdist8),
    Kernel("sqdist", k.kernel_sqdist_dot, claims=k.sqdist_dot_ok),
    Kernel("sqdist", k.kernel_sqdist, claims=k.sqdist_ok),
    # GaussianNB's weighted distances: every class's terms in one asm pass
    Kernel("wsqdist", avr_wsqdist, claims=avr_wsqdist_ok, cost=avr_wsqdist_cost, name="avr-wsqdist-asm"),
    # a sparse mat-vec's fused clamp; a distance's input clamp with its sums and squares
    Kernel("clip", avr_sparse_kernel),
    Kernel("clip", avr_clamp_squares),
    Kernel("clip", k.kernel_clip),
    Kernel("scale", avr_sparse_kernel),
    Kernel("scale", k.kernel_scale),
    Kernel("exp_lut", avr_sparse_kernel),
    Kernel("exp_lut", k.kernel_exp_lut),
    Kernel("matvec_at", k.kernel_matvec_at),
    Kernel("mul", k.kernel_mul),
    Kernel("tanh_lut", k.kernel_tanh_lut),
    # kNN: distances on the mat-vec kernel a block at a time, the k best kept while scanning
    Kernel("sqdist_kvote", avr_sqdist_kvote),
    # the project's fixed-point network layers: each filter row a dot product in assembly
    Kernel("conv2d", network_pow2.conv2d, claims=network_pow2.avr_layer),
    Kernel("fully_connected", network_pow2.fully_connected, claims=network_pow2.avr_layer),
    # the input clamp applied on read (no RAM copy of the input): a few features at a time
    Kernel("matvec", k.kernel_matvec_on_read, precision="on_read"),
    # TFLite's int8 network layers, their products on MULS
    *small_network_kernels(product=muls8, dot=dot8_avr),
)
