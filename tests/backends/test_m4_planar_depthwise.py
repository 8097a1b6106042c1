"""The Cortex-M4's planar depthwise kernel (``arm.m4_network_planar``: 3x3, strides 1 and 2, one channel's int16 plane
at a time, SMLAD on pairs of taps) against tflite-micro on random shapes, in QEMU: every output byte equal."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tests.backends.test_network_mcu import check_network
from tests.conftest import require_target
from tests.tflite_builder import NetBuilder
from tinycc_ml.arm import m4_network_planar
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


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10_000), h=st.integers(3, 17), w=st.integers(3, 17), channels=st.integers(1, 9),
       stride=st.sampled_from([(2, 2), (2, 2), (1, 2), (2, 1)]), padding=st.sampled_from(["same", "valid"]),
       activation=st.sampled_from(["none", "relu", "relu6"]), per_channel=st.booleans(),
       first=st.sampled_from(["conv", "depthwise"]), optimize=st.sampled_from(["size", "speed"]),
       plane_bytes=st.sampled_from([1024, 96]))
def test_strided_planar_depthwise_equals_tflite_micro(tmp_path_factory, monkeypatch, seed, h, w, channels, stride,
                                                      padding, activation, per_channel, first, optimize, plane_bytes):
    """Stride 2 along either axis or both (a 4-block's window rows five words, the fifth after its SMLADs), odd and
    even sizes, SAME's padding after the input only; the cost model overruled (the planar kernel wherever it
    applies) and the plane in strips of a few rows (``plane_bytes`` 96: the strips' overlapping rows widened
    again, the padding rows refilled)."""
    require_target("cortex-m4")
    monkeypatch.setattr(m4_network_planar, "OLD_OUTPUT_CYCLES", {1: 10_000, 2: 10_000})
    monkeypatch.setattr(m4_network_planar, "PLANE_BYTES", plane_bytes)
    n = NetBuilder(seed, 3000)
    x = n.input((h, w, channels))
    y = n.conv(x, channels, (1, 1), activation=activation) if first == "conv" else n.depthwise(x, 1, (1, 1))
    y = n.depthwise(y, 1, (3, 3), stride, padding=padding, activation=activation, per_channel=per_channel)
    assume(min(n.shapes[y][1:3]) >= 1)
    y = n.conv(y, 3, (1, 1))
    result, _ = check_network(n.finish(n.fc(n.flatten(y), 3)), "cortex-m4", tmp_path_factory.mktemp("net"), 4,
                              optimize=optimize)
    # the planar kernel, unless its order would overwrite input it still reads (``in_place_safe``: the output's
    # slot over the input's, as with a transposed plane)
    assert (planar_layers(result) >= 1 and " stride " in result.files["net.c"]) or overlapping(result)


@pytest.mark.parametrize("h, w, plane_bytes, activation", [(7, 6, 1024, "relu6"), (6, 10, 1024, "none"),
                                                            (7, 6, 96, "relu")])
def test_row_pairs_equal_tflite_micro(tmp_path, monkeypatch, h, w, plane_bytes, activation):
    """Rows whose remainder is 2 outputs take it two rows at a time (``_pair_block_asm``; an odd row count's last
    row, and a strip's, in a 2-block): VWW's 6 x 6 planes, here with 7 rows, 10 columns, strips of 4 and 3 rows."""
    require_target("cortex-m4")
    monkeypatch.setattr(m4_network_planar, "OLD_OUTPUT_CYCLES", {1: 10_000, 2: 10_000})
    monkeypatch.setattr(m4_network_planar, "PLANE_BYTES", plane_bytes)
    n = NetBuilder(h * w, 3000)
    x = n.input((h, w, 8))
    t = n.depthwise(x, 1, (1, 1))
    y = n.add(t, n.depthwise(t, 1, (3, 3), activation=activation))  # t live after it: not in place (strips)
    result, _ = check_network(n.finish(n.fc(n.flatten(n.conv(y, 3, (1, 1))), 3)), "cortex-m4", tmp_path, 4)
    assert planar_layers(result) == 1 and "; i += 2) {" in result.files["net.c"]


def overlapping(result) -> bool:
    """Whether the strided depthwise layer's output slot meets its input's."""
    g = result.graph
    node = next(n for n in g.nodes() if n.op == "depthwise_conv2d" and
                tuple(n.attrs.get("stride", (1, 1))) != (1, 1))
    plan = g.analyses.memory_plan
    sx, so = plan.get(node.inputs[0]), plan.get(node.name)
    return sx is not None and so is not None and sx.arena == so.arena and sx.offset < so.offset + so.length and \
        so.offset < sx.offset + sx.length


def test_orientation_and_blocks():
    """KWS's 25 x 5 output runs along its 25 rows (transposed); a row of 5 is a block of 4 and one of 1, of 6 a
    block of 4 and one of 2, of 7 a block of 4 and one of 4 storing 3."""
    assert orientation(25, 5) and not orientation(5, 25) and not orientation(48, 48)
    assert not orientation(24, 24, (2, 2)) and orientation(24, 24, (1, 2)) and not orientation(24, 24, (2, 1))
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
    rows = n.shapes[y][2] % 2 == 0 and not pointwise
    assert ("m4_rows_" in result.files["net.c"]) == rows
    # consecutive output rows' windows overlapping: the rows kept in a ring, each widened once
    ring = rows and dilation_y == 1 and stride[0] < kernel[0]
    assert ("the window's first slot" in result.files["net.c"]) == ring
