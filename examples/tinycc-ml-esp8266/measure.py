"""Instructions per prediction of a few scikit-learn models on the ESP8266 (QEMU's lx106 core, the ICOUNT
register: instructions executed, exact), with the constants read as aligned words from the irom0 flash window
(the backend) and, for comparison, read with the C's own 8/16-bit loads from data RAM (a variant that would not
fit a large model's constants in the ESP8266's 80 KB of data RAM, and that the irom0 window would fault on).
Run: python measure.py

The models are trained on scikit-learn's bundled digits (64 features, 10 classes); 20 test rows."""

from __future__ import annotations

import tempfile

import numpy as np
from sklearn.datasets import load_digits
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.neural_network import MLPClassifier
from tinycc_ml_esp8266 import Esp8266Backend

import tinycc_ml
from tinycc_ml.target import CTarget, get_backend, register_backend


@register_backend
class PlainReadsBackend(Esp8266Backend):
    """The same chip and simulator, constants as plain const arrays (in .rodata, data RAM) read as C reads them."""

    name = "esp8266-plain-reads"

    def c_target(self, graph) -> CTarget:
        return CTarget("esp8266")


MODELS = {
    "logistic regression": lambda: LogisticRegression(max_iter=2000),
    "random forest, 10 trees of depth 6": lambda: RandomForestClassifier(10, max_depth=6, random_state=0),
    "MLP 64-16-10 (relu)": lambda: MLPClassifier((16,), max_iter=600, random_state=0),
}


def measure(target: str, model, precision: str, X_train, X_test) -> tuple[int, int, np.ndarray]:
    """Median instructions per prediction, the model's flash bytes, the build's predictions (class indices)."""
    with tempfile.TemporaryDirectory() as out:
        result = tinycc_ml.compile(model, target=target, precision=precision, calibration=X_train, out_dir=out,
                                   name="m")
        run = get_backend(target).simulate(out, result.output, X_test)
    return int(np.median(run.instructions)), run.model_flash_bytes, run.predictions


def main() -> None:
    X, y = load_digits(return_X_y=True)
    X_train, y_train, X_test, y_test = X[:1500], y[:1500], X[1500:1520], y[1500:1520]
    print("| model | precision | word reads (irom0) | plain reads (data RAM) | word reads cost | model flash "
          "| accuracy (20 rows) |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for label, make in MODELS.items():
        model = make().fit(X_train, y_train)
        for precision in ("int16", "int8"):
            words, flash, predicted = measure("esp8266", model, precision, X_train, X_test)
            plain, _, plain_predicted = measure(PlainReadsBackend.name, model, precision, X_train, X_test)
            assert np.array_equal(predicted, plain_predicted)
            accuracy = np.mean(model.classes_[predicted] == y_test)
            print(f"| {label} | {precision} | {words} | {plain} | {(words - plain) / plain:+.0%} | {flash} B "
                  f"| {accuracy:.0%} |")


if __name__ == "__main__":
    main()
