"""Small models with TFLite resource variables and a data-dependent WHILE, converted by TensorFlow's own converter
(``experimental_enable_resource_variables``): h = relu(x W + state), state <- h / 2, at float32, int8 (whose
variable stays float32 between DEQUANTIZE and QUANTIZE) and 16x8 (an int16 variable), for
tests/importers/test_tflite_variables.py; ``while_int8.tflite``: a WHILE of three steps in an int8 model. The converter
writes CALL_ONCE of an initialisation subgraph (VAR_HANDLE, ASSIGN_VARIABLE of the initial value) and
VAR_HANDLE / READ_VARIABLE / ASSIGN_VARIABLE in the main one. ``while_data_dependent.tflite``: a loop that halves
its input until it is below 1, whose trip count depends on the input (refused: WHILE loops are unrolled).

    python -m venv /tmp/tf && /tmp/tf/bin/pip install tensorflow-cpu
    /tmp/tf/bin/python scripts/tflite_variables.py          # writes tests/data/tflite/variables_*.tflite
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parents[1] / "tests" / "data" / "tflite"


def quantised(tf, converter, quantisation: str) -> None:
    """The converter set to quantise: int8, or 16x8 (int16 activations, int8 weights)."""
    rng = np.random.default_rng(1)

    def representative():
        for _ in range(32):
            yield [rng.normal(0, 1, (1, 4)).astype(np.float32)]

    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.representative_dataset = representative
    ops, io = ((tf.lite.OpsSet.TFLITE_BUILTINS_INT8, tf.int8) if quantisation == "int8" else
               (tf.lite.OpsSet.EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8, tf.int16))
    converter.target_spec.supported_ops = [ops]
    converter.inference_input_type = converter.inference_output_type = io


def main() -> None:
    import tensorflow as tf

    class Accumulator(tf.Module):
        def __init__(self):
            self.state = tf.Variable(tf.fill([1, 4], 0.25), trainable=False)
            self.w = tf.constant(np.random.default_rng(0).normal(0, 0.5, (4, 4)).astype(np.float32))

        @tf.function(input_signature=[tf.TensorSpec([1, 4], tf.float32)])
        def __call__(self, x):
            h = tf.nn.relu(tf.matmul(x, self.w) + self.state)
            self.state.assign(h * 0.5)
            return h

    module = Accumulator()
    function = module.__call__.get_concrete_function()
    for quantisation in ("float", "int8", "16x8"):
        converter = tf.lite.TFLiteConverter.from_concrete_functions([function], module)
        converter.experimental_enable_resource_variables = True
        if quantisation != "float":
            quantised(tf, converter, quantisation)
        data = converter.convert()
        (OUT / f"variables_{quantisation}.tflite").write_bytes(data)
        print(f"variables_{quantisation}.tflite: {len(data)} bytes")

    # a loop of three steps (a WHILE the reader unrolls), int8: the converter dequantises around it
    w = tf.constant(np.random.default_rng(2).normal(0, 0.4, (4, 4)).astype(np.float32))

    @tf.function(input_signature=[tf.TensorSpec([1, 4], tf.float32)])
    def three_steps(x):
        step = lambda i, v: (i + 1, tf.nn.relu(tf.matmul(v, w)) + 0.1)  # noqa: E731
        return tf.while_loop(lambda i, v: i < 3, step, (tf.constant(0), x))[1]

    converter = tf.lite.TFLiteConverter.from_concrete_functions([three_steps.get_concrete_function()])
    quantised(tf, converter, "int8")
    data = converter.convert()
    (OUT / "while_int8.tflite").write_bytes(data)
    print(f"while_int8.tflite: {len(data)} bytes")

    @tf.function(input_signature=[tf.TensorSpec([1, 4], tf.float32)])
    def halve_until_small(x):
        return tf.while_loop(lambda v: tf.reduce_max(v) > 1.0, lambda v: (v * 0.5,), (x,))[0]

    data = tf.lite.TFLiteConverter.from_concrete_functions([halve_until_small.get_concrete_function()]).convert()
    (OUT / "while_data_dependent.tflite").write_bytes(data)
    print(f"while_data_dependent.tflite: {len(data)} bytes")


if __name__ == "__main__":
    main()
