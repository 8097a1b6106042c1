"""The Cortex-M4's kernel for convolutions of 3 input channels (``arm.m4_conv_rgb``: an image's RGB first layer,
the input rows widened in place of im2col) against tflite-micro on random shapes, in QEMU: every output byte
equal."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.backends.test_network_mcu import check_network
from tests.conftest import require_target
from tests.tflite_builder import NetBuilder
from tinycc_ml.arm import m4_conv_rgb
from tinycc_ml.arm.m4_conv_rgb import rgb_weights, segments, window_words


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


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10_000), h=st.integers(2, 9), w=st.integers(2, 17), out_c=st.sampled_from([4, 8]),
       kernel=st.sampled_from([(3, 3), (3, 3), (2, 2), (5, 3)]), stride=st.sampled_from([(1, 1), (2, 2), (1, 2)]),
       padding=st.sampled_from(["same", "valid"]), activation=st.sampled_from(["none", "relu6"]),
       zero_point=st.sampled_from([-128, 127, 5]), scratch=st.sampled_from([96, 200, 400]))
def test_rgb_convolutions_in_segments_equal_tflite_micro(tmp_path_factory, monkeypatch, seed, h, w, out_c, kernel,
                                                         stride, padding, activation, zero_point, scratch):
    """Rows wider than the scratch allows in segments of output columns (``m4_conv_rgb.segments``: VWW's two; here
    down to two columns a segment, an odd last one three), each segment's rows staged from its own first byte."""
    require_target("cortex-m4")
    monkeypatch.setattr(m4_conv_rgb, "SCRATCH_BYTES", scratch)
    n = NetBuilder(seed, 3000)
    x = n.input((h, w, 3), zero_point=zero_point)
    y = n.conv(x, out_c, kernel, stride, padding=padding, activation=activation)
    shape = n.shapes[y]
    if min(shape[1:3]) < 1:
        return
    result, _ = check_network(n.finish(n.fc(n.flatten(y), 3)), "cortex-m4", tmp_path_factory.mktemp("net"), 4)
    assert rgb_layers(result) == (1 if shape[2] >= 2 else 0)


def test_segments_and_weights(monkeypatch):
    """VWW's 48 columns (stride 2, 3 channels, 3x3: 4 slots) in two segments of 24 under 3 KB, ResNet-8's 32
    (stride 1: 6 slots) in one; an odd width's last segment one column more rather than one of one; the weight
    words' bytes (c0, c1 - [c0 < 0]) per lane, zero past the window row."""
    def slot_words(sx):
        return lambda width: 4 * -(-(3 * sx * (width - 1) + 9) // 4)
    assert segments(48, slot_words(2), 4) == (2, 24, 148)
    assert segments(32, slot_words(1), 6) == (1, 32, 104)
    assert segments(49, slot_words(2), 4) == (2, 26, 160)
    monkeypatch.setattr(m4_conv_rgb, "SCRATCH_BYTES", 600)  # 13 columns: 4, 4 and 5 (not 4, 4, 4 and 1)
    assert segments(13, slot_words(2), 4) == (3, 4, 36)
    assert window_words(9) == [0, 1, 4, 5, 8] and window_words(3) == [0, 1] and window_words(6) == [0, 1, 4, 5]
    W = np.array([[5, -3, 7], [-2, -127, 1], [0, 0, 0], [1, 2, 3]], np.int8)
    words = rgb_weights(W, [(0, 0, 2), (4, 1, None)])
    assert words.shape == (1, 2, 2)
    assert list(np.array([words[0, 0, 0]], "<i4").view(np.int8)) == [5, -2, 7, 1]
    assert list(np.array([words[0, 1, 0]], "<i4").view(np.int8)) == [-3, -128, 0, 0]  # -127 borrowing -3's sign
    assert list(np.array([words[0, 0, 1]], "<i4").view(np.int8)) == [0, 1, 0, 3]
    assert rgb_weights(np.array([[-1, 0, 0], [-128, 0, 0], [0] * 3, [0] * 3], np.int8), [(0, 0, None)]) is None


@pytest.mark.parametrize("shrink, activation, sl", [(5000.0, "none", 4), (40000.0, "relu6", 7), (600000.0, "none", 11)])
def test_left_shifts_equal_tflite_micro(tmp_path, shrink, activation, sl):
    """An output scale ``shrink`` times smaller: TFLite's multiplier above 1, a left shift of sl - 1 (3, 6, 10: the
    odd channel's 256 acc1 shifted right 4, right 1, then right 8 and left 11) before the SMMLAR, the zero point
    added after the shift (r = 0: no rounding nudge to fold it in), most outputs saturated."""
    require_target("cortex-m4")
    n = NetBuilder(7, 3000)
    x = n.input((9, 10, 3), zero_point=-128)
    y = n.conv(x, 8, (3, 3), (1, 1), activation=activation, per_channel=False)
    n.tensors[y].quantization.scale = [n.tensors[y].quantization.scale[0] / shrink]
    result, _ = check_network(n.finish(n.fc(n.flatten(y), 3)), "cortex-m4", tmp_path, 6)
    assert rgb_layers(result) == 1
    assert f"lsl %[e0u], %[e0u], #{sl}\\n" in result.files["net.c"]


@pytest.mark.parametrize("out_c, stride", [(8, (2, 2)), (16, (1, 1))])
def test_two_groups_a_loop_iteration_equal_tflite_micro(tmp_path, monkeypatch, out_c, stride):
    """``UNROLL_GROUPS``: two groups of 4 channels per iteration of the block's loop (off by default: code)."""
    require_target("cortex-m4")
    monkeypatch.setattr(m4_conv_rgb, "UNROLL_GROUPS", True)
    n = NetBuilder(out_c, 3000)
    x = n.input((11, 9, 3), zero_point=-128)
    y = n.conv(x, out_c, (3, 3), stride, activation="relu")
    result, _ = check_network(n.finish(n.fc(n.flatten(y), 3)), "cortex-m4", tmp_path, 4)
    assert rgb_layers(result) == 1 and f"#{2 * 4 * (4 + 2 * 14 + 4 * 3) + 4}\\n" in result.files["net.c"]
