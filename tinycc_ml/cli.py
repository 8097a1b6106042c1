"""The command line: ``tinycc-ml compile | targets | demo``.

Every error tinycc-ml raises on purpose (a TinyccError) is printed as one line,
``tinycc-ml: error: <message>``, on stderr with exit status 2 and nothing written; argparse usage
errors also exit 2. Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from tinycc_ml.errors import CompileError, DataError, TinyccError
from tinycc_ml.models.saved import read_arrays

PROG = "tinycc-ml"
FIXED_PIPELINE_MODULE = "tinycc_ml.passes.fixed_pipeline"


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line on stderr, status 2, like every other error
        sys.stderr.write(f"{self.prog}: error: {message}\n")
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    from tinycc_ml.version import __version__

    parser = _Parser(prog=PROG, description="Compile trained tiny ML models into dependency-free C.")
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    c = sub.add_parser("compile", help="compile a saved model to C",
                       description="Compile a saved model (.npz model file or EdgeML directory) to C.")
    c.add_argument("model", metavar="MODEL", help="a .npz model file or an EdgeML model directory")
    c.add_argument("--target", default="host",
                   help="code-generation target (see `tinycc-ml targets`); default host")
    c.add_argument("-o", "--output", required=True, metavar="DIR", help="folder for <name>.h and <name>.c")
    c.add_argument("--name", default=None,
                   help="C identifier prefixing every symbol and naming the files; default: the model family")
    c.add_argument("--precision", default="float", choices=("float", "int16", "int8"),
                   help="float (default) or integer-only fixed point (needs --calibration)")
    c.add_argument("--calibration", metavar="FILE", default=None,
                   help="typical input rows (.npy, or .npz holding one array or an array named X) to choose "
                        "fixed-point scales")
    c.add_argument("--arduino", action="store_true",
                   help="with --target avr: write an Arduino library folder DIR/NAME (library.properties, src/, "
                        "an example sketch) instead of the bare .h/.c")
    c.add_argument("--dump-ir-after", metavar="PASS", action="append", default=[],
                   help="print the IR after pass PASS (or 'all') to stderr; may be repeated")
    c.set_defaults(func=cmd_compile)

    r = sub.add_parser("report", help="measure a model compiled for a target: accuracy, sizes, speed",
                       description="Compile MODEL for TARGET, run it on the rows of --data (in the simulator "
                                   "for avr and cortex-m0) and report accuracy, flash, RAM, stack and "
                                   "cycles (AVR) or instructions (Cortex-M0) per inference.")
    r.add_argument("model", metavar="MODEL", help="a .npz model file or an EdgeML model directory")
    r.add_argument("--target", default="host", help="host, avr or cortex-m0 (default host)")
    r.add_argument("--data", required=True, metavar="FILE",
                   help=".npz with test rows X (or X_test) and labels y (or y_test); X_train, if present, "
                        "calibrates integer builds")
    r.add_argument("--precision", default="int16", choices=("float", "int16", "int8"))
    r.add_argument("--calibration", metavar="FILE", default=None, help="calibration rows (as for compile)")
    r.add_argument("--rows", type=int, default=200, help="test rows to run (default 200; 0 for all)")
    r.add_argument("--json", action="store_true", help="print one JSON object")
    r.set_defaults(func=cmd_report)

    t = sub.add_parser("targets", help="list the code-generation targets")
    t.set_defaults(func=cmd_targets)

    d = sub.add_parser("demo",
                       help="train, compile, build and check a model on scikit-learn's digits (offline)")
    d.add_argument("-o", "--output", default="tinycc-ml-demo", metavar="DIR",
                   help="folder for the demo's files (default ./tinycc-ml-demo)")
    d.set_defaults(func=cmd_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args) or 0
    except TinyccError as exc:
        return _fail(exc)
    except ModuleNotFoundError as exc:
        if exc.name != FIXED_PIPELINE_MODULE:
            raise
        return _fail("fixed-point precision is not available in this version of tinycc-ml")
    except OSError as exc:  # the file system said no (permissions, disk full): not a bug
        return _fail(exc)


def _fail(message) -> int:
    text = " ".join(str(message).split())  # exactly one line
    sys.stderr.write(f"{PROG}: error: {text}\n")
    return 2


# ---------------------------------------------------------------- compile


def load_calibration(path) -> np.ndarray:
    """Rows of typical inputs from a .npy file, or a .npz holding one array (or one named X)."""
    loaded = read_arrays(path, DataError)
    if isinstance(loaded, np.ndarray):
        return loaded
    if "X" in loaded:
        return loaded["X"]
    if len(loaded) == 1:
        return next(iter(loaded.values()))
    raise DataError(f"{path}: holds arrays {', '.join(loaded) or '(none)'}; expected one, or one named X")


def _check_dump_names(names: list[str]) -> list[str]:
    import importlib

    from tinycc_ml.passes import PASSES

    try:  # the fixed-point passes register themselves when their pipeline is imported
        importlib.import_module(FIXED_PIPELINE_MODULE)
    except ModuleNotFoundError as exc:
        if exc.name != FIXED_PIPELINE_MODULE:
            raise

    for name in names:
        if name != "all" and name not in PASSES:
            known = ", ".join(sorted(PASSES))
            raise CompileError(f"--dump-ir-after: unknown pass {name!r}; passes: all, {known}")
    return names


def cmd_compile(args) -> int:
    import tinycc_ml

    dump = _check_dump_names(args.dump_ir_after)
    calibration = load_calibration(args.calibration) if args.calibration else None
    if calibration is not None and args.precision == "float":
        raise CompileError("--calibration is only used with --precision int16 or int8")
    if args.arduino and args.target != "avr":
        raise CompileError("--arduino needs --target avr")
    result = tinycc_ml.compile(args.model, target=args.target, out_dir=None if args.arduino else args.output,
                               name=args.name, precision=args.precision, calibration=calibration,
                               dump_ir_after=dump)
    if args.arduino:
        from tinycc_ml.api import write_files
        from tinycc_ml.backends.arduino import arduino_library

        sample = calibration[0] if calibration is not None else None
        files = arduino_library(result, sample)
        write_files(Path(args.output), files)
        result.out_dir, result.files = Path(args.output), files
    report = result.report
    print(f"compiled {report['model']}")
    print(f"target {result.target}, precision {result.precision}, prefix {result.prefix}")
    print(f"constants {report.get('const_bytes', 0)} bytes, static RAM {report.get('ram_bytes', 0)} bytes")
    if "fit" in report:
        fit = report["fit"]
        print(f"fits the {fit['chip']}: {fit['flash_bytes']} bytes of flash, {fit['ram_bytes']} bytes of static RAM "
              f"+ ~{fit['stack_estimate']} bytes of stack ({fit['how']})")
    for path in result.paths:
        print(f"wrote {path}")
    return 0


# ---------------------------------------------------------------- report


def load_report_data(path) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """(X, y or None, X_train or None) from an .npz, never unpickling."""
    arrays = read_arrays(path, DataError)
    if not isinstance(arrays, dict):
        raise DataError(f"{path}: one .npy array; expected an .npz with X (or X_test) and y (or y_test)")
    X = arrays.get("X", arrays.get("X_test"))
    if X is None:
        raise DataError(f"{path}: no array X or X_test (holds {', '.join(arrays) or 'nothing'})")
    y = arrays.get("y", arrays.get("y_test"))
    if y is not None and len(y) != len(X):
        raise DataError(f"{path}: {len(X)} rows of X but {len(y)} labels")
    return X, y, arrays.get("X_train")


def cmd_report(args) -> int:
    import json

    from tinycc_ml.api import load_model
    from tinycc_ml.target_report import target_report

    model = load_model(args.model)
    X, y, X_train = load_report_data(args.data)
    calibration = load_calibration(args.calibration) if args.calibration else X_train
    if args.rows:
        X, y = X[: args.rows], (None if y is None else y[: args.rows])
    report = target_report(model, args.target, X, y, precision=args.precision,
                           calibration=None if args.precision == "float" else (calibration if calibration is not None
                                                                              else X))
    report.pop("compile_report", None)
    if args.json:
        print(json.dumps(report, sort_keys=True, default=lambda v: v.tolist() if hasattr(v, "tolist") else str(v)))
        return 0
    for key in ("target", "precision", "rows", "float_accuracy", "target_accuracy", "agreement_with_float",
                "flash_bytes", "ram_bytes", "model_flash_bytes", "model_ram_bytes", "stack_bytes", "cycles_mean",
                "cycles_max", "instructions_mean", "instructions_max", "macs", "per_mac", "method"):
        value = report.get(key)
        if value is not None:
            print(f"{key:<22} {value:.4g}" if isinstance(value, float) else f"{key:<22} {value}")
    return 0


# ---------------------------------------------------------------- targets


def cmd_targets(args) -> int:
    from tinycc_ml.backends.base import available_backends

    backends = available_backends()
    width = max((len(n) for n in backends), default=0)
    for name, cls in backends.items():
        precisions = ", ".join(getattr(cls, "precisions", ()) or ())
        print(f"{name:<{width}}  {cls.description}  [precision: {precisions}]")
    return 0


# ---------------------------------------------------------------- demo


def _train_demo_model(X_train, y_train):
    """A ProtoNN: the trainer with small settings when it is there, else the quick initialiser."""
    try:
        from tinycc_ml.models.protonn_trainer import ProtoNNClassifier
    except ImportError:
        ProtoNNClassifier = None
    if ProtoNNClassifier is not None:
        clf = ProtoNNClassifier(n_iter=5, epochs=3, random_state=0, verbose=0).fit(X_train, y_train)
        return clf.to_model(), "ProtoNNClassifier (5 iterations)"
    from tinycc_ml.models.protonn import init_protonn

    model = init_protonn(X_train, y_train, projection_dim=15, prototypes_per_class=5)
    return model, "init_protonn (PCA + k-means)"


def _time_per_prediction(predict, X, min_seconds: float = 0.2) -> float:
    """Seconds per row of ``predict(X)``, over enough repeats to last ``min_seconds``."""
    rows, start = 0, time.perf_counter()
    while True:
        predict(X)
        rows += len(X)
        elapsed = time.perf_counter() - start
        if elapsed >= min_seconds:
            return elapsed / rows


def cmd_demo(args) -> int:
    import tinycc_ml
    from tinycc_ml.api import write_files

    start = time.perf_counter()
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    out = Path(args.output)
    X, y = load_digits(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.25, random_state=0, stratify=y)
    print(f"dataset: scikit-learn digits, {X.shape[0]} images of 8x8 = {X.shape[1]} features, "
          f"{len(np.unique(y))} classes; {len(X_train)} train / {len(X_test)} test rows")

    model, how = _train_demo_model(X_train, y_train)
    print(f"model: ProtoNN from {how}: D={model.input_dim}, projection d^={model.W.shape[0]}, "
          f"m={model.n_prototypes} prototypes, L={model.n_outputs} classes")
    param_bytes = 4 * (model.W.size + model.B.size + model.Z.size)
    out.mkdir(parents=True, exist_ok=True)
    model_path = model.save(out / "protonn_digits.npz")
    print(f"saved {model_path} ({model_path.stat().st_size} bytes on disk; "
          f"W, B, Z = {param_bytes} bytes in float32)")

    result = tinycc_ml.compile(model_path, target="host", out_dir=out, name="digits")
    print(f"compiled to C for target host: constants {result.report['const_bytes']} bytes, "
          f"static RAM {result.report['ram_bytes']} bytes")
    for path in result.paths:
        print(f"  wrote {path}")
    predictor = result.load()

    ref = model.predict(X_test)
    c_pred = predictor.predict(X_test)
    rows = [("float (numpy)", float(np.mean(ref == y_test)), None,
             _time_per_prediction(model.predict, X_test)),
            ("C float32", float(np.mean(c_pred == y_test)), float(np.mean(c_pred == ref)),
             _time_per_prediction(predictor.predict, X_test))]

    try:
        fixed = tinycc_ml.compile(model_path, target="host", name="digits_int16", precision="int16",
                                  calibration=X_train)
        write_files(out, fixed.files)
        for name in fixed.files:
            print(f"  wrote {out / name}")
        q = fixed.load()
        q_pred = q.predict(X_test)
        rows.append(("C int16", float(np.mean(q_pred == y_test)), float(np.mean(q_pred == ref)),
                     _time_per_prediction(q.predict, X_test)))
    except Exception as exc:  # the demo works with or without fixed point
        if isinstance(exc, ModuleNotFoundError) and exc.name == FIXED_PIPELINE_MODULE:
            print("int16: fixed point is not available in this version, skipped")
        else:
            print(f"int16: skipped ({type(exc).__name__}: {' '.join(str(exc).split())})")

    print(f"\n{'build':<14} {'test accuracy':>13} {'agrees with float':>18} {'time/prediction':>16}")
    for label, acc, agree, seconds in rows:
        agree_text = "-" if agree is None else f"{100 * agree:.1f}%"
        print(f"{label:<14} {100 * acc:>12.1f}% {agree_text:>18} {seconds * 1e6:>13.2f} us")
    print(f"\ndone in {time.perf_counter() - start:.1f} s; C sources in {out}/")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
