"""Keyword spotting from raw audio (docs/tutorials/kws-m4.md): 16 kHz int16 clips of six synthetic spoken keywords
(data/keywords, espeak-ng's voices; noise, gain and time shifts added here), a log-mel front end (tinycc_ml.features:
49 frames of 20 log-mel bins a second, 32 ms frames every 20 ms) before two keyword networks: the committed Keras CNN
(data/keywords/keyword_cnn*.tflite, float and int8: scripts/train_keyword_cnn.py) and a one-hidden-layer MLP trained
here by scikit-learn (written as an ONNX file), each compiled with ``tinycc_ml.compile(network, front_end=...)`` into
one C entry point from samples to the keyword.

Printed: accuracy on held-out voices of the Python pipeline (the front end's float64 transform, then tflite-micro or
onnxruntime) and of each build on the host; on the Cortex-M4F (MPS2 AN386 in QEMU, -icount: exact instruction counts)
whether its decisions are the host's, and per 20 ms hop (``<name>_feed`` fed 320 samples: one new frame's features
onto the frame stack, then the network on the stack) the instructions and cycles (the TRM-priced instruction stream in
unicorn) of the whole pipeline and of the network alone (the same network compiled without the front end, on the same
features), the front end being the difference; the instructions of ``<name>_predict`` on a whole window (all its
frames); flash and static RAM of the model's symbols (with the stream's state).

    python benchmarks/kws_pipeline.py [--m4-rows 12] [--no-write]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from results_table import write_table  # noqa: E402
from sklearn.neural_network import MLPClassifier  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402

import tinycc_ml  # noqa: E402
from tinycc_ml.codegen.backend import get_backend  # noqa: E402
from tinycc_ml.features import Framer, Log, MelFilterBank, PowerSpectrum, Window  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "data" / "keywords" / "keywords.npz"
RATE, CLIP, FRAME, HOP, MELS = 16000, 16000, 512, 320, 20
HELD_OUT = 3  # the last voices of each word: the test rows come from voices the network never heard
SHIFT = RATE // 20  # time shifts up to +-50 ms
TRAINING_COPIES, TEST_COPIES = 20, 20  # noisy variants of each clip


def keyword_rows(copies: int, voices: slice, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``copies`` noisy variants of each clip of the ``voices`` of every word: shifted by up to +-50 ms, gain
    from 0.1 to 2 (saturated to int16), white noise 10 to 30 dB below the word; int16 counts as float32 (exact)."""
    data = np.load(DATA)
    clips, labels = data["clips"].astype(np.float64), data["labels"].astype(np.int64)
    per_word = len(clips) // len(data["words"])
    pick = np.concatenate([np.arange(len(clips))[w * per_word:(w + 1) * per_word][voices]
                           for w in range(len(data["words"]))])
    rng = np.random.default_rng(seed)
    rows, y = [], []
    for i in np.repeat(pick, copies):
        shift = int(rng.integers(-SHIFT, SHIFT + 1))
        x = np.roll(clips[i], shift)
        x[:shift] = 0.0 if shift > 0 else x[:shift]
        x[len(x) + shift:] = 0.0 if shift < 0 else x[len(x) + shift:]
        x = x * 10 ** rng.uniform(-1.0, 0.3)
        power = np.mean(x[x != 0] ** 2)
        x = x + rng.standard_normal(CLIP) * np.sqrt(power * 10 ** (-rng.uniform(1.0, 3.0)))
        rows.append(np.clip(np.round(x), -32768, 32767).astype(np.float32))
        y.append(labels[i])
    return np.array(rows), np.array(y)


def n_frames() -> int:
    return 1 + (CLIP - FRAME) // HOP


def log_mel_front_end(X):
    """49 frames of 20 log-mel bins of 1 s: 32 ms Hann frames every 20 ms, a 512-point power spectrum."""
    return make_pipeline(Framer(FRAME, HOP), Window(FRAME), PowerSpectrum(FRAME), MelFilterBank(RATE, FRAME, MELS),
                         Log(floor=1.0)).fit(X)


