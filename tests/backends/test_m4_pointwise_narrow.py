"""The Cortex-M4's pointwise kernel for 8, 16 and 32 input channels (``arm.m4_pointwise_narrow``: two positions'
inputs in registers, a pass per 8 inputs, the weights prescaled by the left shift) against tflite-micro in QEMU, every
output byte: per-channel scales from long right shifts to left shifts, zero points at the int8 extremes, activation
clamps, odd position counts."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.backends.test_network_mcu import check_network
from tests.conftest import require_target
from tests.tflite_builder import NetBuilder
from tinycc_ml.arm.m4_pointwise_narrow import channel_words, modified_immediate

MARK = "two positions at a time (m4_pointwise_narrow)"


def pointwise(seed: int, h: int, w: int, in_c: int, out_c: int, activation: str, per_channel: bool, x_zp: int,
              y_zp: int, exponents: tuple[float, float], small: float) -> bytes:
    """A computed input of in_c channels (its zero point x_zp), the 1x1 layer under test to out_c channels: its
    per-channel weight scales times 2^e (e uniform in ``exponents``: the multipliers' shifts), a fraction ``small``
    of its channels with weights in [-2, 2] and scales times 2^11 more (left shifts on accumulators that stay
    small), its output zero point y_zp; a fully connected layer after it."""
    n = NetBuilder(seed, 3000)
    rng = np.random.default_rng(seed + 1)
    t = n.conv(n.input((h, w, 4)), in_c, (1, 1), activation="relu")
    n.tensors[t].quantization.zeroPoint = [x_zp]
    y = n.conv(t, out_c, (1, 1), activation=activation, per_channel=per_channel)
    _, wt, bt = n.operators[-1].inputs
    n.tensors[y].quantization.zeroPoint = [y_zp]
    channels = out_c if per_channel else 1
    factors = 2.0 ** rng.uniform(*exponents, size=channels)
    weights = np.asarray(n.buffers[n.tensors[wt].buffer].data, np.uint8).view(np.int8).reshape(out_c, in_c).copy()
    if per_channel:
        tiny = rng.random(out_c) < small
        weights[tiny] = rng.integers(-2, 3, size=(int(tiny.sum()), in_c))
        factors[tiny] *= 2.0 ** 11
        n.buffers[n.tensors[wt].buffer].data = weights.view(np.uint8).reshape(-1).tolist()
    for tensor in (wt, bt):
        q = n.tensors[tensor].quantization
        q.scale = [float(np.float32(s * f)) for s, f in zip(q.scale, factors)]
    return n.finish(n.fc(n.flatten(y), 3))


ZERO_POINTS = st.one_of(st.sampled_from([-128, 127, 0]), st.integers(-128, 127))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10_000), h=st.integers(1, 7), w=st.integers(1, 9), in_c=st.sampled_from([8, 16, 32]),
       out_c=st.integers(1, 20), activation=st.sampled_from(["none", "relu", "relu6"]), per_channel=st.booleans(),
       x_zp=ZERO_POINTS, y_zp=ZERO_POINTS, small=st.sampled_from([0.0, 0.5]),
       exponents=st.sampled_from([(-1.0, 1.0), (-12.0, 3.0), (-20.0, -8.0)]),
       optimize=st.sampled_from(["size", "speed"]))
def test_narrow_pointwise_equals_tflite_micro(tmp_path_factory, seed, h, w, in_c, out_c, activation, per_channel,
                                             x_zp, y_zp, small, exponents, optimize):
    require_target("cortex-m4")
    data = pointwise(seed, h, w, in_c, out_c, activation, per_channel, x_zp, y_zp, exponents, small)
    result, _ = check_network(data, "cortex-m4", tmp_path_factory.mktemp("net"), 4, optimize=optimize)
    # the kernel wherever its bounds hold: always for the moderate scales (no left shift beyond 7)
    if exponents == (-1.0, 1.0) and not small:
        assert result.files["net.c"].count(MARK) == 1


@pytest.mark.parametrize("target, in_c, h, w", [("cortex-m33", 16, 3, 5), ("cortex-m4", 8, 48, 48),
                                               ("cortex-m4", 32, 1, 1)])
def test_vww_shapes_and_the_m33(tmp_path, target, in_c, h, w):
    """VWW's 8 -> 16 layer at 48 x 48; a single position (no pair: the scratch copy alone); the Cortex-M33."""
    require_target(target)
    data = pointwise(in_c + h, h, w, in_c, 16, "relu6", True, -128, -128, (-1.0, 1.0), 0.0)
    result, _ = check_network(data, target, tmp_path, 3)
    assert result.files["net.c"].count(MARK) == 1


def test_channel_words_and_immediates():
    """Per channel its bias' times 2^(left+1), multiplier, left + 1; the immediates the requantisation adds."""
    words = channel_words(np.array([5, -7]), np.array([1 << 30, 3 << 28]), np.array([1, -3]))
    assert words.tolist() == [5 * 4, 1 << 30, 2, -7 * 2, 3 << 28, 1]
    assert modified_immediate(255 << 20) and modified_immediate(1) and modified_immediate(4080)
    assert not modified_immediate(0x1FF << 3)
