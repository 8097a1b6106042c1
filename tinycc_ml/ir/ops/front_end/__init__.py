"""Ops of the front ends (``tinycc_ml.features``) with the project's fixed point, for their integer builds: the
functions the float graphs took from TFLite's float-only ``float_unary`` (square root, natural log by table, absolute
value) and the block-scaled power spectrum. One module per op; importing this package registers them."""

# the network ops first: the signal library (whose int16 FFT the power spectrum runs) and the network package import
# each other, and only that order completes
from tinycc_ml.ir.ops import network  # noqa: F401
from tinycc_ml.ir.ops.front_end import abs_value, log, log_mel_power, power_spectrum, sqrt  # noqa: F401  (register)
