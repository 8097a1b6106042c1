"""The PyTorch zoo measured (scripts/pytorch_zoo.py: the models, their data; tests/data/pytorch_zoo: the files both
of torch.onnx.export's exporters wrote). Per model, on its test rows:

- float: agreement of the host C's labels with onnxruntime's and the largest |difference| of the scores (both
  exporters' files), and whether both exporters give the same C (float and int16, the files compared; for a model
  with BatchNorm also its files exported unfolded, ``name_unfolded.onnx`` / ``name_ts_unfolded.onnx``: each exporter
  folds BatchNorm into the Conv in its own float32 arithmetic, so the default files can hold weights an ulp apart);
- accuracy of onnxruntime, and of the host C at float / int16 / pow2 int8 / TFLite int8 (calibrated on 256 training
  rows; the project's dialects with the scale search), or the refusal's first words;
- recurrent models (GRU, LSTM, RNN nodes) at int16 and pow2 int8: stepped, one time step per call (the state in
  static RAM, reset before each sequence; calibrated on the steps of 16 training sequences as one stream), their
  score the last step's; where a layer cannot be stepped (bidirectional, or reading a convolution's output),
  unrolled as the other builds are (``recurrent_form`` says which);
- on the chips (--chips: a subset, pow2 int8, else float, where it fits): cycles (ATmega328P, simavr) or instructions
  (Cortex-M0 and M4, QEMU) per inference, the model's flash and static RAM, agreement with the host build.

Accuracy: classifiers the share of test rows, per-pixel models the share of pixels, autoencoders the negated mean
squared error. Needs no torch.

    python benchmarks/pytorch_zoo.py [--chips] [--no-write] [names...]
    python benchmarks/pytorch_zoo.py --docs   # docs/guide/networks.md's tables from the results
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # threaded BLAS spin-waits on a shared 2-core machine

import argparse  # noqa: E402
import json  # noqa: E402
import re  # noqa: E402
import shutil  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import tinycc_ml  # noqa: E402
from scripts.pytorch_zoo import DATASETS, OUT, Dataset, score  # noqa: E402
from tinycc_ml.codegen.backend import get_backend  # noqa: E402
from tinycc_ml.errors import TinyccError  # noqa: E402
from tinycc_ml.importers.onnx import onnx_outputs  # noqa: E402
from tinycc_ml.models.network import NetworkModel  # noqa: E402

# the models of scripts/pytorch_zoo.py and their data (the script imports torch only to build them)
MODELS = {
    **{name: "digits64" for name in ("mlp_small", "mlp_deep", "mlp_tanh", "mlp_sigmoid", "mlp_gelu", "mlp_hardswish",
                                     "mlp_leaky", "mlp_silu", "mlp_elu", "mlp_prelu", "mlp_layernorm",
                                     "mlp_dropout_bn")},
    **{name: "digits" for name in ("lenet", "cnn_plain", "cnn_bn", "cnn_avgpool", "cnn_grouped", "cnn_maxhead",
                                   "cnn_se", "mobilenet_v2", "mobilenet_v3", "resnet8")},
    "ds_cnn": "keyword_image", "gru_keyword": "keyword", "conv1d_keyword": "keyword",
    **{name: "sensor_seq" for name in ("lstm_activity", "rnn_activity", "bigru_activity", "lstm2_activity")},
    **{name: "sensor" for name in ("conv1d_gru", "conv1d_sensor", "conv1d_dwsep", "conv1d_grouped", "tcn",
                                   "attention_pool")},
    "unet_tiny": "denoise", "unet_interpolate": "denoise", "autoencoder": "reconstruct64",
    "conv_autoencoder": "reconstruct_image", "embedding_mean": "tokens", "embedding_conv1d": "tokens",
}
# precision label -> (precision, options)
BUILDS = {"float": ("float", {}), "int16": ("int16", {}), "int8_pow2": ("int8", {"int8_dialect": "pow2"}),
          "int8_tflite": ("int8", {})}
CALIBRATION_ROWS = 256
STEPPED_BUILDS = ("int16", "int8_pow2")  # a recurrent model's builds compiled stepped where it can be
STEPPED_CALIBRATION_SEQUENCES = 16  # a stepped build runs its calibration rows one by one: fewer of them
CHIPS = ("avr", "cortex-m0", "cortex-m4")
# (the recurrent models on the chips, stepped one time step per call: benchmarks/recurrent_chips.py)
CHIP_MODELS = ("mlp_small", "lenet", "cnn_bn", "mobilenet_v2", "resnet8", "ds_cnn", "conv1d_sensor", "conv1d_dwsep",
               "tcn", "attention_pool", "unet_tiny", "embedding_mean")
CHIP_ROWS = 6


def onnxruntime_scores(path: Path, X: np.ndarray) -> np.ndarray:
    import onnxruntime

    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    dtype = np.int64 if np.issubdtype(X.dtype, np.integer) else np.float32
    return np.concatenate([session.run(None, {name: x[None].astype(dtype)})[0].reshape(1, -1) for x in X])


def refusal(exc: Exception) -> str:
    """The error's message without the file's path, cut to its first clause."""
    text = str(exc).split(": ", 1)[-1] if str(exc).startswith("/") else str(exc)
    return f"{type(exc).__name__}: {text[:160]}"


def build_options(model, label: str) -> tuple[str, dict]:
    """The precision and options of a build label for this model."""
    precision, options = BUILDS[label]
    if not isinstance(model, NetworkModel) and label != "int8_pow2":  # a dense network loads as an MLP: its
        options = {}  # int8 dialect "pow2" is the family's own, the default TFLite's (the file read as a network)
    return precision, options


def stepped_scores(model, label: str, data: Dataset) -> tuple[np.ndarray, object]:
    """A stepped recurrent model's host C at one build: each test sequence from a reset, one time step per call, its
    score the last step's; calibrated on the steps of the first training sequences as one stream."""
    precision, options = build_options(model, label)
    calibration = data.X_train[:STEPPED_CALIBRATION_SEQUENCES].reshape(-1, model.input_dim)
    result = tinycc_ml.compile(model, target="host", precision=precision, calibration=calibration, name="net",
                               **options)
    predictor = result.load()
    scores = []
    for sequence in data.X_test:
        predictor.reset()
        steps = np.asarray(sequence, dtype=np.float64).reshape(-1, model.input_dim)
        scores.append(np.asarray(predictor.decision_function(steps), dtype=np.float64)[-1])
    return np.array(scores), result


