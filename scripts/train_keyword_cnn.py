"""Train the keyword-spotting CNN of benchmarks/kws_pipeline.py (docs/tutorials/kws-m4.md) and write it as TFLite
files: data/keywords/keyword_cnn.tflite (float32) and keyword_cnn_int8.tflite (TFLite's int8, int8 input and output,
quantised by TensorFlow's converter from training rows' features).

The rows are the benchmark's (data/keywords' synthetic clips with noise, gain and time shifts; the held-out voices
never seen), the features its log-mel front end's (49 frames of 20 log-mel bins per 1 s of 16 kHz audio), the
network a small depthwise-separable CNN in Keras. Run once where TensorFlow is installed, with tinycc-ml importable;
the benchmark and the tests read the files (TensorFlow is not needed to run them):

    python -m venv /tmp/tf && /tmp/tf/bin/pip install tensorflow-cpu -e .
    /tmp/tf/bin/python scripts/train_keyword_cnn.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import kws_pipeline as kws  # noqa: E402

OUT = ROOT / "data" / "keywords"
SEED = 0


def keyword_cnn(frames: int, bins: int, classes: int, batch_size: int | None):
    """Conv 5x3 (stride 2 in time), two depthwise-separable blocks, global average pooling, dense."""
    import tensorflow as tf

    layers = tf.keras.layers
    def block(x, layer):  # batch normalisation: folded into the layer's weights by the converter
        return layers.ReLU()(layers.BatchNormalization()(layer(x)))

    inputs = tf.keras.Input((frames, bins, 1), batch_size=batch_size)
    x = block(inputs, layers.Conv2D(16, (5, 3), strides=(2, 1), padding="same"))
    x = block(x, layers.DepthwiseConv2D(3, padding="same"))
    x = block(x, layers.Conv2D(24, 1))
    x = layers.MaxPooling2D(2)(x)
    x = block(x, layers.DepthwiseConv2D(3, padding="same"))
    x = block(x, layers.Conv2D(32, 1))
    x = layers.GlobalAveragePooling2D()(x)
    outputs = layers.Dense(classes)(layers.Dropout(0.2)(x))
    return tf.keras.Model(inputs, outputs)


def main() -> None:
    import tensorflow as tf

    tf.keras.utils.set_random_seed(SEED)
    X, y = kws.keyword_rows(kws.TRAINING_COPIES, slice(0, -kws.HELD_OUT), seed=0)
    X_test, y_test = kws.keyword_rows(kws.TEST_COPIES, slice(-kws.HELD_OUT, None), seed=1)
    front = kws.log_mel_front_end(X)
    shape = (-1, kws.n_frames(), kws.MELS, 1)
    features = front.transform(X).reshape(shape).astype(np.float32)
    test_features = front.transform(X_test).reshape(shape).astype(np.float32)
    classes = int(y.max()) + 1
    trainer = keyword_cnn(features.shape[1], features.shape[2], classes, None)
    model = keyword_cnn(features.shape[1], features.shape[2], classes, 1)  # the files' static batch of 1
    trainer.compile(optimizer=tf.keras.optimizers.Adam(3e-3),
                    loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    trainer.fit(features, y, batch_size=32, epochs=60, verbose=2, shuffle=True,
                callbacks=[tf.keras.callbacks.ReduceLROnPlateau("loss", factor=0.5, patience=4)])
    model.set_weights(trainer.get_weights())
    accuracy = np.mean(np.argmax(trainer.predict(test_features, verbose=0), axis=1) == y_test)
    print(f"Keras accuracy on {len(y_test)} held-out rows: {100 * accuracy:.1f}%")

    def representative():
        for row in features[::7]:
            yield [row[None]]

    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    (OUT / "keyword_cnn.tflite").write_bytes(converter.convert())
    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.representative_dataset = representative
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    converter.inference_input_type = tf.int8
    converter.inference_output_type = tf.int8
    (OUT / "keyword_cnn_int8.tflite").write_bytes(converter.convert())
    for name in ("keyword_cnn.tflite", "keyword_cnn_int8.tflite"):
        print(f"{OUT / name}: {(OUT / name).stat().st_size} bytes")


if __name__ == "__main__":
    main()
