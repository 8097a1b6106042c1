"""The signal ops with state and the real FFTs in every arithmetic on the simulated Cortex-M4 and Cortex-M0: each
one-operator model run over a stream of calls (one step a call) equal to tflite-micro on every bit. The measurement
harness feeds int16, int8 or float32 rows: the int32 transforms read int16 samples through a CAST."""

from __future__ import annotations

import numpy as np
import pytest

from tests.ops.signal.stream_check import built, one_op, tflite_micro_outputs
from tests.ops.signal.test_fft_ops import KINDS, values
from tests.ops.signal.test_stream_ops import samples
from tests.tflite_models import TfliteBuilder

MODELS = {  # name -> (op, x shape, x kind, outputs, options, graph outputs)
    # the framer and stacker complete a frame every call here (prefill; no right context), so tflite-micro writes
    # every output
    "framer": ("SignalFramer", (1, 320), "int16", [((1, 2, 400), "int16"), ((), "bool")],
               {"frame_size": 400, "frame_step": 160, "prefill": True}, [0]),
    "stacker": ("SignalStacker", (5,), "int16", [((15,), "int16"), ((), "bool")],
                {"num_channels": 5, "stacker_left_context": 2, "stacker_right_context": 0, "stacker_step": 1}, [0]),
    "delay": ("SignalDelay", (2, 6), "int16", [((2, 6), "int16")], {"delay_length": 9}, None),
    "overlap_add_int16": ("SignalOverlapAdd", (2, 8), "int16", [((6,), "int16")], {"T": 7, "frame_step": 3}, None),
    "overlap_add_float": ("SignalOverlapAdd", (2, 8), "float32", [((6,), "float32")], {"T": 0, "frame_step": 3},
                          None),
    **{f"rfft_{kind}": ("SignalRfft", (60,), kind, [((66,), kind)], {"T": KINDS[kind], "fft_length": 64}, None)
       for kind in ("int32", "float32")},
    **{f"irfft_{kind}": ("SignalIrfft", (66,), kind, [((64,), kind)], {"T": KINDS[kind], "fft_length": 64}, None)
       for kind in ("int16", "int32", "float32")},
}


@pytest.mark.parametrize("target", ["cortex-m4", "cortex-m0"])
@pytest.mark.parametrize("model", sorted(MODELS))
def test_simulated_chips_equal_tflite_micro_over_a_stream(model, target, tmp_path):
    op, shape, kind, outputs, options, graph_outputs = MODELS[model]
    if kind == "int16" and op != "SignalIrfft":
        calls = samples(3, 6, shape)
    else:
        calls = values(kind, 2, int(np.prod(shape)), 5).reshape(-1, *shape)
    if kind == "int32":
        calls = values("int16", 2, int(np.prod(shape)), 5).reshape(-1, *shape)
        data = cast_then(op, shape, outputs, options)
    else:
        data = one_op(op, shape, kind, outputs, options, graph_outputs)
    (want,) = tflite_micro_outputs(data, calls)
    path = tmp_path / f"{model}.tflite"
    path.write_bytes(data)
    got = built(path, calls, target, tmp_path)
    if kind == "float32":
        np.testing.assert_array_equal(np.asarray(got, np.float32).view(np.uint32), want.view(np.uint32))
    else:
        np.testing.assert_array_equal(got, want)


def cast_then(op: str, shape, outputs, options: dict) -> bytes:
    """int16 x -> CAST to int32 -> op."""
    b = TfliteBuilder()
    x = b.tensor(shape, "int16", scale=None, name="x")
    wide = b.tensor(shape, "int32", scale=None, name="wide")
    b.op(53, [x], [wide])  # CAST
    (y_shape, kind), = outputs
    y = b.tensor(y_shape, kind, scale=None, name="y")
    b.custom_op(op, [wide], [y], options)
    return b.finish([x], [y])