def host_scores(model, label: str, data: Dataset) -> tuple[np.ndarray, object]:
    """The host C's real scores on the test rows at one build, and the build."""
    if getattr(model, "recurrent", None) == "step":
        return stepped_scores(model, label, data)
    precision, options = build_options(model, label)
    rows = data.X_test.reshape(len(data.X_test), -1).astype(np.float64)
    calibration = data.X_train[:CALIBRATION_ROWS].reshape(CALIBRATION_ROWS, -1) if precision != "float" else None
    result = tinycc_ml.compile(model, target="host", precision=precision, calibration=calibration, name="net",
                               **options)
    predictor = result.load()
    if label == "int8_tflite" and (isinstance(model, NetworkModel) or model.network_form is not None):
        int8 = (model if isinstance(model, NetworkModel) else model.network_form()).quantise(calibration)
        # the C's input and scores: int8 tensors (token indices: int32_t)
        raw, _ = predictor.run_raw(int8.quantise_input(rows).astype(np.int32 if int8.integer_input else np.int8))
        out = int8.graph.type(int8.output_parts[0][1]).dtype
        return (raw.astype(np.float64) - out.zero_point) * out.qscales[0], result
    if isinstance(model, NetworkModel) and model.index_input:  # token indices: the C's int32_t rows
        return np.asarray(predictor.run_raw(rows.astype(np.int32))[0], dtype=np.float64), result
    return onnx_outputs(model, predictor, rows), result


FLOAT_LITERAL = re.compile(r"-?\d+\.\d*(?:e[-+]?\d+)?f")


