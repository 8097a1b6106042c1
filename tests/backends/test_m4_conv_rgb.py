"""The Cortex-M4's kernel for convolutions of 3 input channels (``arm.m4_conv_rgb``: an image's RGB first layer,
the input rows widened in place of im2col) against tflite-micro on random shapes, in QEMU: every output byte
equal."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.backends.test_network_mcu import check_network
from tests.conftest import require_target
from tests.tflite_builder import NetBuilder


def rgb_layers(result) -> int:
    return result.files["net.c"].count("(m4_conv_rgb) */")


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10_000), h=st.integers(2, 13), w=st.integers(2, 13), out_c=st.sampled_from([4, 8, 12, 16]),
       kernel=st.sampled_from([(3, 3), (3, 3), (1, 1), (2, 3), (3, 1), (5, 5)]),
       stride=st.sampled_from([(1, 1), (2, 2), (1, 2), (2, 1)]), padding=st.sampled_from(["same", "valid"]),
       activation=st.sampled_from(["none", "relu", "relu6"]), per_channel=st.booleans(),
       zero_point=st.sampled_from([-128, 127, -3, 0]), optimize=st.sampled_from(["size", "speed"]))
def test_rgb_convolutions_equal_tflite_micro(tmp_path_factory, seed, h, w, out_c, kernel, stride, padding, activation,
                                             per_channel, zero_point, optimize):
    """Odd and even sizes, SAME padding before and after (stride 2: after only, or none), strides 1 and 2 along
    either axis, per-channel shifts, activation clamps, the input zero point at the extremes; the network's input
    the layer's (the first layer, as in ResNet-8 and VWW)."""
    require_target("cortex-m4")
    n = NetBuilder(seed, 3000)
    x = n.input((h, w, 3), zero_point=zero_point)
    y = n.conv(x, out_c, kernel, stride, padding=padding, activation=activation, per_channel=per_channel)
    shape = n.shapes[y]
    if min(shape[1:3]) < 1:
        return
    result, _ = check_network(n.finish(n.fc(n.flatten(y), 3)), "cortex-m4", tmp_path_factory.mktemp("net"), 4,
                              optimize=optimize)
    assert rgb_layers(result) == (1 if shape[2] >= 2 else 0)
