"""A small 1-D CNN trained in PyTorch on a synthetic accelerometer data set (dataset.py), exported with
torch.onnx.export's defaults (weights as external data next to the .onnx), compiled by tinycc-ml to C at each
precision (float; int8, TFLite's quantisation; int16, the project's power-of-two fixed point; int8 in that fixed
point, int8_dialect="pow2"), and measured: accuracy on held-out rows of the float network (PyTorch and
tinycc-ml's interpreter), of each build (the interpreter and the host C, which must agree on every byte), and
per microcontroller target each build's accuracy and cycles per prediction.

    pip install torch==2.13.0 onnxscript   # the CPU build; onnxscript: torch.onnx.export's default exporter
    python examples/sensor_cnn/sensor_cnn.py                  # train, export to examples/sensor_cnn/build/
    python examples/sensor_cnn/sensor_cnn.py --out tests/data # regenerate the tests' fixture
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from dataset import CLASSES, make_rows  # noqa: E402

MCU_TARGETS = ("avr", "cortex-m0", "cortex-m4")  # avr: the ATmega328P
NAME = "sensor_cnn"
TRAIN_SEED, TEST_SEED, CALIBRATION_ROWS = 1, 2, 200
# (label, precision, compile options) of each build
BUILDS = (("float", "float", {}), ("int8", "int8", {}), ("int16", "int16", {}),
          ("int8 pow2", "int8", {"int8_dialect": "pow2"}))


def train(X: np.ndarray, y: np.ndarray, epochs: int = 40):
    import torch
    from torch import nn

    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = nn.Sequential(
        # stride 2 first: 64 positions of 8 channels keep the intermediates within the ATmega328P's 2 KB of RAM
        nn.Conv1d(3, 8, kernel_size=5, stride=2, padding=2), nn.BatchNorm1d(8), nn.ReLU(), nn.MaxPool1d(2),
        nn.Conv1d(8, 8, kernel_size=3, padding=1), nn.ReLU(),
        nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(8, len(CLASSES)))
    optimiser = torch.optim.Adam(model.parameters(), lr=0.01)
    data, labels = torch.from_numpy(X), torch.from_numpy(y)
    for _ in range(epochs):
        model.train()
        for batch in torch.randperm(len(X)).split(64):
            optimiser.zero_grad()
            loss = nn.functional.cross_entropy(model(data[batch]), labels[batch])
            loss.backward()
            optimiser.step()
    return model.eval()


def export(model, folder: Path) -> Path:
    import torch

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{NAME}.onnx"
    torch.onnx.export(model, (torch.zeros(1, 3, 128),), str(path))  # the defaults: external data, batch 1
    return path


def accuracy(scores: np.ndarray, y: np.ndarray) -> float:
    return float(np.mean(np.argmax(scores.reshape(len(y), -1), axis=1) == y))


def measure_mcu(model, target: str, build: tuple, calibration: np.ndarray, X: np.ndarray, y: np.ndarray,
                rows: int = 50):
    """Accuracy and mean cycles of a build on ``target``'s simulator, or why not (a build that does not fit the
    chip, a missing toolchain)."""
    import tinycc_ml
    from tinycc_ml.codegen.backend import get_backend
    from tinycc_ml.errors import TinyccError

    label, precision, options = build
    # the simulators take real rows (quantised as the build's input says), or TFLite's int8 rows
    inputs = model.quantise(calibration).quantise_input(X[:rows]) if options == {} and precision == "int8" \
        else X[:rows].astype(np.float32)
    try:
        with tempfile.TemporaryDirectory() as folder:
            result = tinycc_ml.compile(model, target=target, precision=precision, out_dir=folder, name=NAME,
                                       calibration=None if precision == "float" else calibration, **options)
            run = get_backend(target).simulate(Path(folder), result.output, inputs)
    except (TinyccError, OSError) as exc:
        return f"not measured: {str(exc).splitlines()[0][:150]}"
    counts = run.cycles if run.cycles is not None else run.instructions
    unit = "cycles" if run.cycles is not None else "instructions"
    return f"accuracy {accuracy(run.scores, y[:rows]):.3f} on {rows} rows, {np.mean(counts):.0f} {unit} per prediction"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent / "build"), help="where to export")
    parser.add_argument("--no-mcu", action="store_true", help="skip the microcontroller builds")
    args = parser.parse_args(argv)

    import torch

    import tinycc_ml

    X_train, y_train = make_rows(1200, TRAIN_SEED)
    X_test, y_test = make_rows(400, TEST_SEED)
    net = train(X_train, y_train)
    with torch.no_grad():
        torch_accuracy = accuracy(net(torch.from_numpy(X_test)).numpy(), y_test)
    path = export(net, Path(args.out))
    print(f"exported {path} and {path.name}.data (synthetic accelerometer data, seeds {TRAIN_SEED}/{TEST_SEED})")

    model = tinycc_ml.load_model(path)
    flat_test = X_test.reshape(len(X_test), -1)
    calibration = X_train[:CALIBRATION_ROWS].reshape(CALIBRATION_ROWS, -1)
    float_accuracy = accuracy(model.scores(flat_test), y_test)
    int8 = model.quantise(calibration)
    int8_accuracy = accuracy(int8.scores(flat_test), y_test)
    result = tinycc_ml.compile(model, target="host", precision="int8", calibration=calibration, name=NAME)
    scores, _ = result.load().run_raw(int8.quantise_input(flat_test))
    want = int8.run_int8(int8.quantise_input(flat_test).reshape(len(X_test), *int8.input_shape))
    same = bool(np.array_equal(scores, want.reshape(len(X_test), -1)))
    print(f"held-out rows: {len(y_test)}")
    print(f"  float, PyTorch                 accuracy {torch_accuracy:.4f}")
    print(f"  float, tinycc-ml interpreter   accuracy {float_accuracy:.4f}")
    change = 100 * (int8_accuracy - float_accuracy)
    print(f"  int8, tinycc-ml interpreter    accuracy {int8_accuracy:.4f} ({change:+.2f} points)")
    print(f"  int8, host C                   accuracy {accuracy(scores.astype(float), y_test):.4f} "
          f"(every byte equal to the interpreter: {same})")
    print(f"  int8 constants {result.report['const_bytes']} bytes, intermediates {result.report['ram_bytes']} bytes")
    int16 = tinycc_ml.compile(model, target="host", precision="int16", calibration=calibration, name=NAME)
    int16_accuracy = float(np.mean(int16.load().predict(flat_test) == y_test))  # real rows, quantised by the C
    print(f"  int16, host C                  accuracy {int16_accuracy:.4f} "
          f"({100 * (int16_accuracy - float_accuracy):+.2f} points; arena {int16.report['arena_bytes']} bytes)")
    if not args.no_mcu:
        for target in MCU_TARGETS:
            for build in BUILDS:
                measured = measure_mcu(model, target, build, calibration, flat_test, y_test)
                print(f"  {build[0]:<9} {target:<10} {measured}")
    close = abs(int8_accuracy - float_accuracy) <= 0.01 and abs(int16_accuracy - float_accuracy) <= 0.005
    return 0 if same and close else 1


if __name__ == "__main__":
    sys.exit(main())