def literals_apart(a: str, b: str) -> float | None:
    """The largest relative difference of the float literals of two C files that are otherwise equal (None: they
    differ elsewhere)."""
    if FLOAT_LITERAL.sub("F", a) != FLOAT_LITERAL.sub("F", b):
        return None
    x = np.array([float(v[:-1]) for v in FLOAT_LITERAL.findall(a)])
    y = np.array([float(v[:-1]) for v in FLOAT_LITERAL.findall(b)])
    return float(np.max(np.abs(x - y) / np.maximum(np.abs(x), 1e-30), initial=0.0))


def same_c(path: Path, ts_path: Path, calibration: np.ndarray, precisions: tuple[str, ...],
           stepped_calibration: np.ndarray | None = None) -> str:
    """Whether both exporters' files give the same C at ``precisions`` (the files copied to one name, as the C's
    comment names the file): "yes"; where the float C differs only in its constants, how far apart (relative) they
    are (the exporters fold BatchNorm into the Conv each in its own float32 arithmetic: the files' weights differ);
    else what differs. With ``stepped_calibration``, the integer builds are stepped (a recurrent model's)."""
    found = []
    with tempfile.TemporaryDirectory() as tmp:
        copies = []
        for k, p in enumerate((path, ts_path)):
            folder = Path(tmp) / str(k)
            folder.mkdir()
            for f in p.parent.glob(f"{p.name}*"):  # the .onnx renamed, its .onnx.data as the .onnx names it
                shutil.copy(f, folder / ("net.onnx" if f.name == p.name else f.name))
            copies.append(folder / "net.onnx")
        for precision in precisions:
            stepped = stepped_calibration is not None and precision != "float"
            files = [tinycc_ml.compile(tinycc_ml.load_model(p, recurrent="step" if stepped else "unroll"),
                                       target="host", precision=precision, name="net",
                                       calibration=None if precision == "float" else
                                       stepped_calibration if stepped else calibration).files
                     for p in copies]
            if files[0] == files[1]:
                continue
            apart = [literals_apart(files[0][n], files[1][n]) for n in files[0]] if precision == "float" else [None]
            found.append(f"{precision}: constants {max(apart):.1e} apart" if None not in apart else
                         f"{precision} differs")
    return "yes" if not found else "; ".join(found)


