"""TFLite Micro's signal ops with a ring buffer or running sum as state (framer, stacker, delay, overlap-add): one
operator over a stream of calls, every output equal to tflite-micro's in the interpreter and the host C (the
simulated chips: test_stream_ops_on_chips), and their bad parameters refused by name.

Where tflite-micro writes no frame (its valid flag false) its output tensor keeps whatever its arena held: those
calls' outputs are compared by the flag alone, and tinycc-ml's are zeros."""

from __future__ import annotations

import numpy as np
import pytest

import tinycc_ml
from tests.ops.signal.stream_check import built, interpreted, one_op, tflite_micro_outputs
from tinycc_ml.errors import ModelFileError


def samples(seed: int, calls: int, shape) -> np.ndarray:
    rng = np.random.default_rng(seed)
    values = rng.integers(-32768, 32768, (calls, *shape))
    values[1] = -32768  # extremes: the saturating sums meet both bounds
    values[2] = 32767
    return values.astype(np.int16)


def check_with_flag(name: str, x_shape, y_shape, options: dict, calls: np.ndarray, tmp_path) -> np.ndarray:
    """An op with (output, valid flag): the flag equal, the output equal where valid and zeros elsewhere; the build
    (the output alone: one score vector) equal to the interpreter. Returns the flags."""
    both = one_op(name, x_shape, "int16", [(y_shape, "int16"), ((), "bool")], options)
    want, flags = tflite_micro_outputs(both, calls, 2)
    path = tmp_path / "both.tflite"
    path.write_bytes(both)
    got, got_flags = interpreted(path, calls)
    flags = flags.reshape(-1).astype(bool)
    np.testing.assert_array_equal(got_flags.reshape(-1), flags)
    np.testing.assert_array_equal(got[flags], want[flags])
    assert not got[~flags].any()
    alone = tmp_path / "alone.tflite"
    alone.write_bytes(one_op(name, x_shape, "int16", [(y_shape, "int16"), ((), "bool")], options, graph_outputs=[0]))
    np.testing.assert_array_equal(built(alone, calls, "host", tmp_path), got)
    return flags


@pytest.mark.parametrize("frame_size,frame_step,per_call,prefill", [
    (6, 4, 4, False), (6, 4, 8, True), (400, 160, 160, True), (400, 160, 320, False), (3, 5, 10, False),
    (5, 5, 5, True)])
def test_framer_equals_tflite_micro_over_a_stream(frame_size, frame_step, per_call, prefill, tmp_path):
    # frames delayed while the buffer fills (no prefill), several frames a call, frames shorter than the step
    n = per_call // frame_step
    calls = samples(frame_size + per_call, 9, (2, per_call))
    flags = check_with_flag("SignalFramer", (2, per_call), (2, n, frame_size), {
        "frame_size": frame_size, "frame_step": frame_step, "prefill": prefill}, calls, tmp_path)
    assert flags[-1] and (prefill or frame_size <= frame_step or not flags[0])


@pytest.mark.parametrize("left,right,step", [(1, 1, 2), (2, 0, 1), (0, 3, 2), (0, 0, 1), (3, 2, 6)])
def test_stacker_equals_tflite_micro_over_a_stream(left, right, step, tmp_path):
    calls = samples(left * 10 + right, 11, (5,))
    flags = check_with_flag("SignalStacker", (5,), ((left + right + 1) * 5,), {
        "num_channels": 5, "stacker_left_context": left, "stacker_right_context": right, "stacker_step": step},
        calls, tmp_path)
    assert flags.any() and (step == 1 or not flags.all())


@pytest.mark.parametrize("delay,shape", [(4, (3,)), (7, (2, 5)), (0, (6,)), (20, (8,))])
def test_delay_equals_tflite_micro_over_a_stream(delay, shape, tmp_path):
    calls = samples(delay, 8, shape)
    data = one_op("SignalDelay", shape, "int16", [(shape, "int16")], {"delay_length": delay})
    (want,) = tflite_micro_outputs(data, calls)
    path = tmp_path / "delay.tflite"
    path.write_bytes(data)
    (got,) = interpreted(path, calls)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(built(path, calls, "host", tmp_path), want)


