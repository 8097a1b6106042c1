"""Keras models converted by TensorFlow's own converter (tests/data/keras, written by scripts/keras_zoo.py: int8,
16x8 and float32 of 26 kinds: MLP, CNN, DS-CNN, two inputs, two outputs, GRU and LSTM (unrolled, and as Keras 3
converts them by default: a WHILE loop over subgraphs), a 1-D U-Net, a MobileNet-style block with squeeze-excite, a
residual block, an attention block with LayerNormalization, a 1-D sensor CNN, an autoencoder, a keyword CNN, a
visual-wake-words-style depthwise net, a 1-D ResNet, a dilated causal TCN, a swish regressor, a convolutional
autoencoder with Conv2DTranspose, a bidirectional GRU, stacked LSTMs, three heads, a bilinear resize, a separable
convolution with PReLU and Permute): every output byte equal to tflite-micro's on 100 inputs on the host and on 5 in
the Cortex-M4; the files tflite-micro cannot run, or whose form is not supported, refused with their reason."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import tinycc_ml
from tests.conftest import require_target
from tests.tflite_builder import tflm_joined_outputs as tflm_outputs
from tinycc_ml.errors import TinyccError

ZOO = Path(__file__).resolve().parents[1] / "data" / "keras"
MANIFEST = json.loads((ZOO / "manifest.json").read_text())
FILES = sorted(name for name, entry in MANIFEST.items() if "bytes" in entry)
# what is refused, and why (a test each: nothing is refused silently or for another reason)
REFUSED = {
    "sensor_conv1d_16x8.tflite": "REDUCE_MAX: int16 tensors",  # tflite-micro has no int16 REDUCE_MAX either
    "upsample_2d_16x8.tflite": "RESIZE_BILINEAR: int16 tensors",  # nor an int16 RESIZE_BILINEAR
}


# float operators that call exp, tanh or expm1: equal within FLOAT_ULPS units in the last place on the Cortex-M4,
# whose C library (newlib) rounds those functions' last bit otherwise than glibc under tflite-micro on the host
LIBM_OPS = {"logistic", "tensor_tanh", "softmax", "elu", "lstm_cell", "lstm_hidden"}
FLOAT_ULPS = 16  # measured: at most 8 (gru_unrolled_float)


def random_rows(data: bytes, n: int, seed: int = 0) -> list[list[np.ndarray]]:
    """n sets of inputs: int8 and int16 over their whole range, floats around 0 (the calibration's spread)."""
    from tflite_micro.python.tflite_micro import runtime

    interpreter = runtime.Interpreter.from_bytes(data)
    details, k = [], 0
    while True:
        try:
            details.append(interpreter.get_input_details(k))
        except (IndexError, RuntimeError, ValueError):
            break
        k += 1
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(n):
        inputs = []
        for d in details:
            if d["dtype"] == np.float32:
                inputs.append(rng.normal(0, 1, size=d["shape"]).astype(np.float32))
            else:
                info = np.iinfo(d["dtype"])
                inputs.append(rng.integers(info.min, info.max + 1, size=d["shape"]).astype(d["dtype"]))
        rows.append(inputs)
    return rows


def flat(rows) -> np.ndarray:
    return np.stack([np.concatenate([x.reshape(-1) for x in inputs]) for inputs in rows])


def test_the_zoo_holds_what_the_issue_asks():
    """At least 25 converted files, of int8, 16x8 and float32, with the kinds named."""
    assert len({MANIFEST[f]["model"] for f in FILES}) >= 25
    assert {MANIFEST[f]["quantisation"] for f in FILES} == {"int8", "16x8", "float"}
    assert {"two_inputs", "two_outputs", "gru_unrolled", "unet_1d", "attention"} <= {MANIFEST[f]["model"]
                                                                                     for f in FILES}


@pytest.mark.parametrize("name", FILES)
def test_every_output_byte_equals_tflite_micro_on_the_host(name, tmp_path):
    require_target("host")
    data = (ZOO / name).read_bytes()
    if name in REFUSED:
        with pytest.raises(TinyccError, match=REFUSED[name]):
            tinycc_ml.compile(ZOO / name, out_dir=tmp_path, name="m")
        return
    rows = random_rows(data, 100)
    want = tflm_outputs(data, rows)
    result = tinycc_ml.compile(ZOO / name, out_dir=tmp_path, name="m")
    X = flat(rows)
    host = result.load()
    got = host.scores(X) if X.dtype == np.float32 else host.run_raw(X)[0]
    got = np.asarray(got).reshape(len(X), -1)
    assert got.shape == want.shape
    np.testing.assert_array_equal(got.astype(want.dtype), want)


@pytest.mark.toolchain
@pytest.mark.parametrize("name", [f for f in FILES if f not in REFUSED])
def test_every_output_byte_equals_tflite_micro_on_the_m4(name, tmp_path):
    require_target("cortex-m4")
    from tinycc_ml.codegen.backend import get_backend

    data = (ZOO / name).read_bytes()
    rows = random_rows(data, 5, seed=1)
    want = tflm_outputs(data, rows)
    result = tinycc_ml.compile(ZOO / name, target="cortex-m4", out_dir=tmp_path, name="m")
    X = flat(rows)
    model = tinycc_ml.load_model(ZOO / name)
    if X.dtype == np.float32 or result.output.input_quantisation is None:
        real = X.astype(np.float64)  # float inputs, or several inputs' codes given as they are
    else:
        scale, zero_point = result.output.input_quantisation[:2]
        real = (X.astype(np.float64) - zero_point) * scale
        assert np.array_equal(model.quantise_input(real), X)  # the round trip gives the same codes
    run = get_backend("cortex-m4").simulate(tmp_path, result.output, real)
    got = np.asarray(run.scores).reshape(len(X), -1).astype(want.dtype)
    if MANIFEST[name]["quantisation"] != "float":
        np.testing.assert_array_equal(got, want)
        return
    # float: exp, tanh, expm1 are the C library's (newlib's here, glibc's under tflite-micro on the host), whose
    # last bits differ; everything else is IEEE arithmetic in TFLite Micro's order
    assert float(np.max(np.abs(got - want) / np.spacing(np.abs(want).astype(np.float32)))) <= FLOAT_ULPS
    if not LIBM_OPS & {model.graph.op(n) for n in model.graph.order()}:
        np.testing.assert_array_equal(got, want)