def measure(name: str, chips: bool) -> dict:
    data = DATASETS[MODELS[name]]()
    path, ts_path = OUT / f"{name}.onnx", OUT / f"{name}_ts.onnx"
    want = onnxruntime_scores(path, data.X_test)
    row = {"model": name, "data": MODELS[name], "task": data.task, "rows": len(data.X_test),
           "onnxruntime": score(want, data), "float_agreement": {}, "float_max_diff": {}, "accuracy": {},
           "refused": {}, "chips": {}}
    models = {}
    for exporter, p in (("dynamo", path), ("torchscript", ts_path)):
        try:
            models[exporter] = tinycc_ml.load_model(p)
        except TinyccError as exc:
            row["refused"][f"load_{exporter}"] = refusal(exc)
            continue
        try:
            got, _ = host_scores(models[exporter], "float", data)
        except TinyccError as exc:
            row["refused"][f"float_{exporter}"] = refusal(exc)
            continue
        except Exception as exc:  # noqa: BLE001 (a crash is a finding: recorded, the other models still measured)
            row["refused"][f"float_{exporter}"] = f"CRASH {refusal(exc)}"
            continue
        want_e = onnxruntime_scores(p, data.X_test) if exporter == "torchscript" else want
        row["float_max_diff"][exporter] = float(np.max(np.abs(got - want_e)))
        if data.task == "classify":
            row["float_agreement"][exporter] = float(np.mean(np.argmax(got, 1) == np.argmax(want_e, 1)))
        elif data.task == "pixels":
            row["float_agreement"][exporter] = float(np.mean((got > 0) == (want_e > 0)))
    if "dynamo" not in models:
        return row
    model = models["dynamo"]
    stepped = None
    if getattr(model, "recurrent_layers", ()):
        try:
            stepped = tinycc_ml.load_model(path, recurrent="step")
        except TinyccError as exc:
            row["stepped"] = refusal(exc)
    row["recurrent_form"] = {}
    builds = {}
    for label in BUILDS:
        try:
            if getattr(model, "recurrent_layers", ()):
                row["recurrent_form"][label] = "step" if stepped is not None and label in STEPPED_BUILDS else "unroll"
            got, result = host_scores(stepped if stepped is not None and label in STEPPED_BUILDS else model, label,
                                      data)
        except TinyccError as exc:
            row["refused"][label] = refusal(exc)
            continue
        except Exception as exc:  # noqa: BLE001 (a crash is a finding: recorded, the other models still measured)
            row["refused"][label] = f"CRASH {refusal(exc)}"
            continue
        builds[label] = result
        row["accuracy"][label] = score(got, data)
    if not row["recurrent_form"]:
        del row["recurrent_form"]
    calibration = data.X_train[:CALIBRATION_ROWS].reshape(CALIBRATION_ROWS, -1)
    if "torchscript" in models:
        precisions = ("float", "int16") if "int16" in builds else ("float",)
        steps = None if stepped is None else \
            data.X_train[:STEPPED_CALIBRATION_SEQUENCES].reshape(-1, stepped.input_dim)
        unfolded = (OUT / f"{name}_unfolded.onnx", OUT / f"{name}_ts_unfolded.onnx")
        try:
            row["same_c"] = same_c(path, ts_path, calibration, precisions, steps)
            if all(p.exists() for p in unfolded):  # a model with BatchNorm: its files as neither exporter folds them
                row["same_c_unfolded"] = same_c(*unfolded, calibration, precisions, steps)
        except TinyccError as exc:
            row["same_c"] = refusal(exc)
    chip_build = next((label for label in ("int8_pow2", "float") if label in builds), None)
    if chips and name in CHIP_MODELS and chip_build is not None:  # the project's int8 where it compiles, else float
        rows = data.X_test[:CHIP_ROWS].reshape(CHIP_ROWS, -1).astype(np.float64)
        host = builds[chip_build].load()
        host_raw = host.run_raw(host.quantise(rows) if not getattr(model, "index_input", False)
                                else rows.astype(np.int32))[0]
        precision, options = build_options(model, chip_build)
        for target in CHIPS:
            with tempfile.TemporaryDirectory() as tmp:
                try:
                    result = tinycc_ml.compile(model, target=target, precision=precision, calibration=calibration
                                               if precision != "float" else None, name="net", out_dir=tmp, **options)
                    run = get_backend(target).simulate(Path(tmp), result.output, rows)
                except TinyccError as exc:
                    row["chips"][target] = {"precision": chip_build, "refused": refusal(exc)}
                    continue
            costs = run.cycles if run.cycles is not None else run.instructions
            row["chips"][target] = {
                "precision": chip_build, "unit": "cycles" if run.cycles is not None else "instructions",
                "per_inference": int(np.median(costs)), "model_flash_bytes": int(run.model_flash_bytes),
                "model_ram_bytes": int(run.model_ram_bytes), "stack_bytes": int(run.stack_bytes or 0),
                "equal_to_host": bool(np.array_equal(np.asarray(run.scores).reshape(host_raw.shape), host_raw))}
    return row


def percent(value) -> str:
    return "—" if value is None else f"{100 * value:.1f}"


def quality(row: dict, label: str) -> str:
    if label in row["accuracy"]:
        value = row["accuracy"][label]
        stepped = " (stepped)" if row.get("recurrent_form", {}).get(label) == "step" else ""
        return (f"{value:.4f}" if row["task"] == "reconstruct" else percent(value)) + stepped
    return "refused" if label in row["refused"] else "—"


def same_c_cell(row: dict) -> str:
    """"yes", or how the default files' C differ and whether the unfolded files' C are the same."""
    cell = row.get("same_c", "—")
    if "same_c_unfolded" in row and cell != "yes":
        cell = f"unfolded files: {row['same_c_unfolded']} (default files: {cell})"
    return cell