@pytest.mark.parametrize("kind,shape,step", [("int16", (3, 8), 2), ("int16", (2, 1, 6), 6), ("float32", (2, 8), 3),
                                             ("float32", (2, 2, 5), 5)])
def test_overlap_add_equals_tflite_micro_over_a_stream(kind, shape, step, tmp_path):
    rng = np.random.default_rng(step)
    if kind == "int16":
        calls = samples(step, 8, shape)
    else:  # sums that round, signed zeros, and a value whose sum overflows to infinity
        calls = (rng.normal(0, 1, (8, *shape)) * 10.0 ** rng.integers(-3, 4, (8, *shape))).astype(np.float32)
        calls[1] = -0.0
        calls[2, ..., 0] = 3e38
    out_shape = (*shape[:-2], shape[-2] * step)
    data = one_op("SignalOverlapAdd", shape, kind, [(out_shape, kind)], {"T": 7 if kind == "int16" else 0,
                                                                         "frame_step": step})
    (want,) = tflite_micro_outputs(data, calls)
    path = tmp_path / "ola.tflite"
    path.write_bytes(data)
    (got,) = interpreted(path, calls)
    np.testing.assert_array_equal(got, want)  # float: every bit, signed zeros and infinities included
    assert np.array_equal(np.signbit(got), np.signbit(want))
    host = built(path, calls, "host", tmp_path)
    np.testing.assert_array_equal(host, want)


@pytest.mark.parametrize("name,x_shape,outputs,options,problem", [
    ("SignalFramer", (8,), [((2, 6), "int16"), ((), "bool")], {"frame_size": 6, "frame_step": 3, "prefill": 1},
     "'prefill' is 1; a boolean"),
    ("SignalFramer", (8,), [((3, 4), "int16"), ((), "bool")], {"frame_size": 4, "frame_step": 3, "prefill": False},
     "8 samples are not a whole number of frame_step 3"),
    ("SignalFramer", (8,), [((2, 2), "int16"), ((), "bool")], {"frame_size": 2, "frame_step": 4, "prefill": True},
     "prefill with frame_size 2 below frame_step 4"),
    ("SignalFramer", (8,), [((2, 4), "int16"), ((), "int16")], {"frame_size": 4, "frame_step": 4, "prefill": False},
     "must be a bool scalar"),
    ("SignalStacker", (4,), [((12,), "int16"), ((), "bool")], {"num_channels": 4, "stacker_left_context": 1,
                                                                "stacker_right_context": 1, "stacker_step": 4},
     "stacker_step 4 must be in \\[1, 3\\]"),
    ("SignalStacker", (4,), [((12,), "int16"), ((), "bool")], {"num_channels": 3, "stacker_left_context": 1,
                                                                "stacker_right_context": 1, "stacker_step": 1},
     "num_channels 3 for a frame of shape \\[4\\]"),
    ("SignalDelay", (4,), [((4,), "int16")], {"delay_length": -1}, "'delay_length' is -1, outside"),
    ("SignalOverlapAdd", (2, 4), [((10,), "int16")], {"T": 7, "frame_step": 5}, "frame_step 5 beyond frame_size 4"),
    ("SignalOverlapAdd", (2, 4), [((4,), "int16")], {"T": 0, "frame_step": 2}, "T = 0 for i16 frames"),
])
def test_bad_parameters_are_refused_by_name(name, x_shape, outputs, options, problem, tmp_path):
    path = tmp_path / "bad.tflite"
    path.write_bytes(one_op(name, x_shape, "int16", outputs, options))
    with pytest.raises(ModelFileError, match=rf"bad\.tflite: operator 0 \(CUSTOM \({name}\)\).*{problem}"):
        tinycc_ml.load_model(path)