def keyword_network(features: np.ndarray, y: np.ndarray, path: Path, hidden: int = 32) -> None:
    """A network of one hidden ReLU layer trained on the standardised features, the standardisation folded into
    its first layer, written as an ONNX file (Gemm, Relu, Gemm) taking the (1, frames * bins) features."""
    from onnx import TensorProto, helper, numpy_helper

    mean, std = features.mean(axis=0), features.std(axis=0) + 1e-6
    net = MLPClassifier((hidden,), max_iter=400, alpha=1e-3, random_state=0).fit((features - mean) / std, y)
    (w1, w2), (b1, b2) = net.coefs_, net.intercepts_
    w1 = w1 / std[:, None]
    b1 = b1 - mean @ w1
    inits = [numpy_helper.from_array(np.asarray(v, np.float32), n) for n, v in
             [("w1", w1.T), ("b1", b1), ("w2", w2.T), ("b2", b2)]]
    nodes = [helper.make_node("Gemm", ["x", "w1", "b1"], ["h"], transB=1), helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("Gemm", ["r", "w2", "b2"], ["y"], transB=1)]
    graph = helper.make_graph(nodes, "keywords", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                                [1, features.shape[1]])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, len(net.classes_)])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path.write_bytes(model.SerializeToString())


def onnxruntime_labels(path: Path, features: np.ndarray) -> np.ndarray:
    import onnxruntime

    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return np.array([np.argmax(session.run(None, {"x": f[None, :].astype(np.float32)})[0]) for f in features])


def one_hop_build(out: Path, build, window: int, hop: int) -> None:
    """The build in ``out`` with ``<name>_predict`` measuring one hop of a full stream: it feeds the last ``hop``
    samples of its row to ``<name>_feed`` (the first call of a firmware image fills the stream first: the median over
    the rows is a hop's).
    For this benchmark's counts only; the window's own predict is kept as ``<name>_window_predict``."""
    p, t = build.output.prefix, build.output.input_ctype
    source = (out / f"{p}.c").read_text().replace(f"{p}_predict(", f"{p}_window_predict(")
    source += f"""
int {p}_window_predict(const {t} *x);
int {p}_predict(const {t} *x) /* one hop of a full stream (benchmarks/kws_pipeline.py) */
{{
    static int primed;
    int decisions[2], made;
    if (!primed) {{
        {p}_feed(x, {window - hop}L, 0);
        primed = 1;
    }}
    made = {p}_feed(x + {window - hop}L, {hop}L, decisions);
    return made ? decisions[made - 1] : -1;
}}
"""
    (out / f"{p}.c").write_text(source)


def tflite_micro_labels(path: Path, features: np.ndarray) -> np.ndarray:
    """tflite-micro's decisions on the front end's float64 features (an int8 file's quantised as its input says)."""
    from tflite_micro.python.tflite_micro import runtime

    from tinycc_ml.ir.ops.tflite_arith import quantise_affine

    interpreter = runtime.Interpreter.from_file(str(path))
    details = interpreter.get_input_details(0)
    if details["dtype"] == np.int8:
        quantisation = details["quantization_parameters"]
        features = quantise_affine(features, quantisation["scales"][0], quantisation["zero_points"][0], 8)
    labels = []
    for row in features:
        interpreter.set_input(np.asarray(row, details["dtype"]).reshape(details["shape"]), 0)
        interpreter.invoke()
        labels.append(int(np.argmax(interpreter.get_output(0))))
    return np.array(labels)


