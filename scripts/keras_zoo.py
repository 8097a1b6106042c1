"""Small Keras models of the kinds people convert for microcontrollers, converted with TensorFlow's own converter at
int8 (full integer, int8 input and output), 16x8 (int16 activations, int8 weights) and float32, for the TFLite
importer's zoo test (tests/importers/test_keras_zoo.py) and benchmarks/keras_zoo.py. Weights are random (seeded) and
briefly fitted to random targets (so that activations spread), the calibration rows random; the files are a few KB
each and the tests never import TensorFlow: tflite-micro is their reference.

    python -m venv /tmp/tf && /tmp/tf/bin/pip install tensorflow-cpu     # TensorFlow's converter
    /tmp/tf/bin/python scripts/keras_zoo.py                             # writes tests/data/keras/
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
QUANTISATIONS = ("int8", "16x8", "float")


def models():
    """name -> a function building the Keras model (inputs of batch 1, static shapes)."""
    import tensorflow as tf
    from tensorflow import keras
    from tensorflow.keras import layers

    def sequential(input_shape, *stack):
        inputs = keras.Input(input_shape, batch_size=1)
        x = inputs
        for layer in stack:
            x = layer(x)
        return keras.Model(inputs, x)

    def mlp():
        return sequential((20,), layers.Dense(16, activation="relu"), layers.Dense(8, activation="tanh"),
                          layers.Dense(4), layers.Softmax())

    def cnn():
        return sequential((12, 12, 1), layers.Conv2D(6, 3, activation="relu"), layers.MaxPooling2D(),
                          layers.Conv2D(8, 3, padding="same", strides=2, activation="relu6"), layers.Flatten(),
                          layers.Dense(5))

    def ds_cnn():
        inputs = keras.Input((20, 8, 1), batch_size=1)
        x = layers.Conv2D(8, (5, 3), strides=(2, 2), padding="same", use_bias=False)(inputs)
        x = layers.BatchNormalization()(x)
        x = layers.ReLU()(x)
        for _ in range(2):
            x = layers.DepthwiseConv2D(3, padding="same", use_bias=False)(x)
            x = layers.BatchNormalization()(x)
            x = layers.ReLU()(x)
            x = layers.Conv2D(8, 1, use_bias=False)(x)
            x = layers.BatchNormalization()(x)
            x = layers.ReLU()(x)
        x = layers.GlobalAveragePooling2D()(x)
        return keras.Model(inputs, layers.Dense(4, activation="softmax")(x))

    def two_inputs():
        a, b = keras.Input((10,), batch_size=1, name="a"), keras.Input((6,), batch_size=1, name="b")
        x = layers.Concatenate()([layers.Dense(8, activation="relu")(a), layers.Dense(8, activation="relu")(b)])
        return keras.Model([a, b], layers.Dense(3)(x))

    def two_outputs():
        inputs = keras.Input((12,), batch_size=1)
        x = layers.Dense(10, activation="relu")(inputs)
        return keras.Model(inputs, [layers.Dense(3, activation="sigmoid")(x), layers.Dense(2, activation="tanh")(x)])

    def lstm_keywords():
        return sequential((8, 5), layers.LSTM(6), layers.Dense(4))

    def lstm_unrolled():
        return sequential((6, 4), layers.LSTM(5, unroll=True), layers.Dense(3))

    def gru_loop():
        return sequential((10, 4), layers.GRU(6), layers.Dense(3))

    def gru_unrolled():
        return sequential((6, 4), layers.GRU(5, unroll=True, reset_after=False), layers.Dense(3))

    def unet_1d():
        inputs = keras.Input((32, 2), batch_size=1)
        down = layers.Conv1D(4, 3, padding="same")(inputs)
        down = layers.LeakyReLU(negative_slope=0.2)(down)
        pooled = layers.Conv1D(6, 3, strides=2, padding="same", activation="relu")(down)
        up = layers.Conv1DTranspose(4, 3, strides=2, padding="same")(pooled)
        merged = layers.Concatenate()([up, down])
        padded = layers.ZeroPadding1D(1)(merged)
        out = layers.Conv1D(2, 3)(padded)
        cropped = layers.Cropping1D((2, 2))(out)
        return keras.Model(inputs, cropped)

    def mobilenet_ish():
        inputs = keras.Input((16, 16, 3), batch_size=1)
        x = layers.Conv2D(8, 3, strides=2, padding="same")(inputs)
        x = layers.Activation("hard_swish")(x)
        x = layers.DepthwiseConv2D(3, padding="same")(x)
        x = layers.Activation("hard_swish")(x)
        squeeze = layers.GlobalAveragePooling2D(keepdims=True)(x)
        squeeze = layers.Conv2D(8, 1, activation="hard_sigmoid")(squeeze)
        x = layers.Multiply()([x, squeeze])
        x = layers.Conv2D(8, 1)(x)
        x = layers.GlobalAveragePooling2D()(x)
        return keras.Model(inputs, layers.Dense(4)(x))

    def residual():
        inputs = keras.Input((8, 8, 4), batch_size=1)
        x = layers.Conv2D(4, 3, padding="same", activation="relu")(inputs)
        x = layers.Conv2D(4, 3, padding="same")(x)
        x = layers.Add()([x, inputs])
        x = layers.ReLU()(x)
        x = layers.AveragePooling2D(2)(x)
        x = layers.Flatten()(x)
        return keras.Model(inputs, layers.Dense(3)(x))

    def attention():
        inputs = keras.Input((6, 8), batch_size=1)
        q, k, v = (layers.Dense(8)(inputs) for _ in range(3))
        scores = layers.Lambda(lambda t: tf.matmul(t[0], t[1], transpose_b=True) / np.sqrt(8.0))([q, k])
        weights = layers.Softmax()(scores)
        mixed = layers.Lambda(lambda t: tf.matmul(t[0], t[1]))([weights, v])
        x = layers.Add()([mixed, inputs])
        x = layers.LayerNormalization()(x)
        x = layers.GlobalAveragePooling1D()(x)
        return keras.Model(inputs, layers.Dense(3)(x))

    def sensor_conv1d():
        return sequential((40, 3), layers.Conv1D(8, 5, activation="relu"), layers.MaxPooling1D(2),
                          layers.Conv1D(8, 3, dilation_rate=2, activation="relu"), layers.GlobalMaxPooling1D(),
                          layers.Dense(6, activation="sigmoid"))

    def autoencoder():
        return sequential((16,), layers.Dense(8, activation="elu"), layers.Dense(4, activation="relu"),
                          layers.Dense(8, activation="relu"), layers.Dense(16, activation="sigmoid"))

    def kws_cnn():
        return sequential((20, 10, 1), layers.Conv2D(8, (5, 3), activation="relu"), layers.MaxPooling2D((2, 1)),
                          layers.Conv2D(8, 3, padding="same", activation="relu"), layers.Dropout(0.2),
                          layers.Flatten(), layers.Dense(12, activation="relu"), layers.Dense(4, activation="softmax"))

    def vww_tiny():
        inputs = keras.Input((24, 24, 3), batch_size=1)
        x = layers.Conv2D(8, 3, strides=2, padding="same", activation="relu6")(inputs)
        for channels, stride in ((16, 2), (16, 1), (24, 2)):
            x = layers.DepthwiseConv2D(3, strides=stride, padding="same", activation="relu6")(x)
            x = layers.Conv2D(channels, 1, activation="relu6")(x)
        x = layers.GlobalAveragePooling2D()(x)
        return keras.Model(inputs, layers.Dense(2, activation="softmax")(x))

    def resnet_1d():
        inputs = keras.Input((32, 4), batch_size=1)
        x = layers.Conv1D(8, 3, padding="same")(inputs)
        x = layers.BatchNormalization()(x)
        shortcut = layers.ReLU()(x)
        x = layers.Conv1D(8, 3, padding="same", activation="relu")(shortcut)
        x = layers.Conv1D(8, 3, padding="same")(x)
        x = layers.ReLU()(layers.Add()([x, shortcut]))
        x = layers.GlobalAveragePooling1D()(x)
        return keras.Model(inputs, layers.Dense(5)(x))

    def tcn():
        inputs = keras.Input((48, 2), batch_size=1)
        x = inputs
        for dilation in (1, 2, 4):
            x = layers.Conv1D(6, 3, padding="causal", dilation_rate=dilation, activation="relu")(x)
        x = layers.Lambda(lambda t: t[:, -1, :])(x)
        return keras.Model(inputs, layers.Dense(3)(x))

    def regression_swish():
        return sequential((10,), layers.Dense(16, activation="swish"), layers.Dense(8, activation="tanh"),
                          layers.Dense(1))

    def conv_autoencoder():
        return sequential((16, 16, 1), layers.Conv2D(4, 3, strides=2, padding="same", activation="relu"),
                          layers.Conv2D(8, 3, strides=2, padding="same", activation="relu"),
                          layers.Conv2DTranspose(4, 3, strides=2, padding="same", activation="relu"),
                          layers.Conv2DTranspose(1, 3, strides=2, padding="same", activation="sigmoid"))

    def bidirectional_gru():
        return sequential((8, 3), layers.Bidirectional(layers.GRU(4, unroll=True)), layers.Dense(3))

    def stacked_lstm():
        return sequential((6, 3), layers.LSTM(5, unroll=True, return_sequences=True), layers.LSTM(4, unroll=True),
                          layers.Dense(2))

    def multi_head():
        inputs = keras.Input((16,), batch_size=1)
        x = layers.Dense(12, activation="relu")(inputs)
        return keras.Model(inputs, [layers.Dense(4, activation="softmax")(x), layers.Dense(1)(x),
                                    layers.Dense(2, activation="sigmoid")(x)])

    def upsample_2d():
        return sequential((8, 8, 2), layers.Conv2D(4, 3, strides=2, padding="same", activation="relu"),
                          layers.Resizing(8, 8, interpolation="bilinear"), layers.Conv2D(2, 3, padding="same"))

    def separable_prelu():
        return sequential((12, 12, 3), layers.SeparableConv2D(8, 3, padding="same"), layers.PReLU(),
                          layers.MaxPooling2D(), layers.Permute((3, 1, 2)), layers.Flatten(), layers.Dense(3))

    return {"mlp": mlp, "cnn": cnn, "ds_cnn": ds_cnn, "two_inputs": two_inputs, "two_outputs": two_outputs,
            "lstm_keywords": lstm_keywords, "gru_unrolled": gru_unrolled, "unet_1d": unet_1d,
            "mobilenet_ish": mobilenet_ish, "residual": residual, "attention": attention,
            "sensor_conv1d": sensor_conv1d, "autoencoder": autoencoder, "lstm_unrolled": lstm_unrolled,
            "gru_loop": gru_loop, "kws_cnn": kws_cnn, "vww_tiny": vww_tiny, "resnet_1d": resnet_1d, "tcn": tcn,
            "regression_swish": regression_swish, "conv_autoencoder": conv_autoencoder,
            "bidirectional_gru": bidirectional_gru, "stacked_lstm": stacked_lstm, "multi_head": multi_head,
            "upsample_2d": upsample_2d, "separable_prelu": separable_prelu}


def _fit(model, seed: int) -> None:
    rng = np.random.default_rng(seed)
    inputs = [rng.normal(0, 1, size=(64, *i.shape[1:])).astype(np.float32) for i in model.inputs]
    targets = [rng.normal(0, 1, size=(64, *o.shape[1:])).astype(np.float32) for o in model.outputs]
    model.compile("adam", "mse")
    model.fit(inputs if len(inputs) > 1 else inputs[0], targets if len(targets) > 1 else targets[0], batch_size=1,
              epochs=1, verbose=0)


def convert(model, quantisation: str, seed: int) -> bytes:
    import tensorflow as tf

    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    if quantisation != "float":
        rng = np.random.default_rng(seed + 1)

        def representative():  # by input name: the converted signature may order several inputs otherwise
            for _ in range(48):
                rows = [rng.normal(0, 1, size=(1, *i.shape[1:])).astype(np.float32) for i in model.inputs]
                yield dict(zip((i.name for i in model.inputs), rows)) if len(rows) > 1 else rows

        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        converter.representative_dataset = representative
        if quantisation == "int8":
            converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
            converter.inference_input_type = tf.int8
            converter.inference_output_type = tf.int8
        else:
            converter.target_spec.supported_ops = [
                tf.lite.OpsSet.EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8]
            converter.inference_input_type = tf.int16
            converter.inference_output_type = tf.int16
    return converter.convert()


def build_one(name: str, quantisation: str, out: Path) -> None:
    """One model at one quantisation, written to ``out`` (run in a child process: the converter may crash)."""
    import tensorflow as tf

    seed = list(models()).index(name)
    tf.keras.utils.set_random_seed(seed)
    model = models()[name]()
    _fit(model, seed)
    out.write_bytes(convert(model, quantisation, seed))


def main() -> None:
    import subprocess
    import sys

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=REPO / "tests" / "data" / "keras")
    parser.add_argument("--only", nargs="*", help="model names (default: all)")
    parser.add_argument("--one", nargs=3, metavar=("NAME", "QUANTISATION", "FILE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        build_one(args.one[0], args.one[1], Path(args.one[2]))
        return
    args.out.mkdir(parents=True, exist_ok=True)
    manifest_path = args.out / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    for name in models():
        if args.only and name not in args.only:
            continue
        for quantisation in QUANTISATIONS:
            file = args.out / f"{name}_{quantisation}.tflite"
            run = subprocess.run([sys.executable, __file__, "--one", name, quantisation, str(file)],
                                 capture_output=True, text=True)
            if run.returncode != 0:  # the converter refused or crashed: said in the manifest
                lines = [line for line in run.stderr.splitlines() if "Error" in line] or [f"exit {run.returncode}"]
                manifest[file.name] = {"model": name, "quantisation": quantisation,
                                       "converter_refused": lines[-1][:200]}
                file.unlink(missing_ok=True)
                print(f"{file.name}: the converter refused ({manifest[file.name]['converter_refused']})")
                continue
            manifest[file.name] = {"model": name, "quantisation": quantisation, "bytes": file.stat().st_size}
            print(f"{file.name}: {file.stat().st_size} bytes", flush=True)
    manifest_path.write_text(json.dumps(dict(sorted(manifest.items())), indent=1) + "\n")


if __name__ == "__main__":
    main()
