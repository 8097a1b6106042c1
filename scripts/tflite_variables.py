"""Small models with TFLite resource variables and a data-dependent WHILE, converted by TensorFlow's own converter
(``experimental_enable_resource_variables``): h = relu(x W + state), state <- h / 2, at float32 and int8 (whose
variable stays float32 between DEQUANTIZE and QUANTIZE), for tests/importers/test_tflite_variables.py. The converter
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
    for quantisation in ("float", "int8"):
        converter = tf.lite.TFLiteConverter.from_concrete_functions([function], module)
        converter.experimental_enable_resource_variables = True
        if quantisation == "int8":
            rng = np.random.default_rng(1)

            def representative(rng=rng):
                for _ in range(32):
                    yield [rng.normal(0, 1, (1, 4)).astype(np.float32)]

            converter.optimizations = [tf.lite.Optimize.DEFAULT]
            converter.representative_dataset = representative
            converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
            converter.inference_input_type = tf.int8
            converter.inference_output_type = tf.int8
        data = converter.convert()
        (OUT / f"variables_{quantisation}.tflite").write_bytes(data)
        print(f"variables_{quantisation}.tflite: {len(data)} bytes")

    @tf.function(input_signature=[tf.TensorSpec([1, 4], tf.float32)])
    def halve_until_small(x):
        return tf.while_loop(lambda v: tf.reduce_max(v) > 1.0, lambda v: (v * 0.5,), (x,))[0]

    data = tf.lite.TFLiteConverter.from_concrete_functions([halve_until_small.get_concrete_function()]).convert()
    (OUT / "while_data_dependent.tflite").write_bytes(data)
    print(f"while_data_dependent.tflite: {len(data)} bytes")


if __name__ == "__main__":
    main()