def measure_build(label: str, network: Path, front, precision: str, calibration, X_test, y_test, work: Path,
                  m4_rows: int) -> list[str]:
    """One row of the table: ``network`` after ``front`` at ``precision``, on the host and the Cortex-M4."""
    m4 = get_backend("cortex-m4")
    options = {"precision": precision, "calibration": calibration if precision == "int16" else None}
    host = tinycc_ml.compile(network, front_end=front, name="kws", **options).load()
    accuracy = np.mean(host.predict(X_test) == y_test)
    out = work / f"m4_{network.stem}_{precision}"
    build = tinycc_ml.compile(network, target="cortex-m4", front_end=front, name="kws", out_dir=out, **options)
    run = m4.simulate(out, build.output, X_test[:m4_rows])
    same = np.array_equal(np.asarray(run.predictions), host.predict(X_test[:m4_rows]))
    window_total = int(np.mean(run.instructions))
    one_hop_build(out, build, CLIP, HOP)
    hops = m4.simulate(out, build.output, X_test[:m4_rows])
    # the median: the harness may run the rows in several firmware images, each priming its stream once
    total = int(np.median(hops.instructions[1:]))
    cycles = int(m4.model_cycles(out, build.output, X_test[:2]).cycles[1])
    # the network alone on the same features: compiled from the file without the front end
    alone_dir = work / f"net_{network.stem}_{precision}"
    features = front.transform(X_test[:m4_rows])
    alone = tinycc_ml.compile(network, target="cortex-m4", name="kwsnet", out_dir=alone_dir,
                              precision=precision, calibration=front.transform(calibration)
                              if precision == "int16" else None)
    net_run = m4.simulate(alone_dir, alone.output, features)
    net_total = int(np.mean(net_run.instructions))
    print(f"  {label}: host accuracy {100 * accuracy:.1f}%, M4 decisions equal to the host's: {same}; per hop "
          f"{total:,} instructions ({cycles:,} cycles), network alone {net_total:,}; predict on a whole window "
          f"{window_total:,}; {build.report['stream']['frame_stack']}; flash {run.model_flash_bytes:,} B, static RAM "
          f"{run.model_ram_bytes:,} B (stream state {build.report['stream']['state_bytes']:,} B)", flush=True)
    return [label, f"{100 * accuracy:.1f}%", "yes" if same else "NO", f"{total:,}", f"{cycles:,}",
            f"{total - net_total:,}", f"{net_total:,}", f"{window_total:,}", f"{run.model_flash_bytes:,}",
            f"{run.model_ram_bytes:,}"]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--m4-rows", type=int, default=12, help="held-out rows run in QEMU per build")
    parser.add_argument("--no-write", action="store_true", help="print only; do not write benchmarks/results")
    args = parser.parse_args(argv)
    X, y = keyword_rows(TRAINING_COPIES, slice(0, -HELD_OUT), seed=0)
    X_test, y_test = keyword_rows(TEST_COPIES, slice(-HELD_OUT, None), seed=1)
    front = log_mel_front_end(X)
    voices = len(np.load(DATA)["voices"]) // len(np.load(DATA)["words"])
    print(f"{len(X)} training rows ({voices - HELD_OUT} voices), {len(X_test)} test rows ({HELD_OUT} held-out "
          f"voices)", flush=True)
    work = Path(tempfile.mkdtemp(prefix="kws-"))
    test_features = front.transform(X_test)
    calibration = X[::6]
    rows = []
    cnn, cnn_int8 = DATA.parent / "keyword_cnn.tflite", DATA.parent / "keyword_cnn_int8.tflite"
    for name, path in (("CNN (Keras, float .tflite)", cnn), ("CNN (Keras, int8 .tflite)", cnn_int8)):
        python = np.mean(tflite_micro_labels(path, test_features) == y_test)
        print(f"{name}: Python pipeline (front end's transform, tflite-micro) {100 * python:.1f}%", flush=True)
        rows.append([f"{name}: Python pipeline", f"{100 * python:.1f}%"] + ["-"] * 8)
        rows.append(measure_build(f"{name}: {'int8' if path == cnn_int8 else 'float'} build", path, front,
                                  "float", calibration, X_test, y_test, work, args.m4_rows))
    mlp = work / "keywords.onnx"
    keyword_network(front.transform(X), y, mlp)
    python = np.mean(onnxruntime_labels(mlp, test_features) == y_test)
    print(f"MLP: Python pipeline (front end's transform, onnxruntime) {100 * python:.1f}%", flush=True)
    rows.append(["MLP (scikit-learn, ONNX): Python pipeline", f"{100 * python:.1f}%"] + ["-"] * 8)
    for precision in ("float", "int16"):
        rows.append(measure_build(f"MLP (scikit-learn, ONNX): {precision} build", mlp, front, precision,
                                  calibration, X_test, y_test, work, args.m4_rows))
    columns = ["pipeline", "accuracy (held-out voices)", "M4 = host", "M4 instructions per 20 ms hop",
               "M4 cycles per hop", "front end", "network", "predict on a window", "flash B", "static RAM B"]
    if not args.no_write:
        write_table("kws_pipeline", columns, rows, script="benchmarks/kws_pipeline.py")
    else:
        for row in [columns, *rows]:
            print(" | ".join(row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