def print_tables(rows: list[dict]) -> None:
    print("| model | data | onnxruntime | float | int16 | pow2 int8 | TFLite int8 | float labels = onnxruntime "
          "(dynamo, TorchScript) | float max diff | same C |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        ort = f"{r['onnxruntime']:.4f}" if r["task"] == "reconstruct" else percent(r["onnxruntime"])
        agree = ", ".join(percent(r["float_agreement"].get(e)) for e in ("dynamo", "torchscript")) \
            if r["float_agreement"] else "—"
        diff = max(r["float_max_diff"].values()) if r["float_max_diff"] else None
        print(f"| {r['model']} | {r['data']} | {ort} | {quality(r, 'float')} | {quality(r, 'int16')} | "
              f"{quality(r, 'int8_pow2')} | {quality(r, 'int8_tflite')} | {agree} | "
              f"{'—' if diff is None else f'{diff:.1e}'} | {same_c_cell(r)} |")
    refused = [(r["model"], k, v) for r in rows for k, v in r["refused"].items()]
    if refused:
        print("\nRefused:\n")
        for model, build, why in refused:
            print(f"- {model} ({build}): {why}")
    chip_rows = [r for r in rows if r["chips"]]
    if chip_rows:
        print("\n| model | " + " | ".join(CHIPS) + " |")
        print("| --- |" + " --- |" * len(CHIPS))
        for r in chip_rows:
            cells = []
            for target in CHIPS:
                c = r["chips"].get(target)
                if c is None:
                    cells.append("—")
                elif "refused" in c:
                    cells.append("does not fit" if "FitError" in c["refused"] else "refused")
                else:
                    cells.append(f"{c['per_inference']:,} {c['unit'][:5]}., {c['model_flash_bytes']:,} B flash, "
                                 f"{c['model_ram_bytes']:,} B RAM{'' if c['equal_to_host'] else ' (DIFFERS)'}"
                                 f"{' (float)' if c['precision'] == 'float' else ''}")
            print(f"| {r['model']} | " + " | ".join(cells) + " |")


def write_docs(rows: list[dict]) -> None:
    """docs/guide/networks.md's two zoo tables replaced by these rows' (as print_tables prints them)."""
    import contextlib
    import io

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        print_tables(rows)
    text = printed.getvalue()
    tables = {"| model | data | onnxruntime": text.split("\nRefused:")[0].split("\n\n| model | avr")[0].strip()}
    if "\n| model | avr" in text:
        tables["| model | avr"] = ("| model | avr" + text.split("\n| model | avr", 1)[1]).split("\n\n")[0].strip()
    path = REPO / "docs" / "guide" / "networks.md"
    doc = path.read_text()
    for head, table in tables.items():
        start = doc.index(head)
        doc = doc[:start] + table + doc[doc.index("\n\n", start):]
    path.write_text(doc)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chips", action="store_true", help="also run the chip subset in the simulators")
    parser.add_argument("--no-write", action="store_true", help="print only (no benchmarks/results/pytorch_zoo.json)")
    parser.add_argument("--docs", action="store_true", help="only rewrite docs/guide/networks.md's zoo tables from "
                        "benchmarks/results/pytorch_zoo.json")
    parser.add_argument("names", nargs="*", help="the models to measure (default: all)")
    args = parser.parse_args()
    out = REPO / "benchmarks" / "results" / "pytorch_zoo.json"
    previous = {r["model"]: r for r in json.loads(out.read_text())} if out.exists() else {}
    if args.docs:
        write_docs([previous[m] for m in MODELS if m in previous])
        return
    rows = []
    for name in MODELS:
        if args.names and name not in args.names:
            continue
        rows.append(measure(name, args.chips))
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    print_tables(rows)
    if not args.no_write:  # measured models replace their rows; the others stay
        previous.update({r["model"]: r for r in rows})
        out.write_text(json.dumps([previous[m] for m in MODELS if m in previous], indent=1) + "\n")
        if len(previous) > len(rows):
            print("\nAll models measured so far:\n")
            print_tables([previous[m] for m in MODELS if m in previous])


if __name__ == "__main__":
    main()
