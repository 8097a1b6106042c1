"""The Arm targets' hand-written kernels, in the order the emitter asks them (``CTarget.kernels``)."""

from __future__ import annotations

from tinycc_ml.arm import (
    m0_fused,
    m0_kernels,
    m4_add,
    m4_batch_matmul,
    m4_concatenation,
    m4_conv_rgb,
    m4_elementwise,
    m4_kernels,
    m4_log_mel_power,
    m4_lstm,
    m4_network,
    m4_network16,
    m4_network_planar,
    m4_network_pool,
    m4_pad,
    m4_pointwise_narrow,
    m4_pool,
    m4_power_spectrum,
    m4_softmax,
    m4_svdf,
    m4_transpose,
    m4_transpose_conv,
    network_pow2,
)
from tinycc_ml.arm.m0_knn import m0_sqdist_kvote
from tinycc_ml.arm.m0_sparse import m0_sparse_kernel
from tinycc_ml.arm.wsqdist import kernel_wsqdist_m0, kernel_wsqdist_m4, m0_wsqdist_cost, m4_wsqdist_cost, wsqdist_ok
from tinycc_ml.target import Kernel, kernel_clip16, small_network_kernels

# Cortex-M0: sparse kernels, then the 9-row kernels with the input pass fused (distances on them), then the
# 4-row kernels
M0_KERNELS = (
    Kernel("matvec", m0_sparse_kernel),
    Kernel("matvec", m0_fused.kernel_matvec),
    Kernel("matvec", m0_kernels.kernel_matvec),
    Kernel("sqdist", m0_sparse_kernel),
    Kernel("sqdist", m0_fused.kernel_sqdist8),
    Kernel("sqdist", m0_fused.kernel_sqdist),
    Kernel("sqdist", m0_kernels.kernel_sqdist),
    Kernel("clip", m0_sparse_kernel),
    Kernel("clip", m0_fused.kernel_clip),
    Kernel("clip", kernel_clip16),
    Kernel("matvec_at", m0_fused.kernel_matvec_at),
    # similarities storing the offset input and its sum for the mat-vec kernel reading them
    Kernel("exp_lut", m0_fused.kernel_exp_lut),
    Kernel("sqdist_kvote", m0_sqdist_kvote),
    # GaussianNB's weighted distances: the term loop as a function (costed, measured apart)
    Kernel("wsqdist", kernel_wsqdist_m0, claims=wsqdist_ok, cost=m0_wsqdist_cost, name="m0-wsqdist-c"),
    # TFLite's int8 network layers
    *small_network_kernels(),
    # the project's int16 and int8 network layers: two output channels per input element
    Kernel("conv2d", network_pow2.conv2d_m0, claims=network_pow2.fx_layer),
    Kernel("fully_connected", network_pow2.fully_connected_m0, claims=network_pow2.fx_layer),
)

# Cortex-M4 and M33: dense mat-vecs and distances on SMLAD (sparse matrices and the rest: the shared C)
M4_KERNELS = (
    Kernel("matvec", m4_kernels.kernel_matvec),
    Kernel("clip", m4_kernels.kernel_clip),
    Kernel("sqdist", m4_kernels.kernel_sqdist),
    Kernel("wsqdist", kernel_wsqdist_m4, claims=wsqdist_ok, cost=m4_wsqdist_cost, name="m4-wsqdist-c"),
    # TFLite's int8 network layers (arm.m4_network)
    Kernel("conv2d", m4_conv_rgb.conv2d, claims=m4_network.tflite_int8),
    Kernel("conv2d", m4_pointwise_narrow.conv2d, claims=m4_network.tflite_int8),
    Kernel("conv2d", m4_network.conv2d, claims=m4_network.tflite_int8),
    Kernel("depthwise_conv2d", m4_network_planar.depthwise_conv2d, claims=m4_network.tflite_int8),
    Kernel("depthwise_conv2d", m4_network.depthwise_conv2d, claims=m4_network.tflite_int8),
    Kernel("fully_connected", m4_network.fully_connected, claims=m4_network.tflite_int8),
    Kernel("tensor_add", m4_add.tensor_add, claims=m4_network.tflite_int8),
    # the ops CMSIS-NN optimises besides (arm.m4_elementwise, ...)
    Kernel("tensor_mul", m4_elementwise.tensor_mul, claims=m4_elementwise.mul_claims),
    Kernel("tensor_mul", m4_elementwise.tensor_mul_fx16, claims=m4_elementwise.mul_fx16_claims),
    Kernel("tensor_maximum", m4_elementwise.tensor_maximum, claims=m4_elementwise.minmax_claims),
    Kernel("tensor_minimum", m4_elementwise.tensor_minimum, claims=m4_elementwise.minmax_claims),
    Kernel("max_pool2d", m4_pool.max_pool2d, claims=m4_pool.max_pool_claims),
    Kernel("average_pool2d", m4_network_pool.average_pool2d, claims=m4_network_pool.avg_pool_claims),
    Kernel("softmax", m4_softmax.softmax, claims=m4_softmax.softmax_claims),
    Kernel("pad", m4_pad.pad, claims=m4_pad.pad_claims),
    Kernel("transpose", m4_transpose.transpose, claims=m4_transpose.transpose_claims),
    Kernel("concatenation", m4_concatenation.concatenation, claims=m4_concatenation.concatenation_claims),
    # TFLite's 16x8 layers (arm.m4_network16)
    Kernel("conv2d", m4_network16.conv2d, claims=m4_network16.tflite_16x8),
    Kernel("depthwise_conv2d", m4_network16.depthwise_conv2d, claims=m4_network16.tflite_16x8),
    Kernel("fully_connected", m4_network16.fully_connected, claims=m4_network16.tflite_16x8),
    Kernel("tensor_add", m4_network16.tensor_add, claims=m4_network16.tflite_16x8),
    # the front end's integer power spectrum (arm.m4_power_spectrum, its FFT arm.m4_fft)
    Kernel("power_spectrum", m4_power_spectrum.power_spectrum, claims=m4_power_spectrum.power_claims),
    Kernel("log_mel_power", m4_log_mel_power.log_mel_power, claims=m4_log_mel_power.log_mel_claims),
    Kernel("batch_matmul", m4_batch_matmul.batch_matmul, claims=m4_batch_matmul.batch_matmul_claims),
    Kernel("transpose_conv2d", m4_transpose_conv.transpose_conv, claims=m4_transpose_conv.transpose_conv_claims),
    Kernel("svdf_state", m4_svdf.svdf_state, claims=m4_svdf.svdf_state_claims),
    Kernel("svdf_output", m4_svdf.svdf_output, claims=m4_svdf.svdf_output_claims),
    Kernel("lstm_cell", m4_lstm.lstm_step, claims=m4_lstm.lstm_claims, name="m4-lstm-cell"),
    Kernel("lstm_hidden", m4_lstm.lstm_step, claims=m4_lstm.lstm_claims, name="m4-lstm-hidden"),
    # the project's int16 and int8 network layers (arm.network_pow2)
    Kernel("conv2d", network_pow2.conv2d_m4, claims=network_pow2.fx_layer),
    Kernel("fully_connected", network_pow2.fully_connected_m4, claims=network_pow2.fx_layer),
)
