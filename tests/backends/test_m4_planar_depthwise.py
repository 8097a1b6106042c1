"""The Cortex-M4's planar depthwise kernel (``arm.m4_network_planar``: 3x3, stride 1, one channel's int16 plane at a
time, SMLAD on pairs of taps) against tflite-micro on random shapes, in QEMU: every output byte equal."""

from __future__ import annotations

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tests.backends.test_network_mcu import check_network
from tests.conftest import require_target
from tests.tflite_builder import NetBuilder
from tinycc_ml.arm.m4_network_planar import blocks, orientation


def planar_layers(result) -> int:
    """The planar kernels in a build's C."""
    return result.files["net.c"].count(", planar: per channel")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10_000), h=st.integers(8, 14), w=st.integers(8, 14), channels=st.integers(1, 9),
       padding=st.sampled_from(["same", "valid"]), activation=st.sampled_from(["none", "relu", "relu6"]),
       per_channel=st.booleans(), first=st.sampled_from(["conv", "depthwise"]),
       optimize=st.sampled_from(["size", "speed"]))
def test_planar_depthwise_equals_tflite_micro(tmp_path_factory, seed, h, w, channels, padding, activation,
                                              per_channel, first, optimize):
    require_target("cortex-m4")
    # planes of at least 6 x 8 outputs: the cost model's choice (smaller ones stay on m4_network's kernel)
    n = NetBuilder(seed, 3000)
    x = n.input((h, w, channels))
    # a computed input: a pointwise convolution (the depthwise written over it where the plan allows) or a
    # strided depthwise (the old kernel's) before the planar one
    y = n.conv(x, channels, (1, 1), activation=activation) if first == "conv" else n.depthwise(x, 1, (1, 1))
    y = n.depthwise(y, 1, (3, 3), padding=padding, activation=activation, per_channel=per_channel)
    y = n.conv(y, 3, (1, 1))
    result, _ = check_network(n.finish(n.fc(n.flatten(y), 3)), "cortex-m4", tmp_path_factory.mktemp("net"), 4,
                              optimize=optimize)  # "speed": the weight pairs widened in flash
    assert planar_layers(result) >= 1


def test_orientation_and_blocks():
    """KWS's 25 x 5 output runs along its 25 rows (transposed); a row of 5 is a block of 4 and one of 1, of 6 a
    block of 4 and one of 2, of 7 a block of 4 and one of 4 storing 3."""
    assert orientation(25, 5) and not orientation(5, 25) and not orientation(48, 48)
    assert blocks(5) == (1, [(4, 1, 1)]) and blocks(6) == (1, [(4, 2, 2)])
    assert blocks(7) == (1, [(4, 4, 3)]) and blocks(8) == (2, [])


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10_000), h=st.integers(1, 9), w=st.integers(1, 12), in_c=st.sampled_from([4, 8, 16]),
       out_c=st.integers(1, 12), kernel=st.tuples(st.integers(1, 3), st.integers(1, 3)),
       stride=st.tuples(st.integers(1, 2), st.integers(1, 2)), dilation_y=st.integers(1, 2),
       padding=st.sampled_from(["same", "valid"]), activation=st.sampled_from(["none", "relu6"]))
def test_convolutions_on_widened_rows_equal_tflite_micro(tmp_path_factory, seed, h, w, in_c, out_c, kernel, stride,
                                                         dilation_y, padding, activation):
    """Convolutions whose columns the paired kernel reads in place from widened input rows (``rows_function``:
    whole-word windows, output rows of even width) against tflite-micro, every byte."""
    require_target("cortex-m4")
    n = NetBuilder(seed, 3000)
    x = n.input((h, w, in_c))
    y = n.conv(x, in_c, (1, 1), activation="relu")  # a computed input
    y = n.conv(y, out_c, kernel, stride, (dilation_y, 1), padding, activation)
    assume(min(n.shapes[y]) >= 1)
    result, _ = check_network(n.finish(n.fc(n.flatten(y), 3)), "cortex-m4", tmp_path_factory.mktemp("net"), 4)
    pointwise = kernel == (1, 1) and stride == (1, 1)  # its columns are the input itself
    assert ("m4_rows_" in result.files["net.c"]) == (n.shapes[y][2] % 2 == 0 and not pointwise)
