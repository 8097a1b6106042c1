"""The command line: ``tinycc-ml compile | report | fit | targets | demo``.

Every error tinycc-ml raises on purpose (a TinyccError) is printed as one line,
``tinycc-ml: error: <message>``, on stderr with exit status 2 and nothing written; argparse usage
errors also exit 2. Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import functools
import logging
import math
import os
import sys
import time
import warnings
from pathlib import Path

from tinycc_ml.errors import CompileError, DataError, ModelFileError, TinyccError
from tinycc_ml.files import depfile_text, write_tree
from tinycc_ml.model_formats import describe_formats
from tinycc_ml.version import __version__

log = logging.getLogger("tinycc_ml")

PROG = "tinycc-ml"
PRECISIONS = ("float", "int16", "int8")
DATA_FILE_HELP = (".npy rows, or .npz with X_train / X / X_test and labels y_train / y / y_test "
                  "(see docs/guide/data-files.md)")
FIXED_PIPELINE_MODULE = "tinycc_ml.passes.fixed_pipeline"


class _TargetNames:
    """The registry's target names (plug-ins too), read when a help text is printed: ``%(targets)s`` in an
    argument's help (``_list_targets``)."""

    def __str__(self) -> str:
        # deferred: the command line's start-up (the target registry loads the code generator)
        from tinycc_ml.codegen.backend import BACKENDS

        return ", ".join(BACKENDS.names())


def _list_targets(action: argparse.Action) -> argparse.Action:
    action.targets = _TargetNames()
    return action


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line on stderr, status 2, like every other error
        sys.stderr.write(f"{self.prog}: error: {message}\n")
        raise SystemExit(2)


FRONT_END_HELP = ("a front end's JSON file (tinycc_ml.features.save_front_end writes one: its steps, e.g. Framer, "
                  "Window, PowerSpectrum, MelFilterBank, Log, and the raw row's width): compiled before the model "
                  "into one entry point from raw samples, with <name>_feed for streams; the data rows are raw samples")


def build_parser() -> argparse.ArgumentParser:

    parser = _Parser(prog=PROG, description="Compile trained tiny ML models into dependency-free C.")
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    loud = parser.add_mutually_exclusive_group()
    loud.add_argument("-v", "--verbose", action="count", default=0,
                      help="log progress of long steps (-vv: debug details)")
    loud.add_argument("-q", "--quiet", action="store_true", help="print errors only")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    c = sub.add_parser("compile", help="compile a saved model to C",
                       description="Compile a model file or folder to C.")
    c.add_argument("model", metavar="MODEL", help=describe_formats().replace("%", "%%"))
    _list_targets(c.add_argument("--target", default="host",
                                 help="code-generation target: %(targets)s (`tinycc-ml targets` says what each "
                                      "offers); default host"))
    c.add_argument("-o", "--output", required=True, metavar="DIR", help="folder for <name>.h and <name>.c")
    c.add_argument("--name", default=None,
                   help="C identifier prefixing every symbol and naming the files; default: the model family")
    c.add_argument("--precision", default=None, choices=PRECISIONS,
                   help="float, or integer-only fixed point int16/int8 (needs calibration rows); "
                        "default: int16 when --calibration is given, else float")
    c.add_argument("--int8-dialect", default=None, choices=("tflite", "pow2"),
                   help="a float network (ONNX, dense chains too; float .tflite) at --precision int8: tflite (the "
                        "default: TFLite's int8 quantisation, zero points and 32-bit multipliers) or pow2 (the "
                        "project's fixed point, power-of-two scales, as --precision int16 uses)")
    c.add_argument("--recurrent", default=None, choices=("unroll", "step"),
                   help="an ONNX network's recurrent layers (GRU, LSTM, RNN): unroll (the default: the whole "
                        "sequence per call) or step (one time step per call, the states kept in static RAM between "
                        "calls; <name>_reset() starts a new sequence)")
    c.add_argument("--sequence-length", type=int, default=None, metavar="N",
                   help="the length of an ONNX recurrent layer's sequence where the file leaves it dynamic "
                        "(unrolled builds)")
    c.add_argument("--optimize", default=None, choices=("size", "speed"),
                   help="where a kernel has a choice (a network's weights on cortex-m4/m33): size (the default: int8 "
                        "weights in flash, about the .tflite file's size) or speed (weights widened to int16 where "
                        "that saves instructions: more flash)")
    c.add_argument("--max-flash", type=_byte_count, default=None, metavar="BYTES",
                   help="your chip's flash when it has less than the target's (e.g. 16384 or 16K): the build is "
                        "checked against it")
    c.add_argument("--max-ram", type=_byte_count, default=None, metavar="BYTES",
                   help="your chip's RAM when it has less than the target's (e.g. 4K)")
    c.add_argument("--ram-limit", type=_byte_count, default=None, metavar="BYTES",
                   help="a TFLite int8 network's activation arena at most BYTES (e.g. 24K): where its whole layers "
                        "take more, its early layers are computed in patches (the split and grid with the fewest "
                        "extra MACs that fit; refused when none does)")
    c.add_argument("--board", default=None, metavar="NAME",
                   help="one of the target's boards (`tinycc-ml targets` lists them; cortex-m4: mps2-an386, "
                        "stm32f405, nrf52840): the build is checked against its chip, --project writes its "
                        "start-up, linker script and UART")
    c.add_argument("--calibration", metavar="FILE", default=None,
                   help=f"typical input rows to choose fixed-point scales: {DATA_FILE_HELP}")
    c.add_argument("--front-end", metavar="FILE", default=None, help=FRONT_END_HELP)
    kind = c.add_mutually_exclusive_group()
    kind.add_argument("--arduino", action="store_true",
                      help="with --target avr: write an Arduino/PlatformIO library folder DIR/NAME "
                           "(library.properties, library.json, src/, an example sketch) instead of the bare .h/.c")
    kind.add_argument("--project", action="store_true",
                      help="with a target that writes one (avr, cortex-m0, cortex-m4, cortex-m33; see "
                           "`tinycc-ml targets`): write a standalone firmware project into DIR "
                           "(startup, linker script, main running stored inputs, Makefile)")
    c.add_argument("--examples", metavar="FILE", default=None,
                   help="for --arduino/--project: rows stored in the example, with their labels y (the labels "
                        f"the model was trained on; {DATA_FILE_HELP}); default: the first calibration rows")
    c.add_argument("--depfile", metavar="FILE", default=None,
                   help="also write a Makefile-syntax depfile: the outputs depend on every input read")
    c.add_argument("--manifest", metavar="FILE", default=None,
                   help="also write a JSON list of the outputs and inputs (rewritten on every run: a build stamp)")
    c.add_argument("--dump-ir-after", metavar="PASS", action="append", default=[],
                   help="print the IR after pass PASS (or 'all') to stderr; may be repeated")
    c.set_defaults(func=cmd_compile)

    r = sub.add_parser("report", help="measure a model compiled for a target: accuracy, sizes, speed",
                       description="Compile MODEL for TARGET, run it on the rows of --data (in the simulator "
                                   "for avr and cortex-m0) and report accuracy, flash, RAM, stack and "
                                   "cycles (AVR) or instructions (Cortex-M0, M4, M33) per inference; on the "
                                   "Cortex-M4/M33 also cycles, the TRM's timings on the executed instructions.")
    r.add_argument("model", metavar="MODEL",
                   help="tinycc-ml's .npz model file, an XGBoost .json or .ubj, a LightGBM .txt, an ONNX .onnx, "
                        "or an EdgeML model folder")
    _list_targets(r.add_argument("--target", default="host",
                                 help="a target that can run its builds here: %(targets)s (default host)"))
    r.add_argument("--data", required=True, metavar="FILE",
                   help=f"test rows and labels: {DATA_FILE_HELP}")
    r.add_argument("--precision", default=None, choices=PRECISIONS,
                   help="float, int16 or int8; default int16 (calibrated on the data file's rows)")
    r.add_argument("--calibration", metavar="FILE", default=None,
                   help="calibration rows (as for compile); default: the data file's calibration rows")
    r.add_argument("--front-end", metavar="FILE", default=None, help=FRONT_END_HELP)
    r.add_argument("--max-flash", type=_byte_count, default=None, metavar="BYTES",
                   help="your chip's flash when it has less than the target's (e.g. 16384 or 16K): the build is "
                        "checked against it")
    r.add_argument("--max-ram", type=_byte_count, default=None, metavar="BYTES",
                   help="your chip's RAM when it has less than the target's (e.g. 4K)")
    r.add_argument("--ram-limit", type=_byte_count, default=None, metavar="BYTES",
                   help="a TFLite int8 network's activation arena at most BYTES (e.g. 24K): where its whole layers "
                        "take more, its early layers are computed in patches (the split and grid with the fewest "
                        "extra MACs that fit; refused when none does)")
    r.add_argument("--board", default=None, metavar="NAME",
                   help="one of the target's boards (`tinycc-ml targets`): the build is checked against its chip")
    r.add_argument("--optimize", default=None, choices=("size", "speed"),
                   help="where a kernel has a choice (a network's weights on cortex-m4/m33): size (the default: int8 "
                        "weights in flash, about the .tflite file's size) or speed (weights widened to int16 where "
                        "that saves instructions: more flash)")
    r.add_argument("--rows", type=int, default=200, help="test rows to run (default 200; 0 for all)")
    r.add_argument("--flash-wait-states", type=_wait_states, default=0, metavar="N",
                   help="Cortex-M4/M33 cycle model: flash wait states on each data read from flash and each "
                        "branch refill (default 0: zero-wait-state memory)")
    r.add_argument("--json", action="store_true", help="print one JSON object")
    r.set_defaults(func=cmd_report)

    f = sub.add_parser("fit", help="search for the most accurate model that fits a chip, measured on the target",
                       description="Train every model family at sizes the limits allow, compile each at each "
                                   "precision, measure it on the target (validation accuracy of the compiled code, "
                                   "flash, RAM, cycles or instructions in the simulator) and write the most "
                                   "accurate one that meets every limit: its model file, its C, pareto.json, "
                                   "pareto.txt and pareto.png (with matplotlib). Limits count the model's own "
                                   "flash (code + constants) and RAM (static + peak stack of a prediction), not "
                                   "the rest of the firmware or the caller's input array.")
    f.add_argument("data", metavar="DATA", help="an .npz with X_train and y_train (X_test / y_test, if present, "
                                                "are used only for the final check)")
    _list_targets(f.add_argument("--target", default="avr",
                                 help="the target to measure on (host, or one with a simulator): %(targets)s "
                                      "(default avr)"))
    f.add_argument("-o", "--output", required=True, metavar="DIR", help="folder for the results")
    f.add_argument("--max-flash", type=_byte_count, default=None, metavar="BYTES",
                   help="flash of the model's code and constants (e.g. 16384 or 16K)")
    f.add_argument("--max-ram", type=_byte_count, default=None, metavar="BYTES",
                   help="the model's static RAM plus its peak stack during a prediction")
    f.add_argument("--max-ms", type=float, default=None, metavar="MS",
                   help="milliseconds per prediction at --clock-hz (AVR: exact cycles; Cortex-M0: instructions at "
                        "1.5 cycles each)")
    f.add_argument("--clock-hz", type=float, default=None, metavar="HZ", help="clock for --max-ms (default: the "
                                                                                "chip's, 16 MHz)")
    f.add_argument("--precision", default="auto", choices=("auto", *PRECISIONS),
                   help="auto (default: int16 and int8 on microcontrollers, also float on the host) or one")
    f.add_argument("--families", default=None, metavar="LIST",
                   help="comma-separated families (default all): see docs/guide/fit.md")
    f.add_argument("--time-budget", type=float, default=300.0, metavar="S",
                   help="seconds for the whole run, retraining and final check included (default 300; within "
                        "about 10%%: 10%% is kept for the end from the start, a candidate is started only while "
                        "time remains for it and the end, and one still running then is stopped)")
    f.add_argument("--jobs", type=_jobs, default=1, metavar="N",
                   help="worker processes training and measuring candidates at once (default 1; -1: one per "
                        "core); the choice does not depend on it")
    f.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="run the candidates on a Dask cluster (e.g. tcp://10.0.0.5:8786; needs dask[distributed] "
                        "and the toolchains on every worker)")
    f.add_argument("--start", default=None, metavar="ESTIMATOR",
                   help="search only this estimator's family, keeping its settings, e.g. "
                        "'RandomForestClassifier(max_depth=12, criterion=\"entropy\")' (literal settings only; "
                        "the size knob is the search's), or a model file (its family, and what the file keeps)")
    f.add_argument("--sizes", type=int, default=4, metavar="N", help="sizes per family (default 4)")
    f.add_argument("--random-state", type=int, default=0, metavar="N", help="seed of the split and the trainers")
    f.add_argument("--name", default="model", help="C identifier prefixing every symbol (default model)")
    f.set_defaults(func=cmd_fit)

    t = sub.add_parser("targets", help="list the code-generation targets")
    t.set_defaults(func=cmd_targets)

    k = sub.add_parser("cmake-dir", help="print the folder of TinyccML.cmake (for CMAKE_MODULE_PATH)")
    k.set_defaults(func=cmd_cmake_dir)

    d = sub.add_parser("demo",
                       help="train, compile, build and check a model on scikit-learn's digits (offline)")
    d.add_argument("-o", "--output", default="tinycc-ml-demo", metavar="DIR",
                   help="folder for the demo's files (default ./tinycc-ml-demo)")
    d.set_defaults(func=cmd_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        return _main(argv)
    except KeyboardInterrupt:  # outputs are staged and moved in whole, so nothing is half-written
        import signal

        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C does not cut the line short
        try:
            sys.stderr.write(f"{PROG}: error: interrupted\n")
            sys.stderr.flush()
        finally:  # a process calling main() (a test, a notebook) keeps its own handler; children inherit it
            signal.signal(signal.SIGINT, previous)
        return 130


def _main(argv: list[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    undo_logging = configure_logging(args.verbose, args.quiet)
    try:
        # numpy's warnings (overflow in a hostile file's values...) are collected, not printed ahead of
        # the one error line; a command that succeeds shows them after its output
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("default")
            status = _run_command(args)
    finally:
        undo_logging()
    if status == 0:  # warnings logged on the way are said once the command has succeeded, else dropped
        for text in undo_logging.held:
            sys.stderr.write(text + "\n")
    if status == 0 and not args.quiet:
        for text in dict.fromkeys(" ".join(str(w.message).split()) for w in caught):
            sys.stderr.write(f"{PROG}: warning: {text}\n")
    return status


def _run_command(args) -> int:
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


def configure_logging(verbose: int, quiet: bool):
    """Log lines ``tinycc-ml: message`` on stderr at the level -v/-q ask for (warnings by default), and
    a progress bar when stderr is a terminal. Returns the function that undoes it (main calls it on
    the way out, so an embedding program keeps its own logging). Warnings (and log errors) are held in
    ``undo.held`` rather than printed: a command that fails prints its one error line alone, one that
    succeeds prints them at the end; progress (-v) is printed as it comes."""
    # deferred: the command line's start-up (the compiler loads for the commands that use it)
    from tinycc_ml import progress

    level = logging.ERROR if quiet else (logging.WARNING, logging.INFO, logging.DEBUG)[min(verbose, 2)]
    logger = logging.getLogger("tinycc_ml")
    handler = _HoldingHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(f"{PROG}: %(message)s"))
    old_level, old_propagate, old_bar = logger.level, logger.propagate, progress.bar_shown()
    logger.addHandler(handler)
    logger.setLevel(level)
    logger.propagate = False
    progress.show_bar(not quiet and sys.stderr.isatty())

    def undo() -> None:
        logger.removeHandler(handler)
        logger.setLevel(old_level)
        logger.propagate = old_propagate
        progress.show_bar(old_bar)

    undo.held = handler.held
    return undo


class _HoldingHandler(logging.StreamHandler):
    """Streams records below WARNING; keeps the formatted text of the others in ``held``."""

    def __init__(self, stream):
        super().__init__(stream)
        self.held: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.WARNING:
            try:
                self.held.append(" ".join(self.format(record).split()))
            except Exception:  # noqa: BLE001 - logging's own rule: a bad record never breaks the program
                self.handleError(record)
            return
        super().emit(record)


def say(args, text: str) -> None:
    """Normal command output on stdout; -q silences it."""
    if not getattr(args, "quiet", False):
        print(text)


def _fail(message) -> int:
    text = " ".join(str(message).split())  # exactly one line
    sys.stderr.write(f"{PROG}: error: {text}\n")
    return 2


# ---------------------------------------------------------------- compile


def _check_dump_names(names: list[str]) -> list[str]:
    # deferred: the command line's start-up (the compiler loads for the commands that use it)
    from tinycc_ml.passes import PASSES

    for name in names:
        if name != "all" and name not in PASSES:
            known = ", ".join(sorted(PASSES))
            raise CompileError(f"--dump-ir-after: unknown pass {name!r}; passes: all, {known}")
    return names


def default_precision(precision: str | None, has_calibration: bool, family: str | None = None) -> str:
    """One rule for compile and report: with calibration rows at hand int16 (a network: int8, the precision
    networks are quantised to), float otherwise."""
    return precision or (("int8" if family == "network" else "int16") if has_calibration else "float")


def _check_folder_of(path: str | None, option: str, out_dir: str) -> None:
    """The folder of a side file must exist, or be the output folder (created by the compile)."""
    if path is None:
        return
    folder = Path(path).resolve().parent
    if not folder.is_dir() and folder != Path(out_dir).resolve():
        raise CompileError(f"{option} {path}: folder {Path(path).parent} does not exist")


def cmd_compile(args) -> int:
    # deferred: the command line's start-up (the compiler loads for the commands that use it)
    import tinycc_ml
    from tinycc_ml.api import default_name, model_input_files, name_the_file
    from tinycc_ml.datafiles import load_rows

    dump = _check_dump_names(args.dump_ir_after)
    _check_folder_of(args.depfile, "--depfile", args.output)
    _check_folder_of(args.manifest, "--manifest", args.output)
    if args.arduino or args.project:
        # deferred: the command line's start-up (the compiler loads for the commands that use it)
        from tinycc_ml.codegen.backend import get_backend, targets_supporting

        capability, option = ("arduino_library", "--arduino") if args.arduino else ("project_files", "--project")
        if not get_backend(args.target).supports(capability):
            able = ", ".join(targets_supporting(capability))
            raise CompileError(f"{option} needs a target that writes one ({able}); target {args.target} does not")
    if args.examples and not (args.arduino or args.project):
        raise CompileError("--examples is only used with --arduino or --project")
    calibration = load_rows(args.calibration, "calibration")[0] if args.calibration else None
    model = tinycc_ml.load_model(args.model, recurrent=args.recurrent, sequence_length=args.sequence_length)
    front_end = None
    if args.front_end:
        # deferred: tinycc_ml.features imports scikit-learn, which no other model's compile needs
        from tinycc_ml.features.spec import load_front_end

        front_end = load_front_end(args.front_end)
    precision = default_precision(args.precision, calibration is not None, model.family)
    if calibration is not None and precision == "float":
        raise CompileError("--calibration is only used with --precision int16 or int8")
    inputs = model_input_files(args.model) + [Path(f) for f in (args.front_end, args.calibration, args.examples) if f]
    layout = "arduino" if args.arduino else ("project" if args.project else "files")
    rows, labels = (load_rows(args.examples, "test")[:2] if args.examples else (calibration, None))
    name = args.name if args.name is not None else default_name(args.model, model)
    try:
        result = tinycc_ml.compile(model, target=args.target, name=name,
                                   precision=precision,
                                   calibration=calibration, dump_ir_after=dump, layout=layout, front_end=front_end,
                                   examples=rows if layout != "files" else None, example_labels=labels,
                                   max_flash=args.max_flash, max_ram=args.max_ram, board=args.board,
                                   **({"int8_dialect": args.int8_dialect} if args.int8_dialect else {}),
                                   **({"optimize": args.optimize} if args.optimize else {}),
                                   **({"ram_limit": args.ram_limit} if args.ram_limit else {}))
    except ModelFileError as exc:  # named as compile names it when given the file's path
        name_the_file(exc, args.model)
        raise
    out = Path(args.output)
    files = dict(result.files)
    paths = [out / name for name in files]
    side = _side_files(args, result, paths, inputs)
    # deferred: the command line's start-up (the compiler loads for the commands that use it)
    from tinycc_ml.api import check_output_names

    written = set(write_tree(out, files, side_files=side, check=lambda folder: check_output_names(folder, files)))
    report = result.report
    log.info("read %s", ", ".join(map(str, inputs)))
    say(args, f"compiled {report['model']}")
    say(args, f"target {result.target}, precision {result.precision}, prefix {result.prefix}")
    say(args, f"constants {report.get('const_bytes', 0)} bytes, static RAM {report.get('ram_bytes', 0)} bytes")
    if "fit" in report:
        fit = report["fit"]
        say(args, f"fits the {fit['chip']}: {fit['flash_bytes']} bytes of flash, {fit['ram_bytes']} bytes of static "
                  f"RAM + ~{fit['stack_estimate']} bytes of stack ({fit['how']})")
    if report.get("patches"):
        patches = report["patches"]
        say(args, f"patches: the layers up to %{patches['split']} in {patches['grid'][0]}x{patches['grid'][1]} "
                  f"patches, arena {patches['arena_bytes']} bytes (whole layers {patches['unpatched_arena_bytes']}), "
                  f"+{patches['extra_macs']} MACs (+{patches['extra_macs_percent']}%)")
    for path in paths:
        say(args, f"{'wrote' if path in written else 'unchanged'} {path}")
    return 0


def _same_file(a: Path, b: Path) -> bool:
    """One file under two names: the same resolved path, or the same inode (a hard link, a case-folding file
    system)."""
    if a.resolve() == b.resolve():
        return True
    try:
        return a.exists() and b.exists() and os.path.samefile(a, b)
    except OSError:
        return False


def _side_files(args, result, outputs: list[Path], inputs: list[Path]) -> dict:
    """The depfile and manifest to write with the outputs (path -> (bytes, keep_unchanged)). Neither may be
    an input, an output, the output folder or the other: such a path is refused before anything is written."""
    side: dict[Path, tuple[bytes, bool]] = {}
    chosen = [(option, Path(value)) for option, value in (("--manifest", args.manifest), ("--depfile", args.depfile))
              if value]
    if len(chosen) == 2 and _same_file(chosen[0][1], chosen[1][1]):
        raise CompileError(f"--depfile and --manifest are one file ({args.depfile}); give them different paths")
    for option, path in chosen:
        for what, others in (("the input", inputs), ("the output", outputs)):
            for other in others:
                if _same_file(path, Path(other)) or (what == "the output" and path.name.lower() == other.name.lower()
                                                     and path.parent.resolve() == other.parent.resolve()):
                    raise CompileError(f"{option} {path}: is {what} {other}; writing it would overwrite it")
        if _same_file(path, Path(args.output)) or path.is_dir():
            raise CompileError(f"{option} {path}: is a folder; give a file path")
    if args.manifest:
        side[Path(args.manifest)] = (_manifest_bytes(result, outputs, inputs), False)
    if args.depfile:
        # the manifest first: Ninja reads the first target as the rule's (first) output
        targets = ([Path(args.manifest)] if args.manifest else []) + outputs
        side[Path(args.depfile)] = (depfile_text(targets, inputs).encode(), True)
    return side


def _manifest_bytes(result, outputs: list[Path], inputs: list[Path]) -> bytes:
    import json


    manifest = {"tinycc_ml": __version__, "target": result.target, "precision": result.precision,
                "prefix": result.prefix, "outputs": [str(p) for p in outputs], "inputs": [str(p) for p in inputs],
                "headers": [str(p) for p in outputs if p.suffix == ".h"],
                "sources": [str(p) for p in outputs if p.suffix == ".c"]}
    # always rewritten (keep_unchanged False): its mtime tells a build tool when the compile step last ran
    return (json.dumps(manifest, indent=2) + "\n").encode()


# ---------------------------------------------------------------- report


def cmd_report(args) -> int:
    import json

    # deferred: the command line's start-up (the compiler loads for the commands that use it)
    from tinycc_ml.api import before_network, load_model
    from tinycc_ml.datafiles import load_rows
    from tinycc_ml.features.spec import load_front_end
    from tinycc_ml.target_report import target_report

    if args.rows < 0:
        raise DataError(f"--rows {args.rows}: expected a count of test rows (0 for all)")
    model = load_model(args.model)
    if args.front_end:
        model = before_network(model, load_front_end(args.front_end))
    X, y, X_calibration = load_rows(args.data, "test")
    from_test_rows = X_calibration is X  # the file has no X_train
    calibration = load_rows(args.calibration, "calibration")[0] if args.calibration else X_calibration
    precision = default_precision(args.precision, True, getattr(model, "model", model).family)
    if args.rows:
        X, y = X[: args.rows], (None if y is None else y[: args.rows])
    calibrated_on = None
    if precision != "float" and model.reference == "float":  # an int8 network is quantised already: no calibration
        calibrated_on = "--calibration" if args.calibration else ("test rows" if from_test_rows else "X_train")
        if calibrated_on == "test rows":  # said out loud: scales chosen on the rows measured flatter the result
            log.warning("warning: %s holds no X_train and no --calibration was given: calibrating on the test rows",
                        args.data)
    report = target_report(model, args.target, X, y, precision=precision,
                           calibration=None if precision == "float" else calibration, max_flash=args.max_flash,
                           max_ram=args.max_ram, board=args.board, flash_wait_states=args.flash_wait_states,
                           **({"optimize": args.optimize} if args.optimize else {}),
                           **({"ram_limit": args.ram_limit} if args.ram_limit else {}))
    report.pop("compile_report", None)
    report["calibration"] = calibrated_on
    if args.json:
        print(json.dumps(report, sort_keys=True, default=lambda v: v.tolist() if hasattr(v, "tolist") else str(v)))
        return 0
    task = report.get("task") or {}
    if task.get("kind", "classification") != "classification":
        print(f"{'task':<22} " + ", ".join(f"{k} {v}" for k, v in task.items()))
    int8_reference = report.get("reference") == "int8"  # the float fields are None; the reference's said
    for key in ("target", "precision", "rows", *(("reference", "reference_accuracy") if int8_reference else ()),
                "float_accuracy", "target_accuracy", "agreement_with_float",
                *(("agreement_with_reference",) if int8_reference else ()),
                "regression", "multilabel",
                "flash_bytes", "ram_bytes", "model_flash_bytes", "model_ram_bytes", "stack_bytes", "cycles_mean",
                "cycles_max", "instructions_mean", "instructions_max", "macs", "per_mac", "method", "calibration"):
        for name, value in _flat(key, report.get(key)):
            print(f"{name:<22} {value:.4g}" if isinstance(value, float) else f"{name:<22} {value}")
    if report.get("weights"):
        print(f"{'weights':<22} {report['weights']['summary']}")
    if report.get("patches"):
        patches = report["patches"]
        print(f"{'patches':<22} the layers up to %{patches['split']} in {patches['grid'][0]}x{patches['grid'][1]} "
              f"patches: arena {patches['arena_bytes']} B (whole layers {patches['unpatched_arena_bytes']} B), "
              f"+{patches['extra_macs']} MACs (+{patches['extra_macs_percent']}%)")
    print_cycle_model(report.get("cycle_model"))
    print_kernels(report.get("kernels") or {})
    return 0


def print_cycle_model(model: dict | None) -> None:
    """The Cortex-M4/M33 cycle model's line: cycles per inference beside the instructions."""
    if not model:
        return
    if "mean" not in model:
        print(f"{'cycles (model)':<22} not measured: {model['unavailable']}")
        return
    per = f", {model['mean'] / model['instructions_mean']:.2f} per instruction" if model["instructions_mean"] else ""
    print(f"{'cycles (model)':<22} {model['mean']:,.0f} mean, {model['max']:,} max over {model['rows']} row(s) "
          f"(TRM timings, {model['wait_states']} flash wait states{per})")


def _flat(key: str, value):
    """(name, value) lines of a report field; a task's dict of figures as key.name (P@k as name_k)."""
    if value is None:
        return []
    if isinstance(value, dict):
        return [line for name, inner in value.items() for line in _flat(f"{key}.{name}" if key in (
            "regression", "multilabel") else f"{key}_{name}", inner)]
    return [(key, value)]


def print_kernels(kernels: dict) -> None:
    """The report's per-node kernel costs: measured (profile) and, where a cost model chose, predicted."""
    if "per_node" not in kernels:
        if kernels.get("unavailable"):
            print(f"{'kernels':<22} not measured: {kernels['unavailable']}")
        return
    unit = kernels["unit"]
    print(f"kernels ({unit} per inference, profile of {kernels['rows']} row(s); total {kernels['total']:,.0f}):")
    for row in kernels["per_node"]:
        measured = row[f"measured_{unit}"]
        cost = "-" if measured is None else f"{measured:,.0f}"
        line = f"  {row.get('step', row['node']):<40} {cost:>10}  {' '.join(row['functions'])}"
        if row.get("kernel"):
            pred = row.get(f"predicted_{unit}")
            line += f"  [{row['matrix']}: {row['kernel']}, predicted {'-' if pred is None else f'{pred:,}'}]"
        if row.get("note"):
            line += f"  ({row['note']})"
        print(line)
    print(f"  {'(outside kernels)':<40} {kernels['outside_kernels']:>10,.0f}")


# ---------------------------------------------------------------- fit


def _byte_count(text: str) -> int:
    """Bytes: a whole number, or with a K suffix (K, KB, KiB: 1024 bytes)."""
    t = text.strip().upper().removesuffix("IB").removesuffix("B")
    factor = 1024 if t.endswith("K") else 1
    try:
        value = float(t.removesuffix("K")) * factor
    except ValueError:
        value = float("nan")
    if not (math.isfinite(value) and value >= 0 and value == int(value)):  # 1e400 is inf; 0.4 is no count
        raise argparse.ArgumentTypeError(f"{text!r} is not a byte count (a whole number of bytes, e.g. 16384 "
                                         "or 16K)")
    return int(value)


def _wait_states(text: str) -> int:
    if not text.isdigit() or int(text) > 15:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of flash wait states (0 to 15)")
    return int(text)


def _jobs(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1 and n != -1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive whole number of worker processes "
                                         "(-1: one per core)")
    return n


def cmd_fit(args) -> int:
    # deferred: the command line's start-up (the compiler loads for the commands that use it)
    import tinycc_ml
    from tinycc_ml.datafiles import load_training
    from tinycc_ml.search.candidates import estimator_from_model, estimator_from_text
    from tinycc_ml.search.fit import check_arguments

    start_from = None
    if args.start is not None and Path(args.start).is_file():  # a model file: its family and what it keeps
        start_from = estimator_from_model(tinycc_ml.load_model(args.start), args.start)
    elif args.start is not None:
        start_from = estimator_from_text(args.start)
    # every argument checked (the scheduler probed) before the data is read: a mistake costs no loading
    check_arguments(target=args.target, max_flash=args.max_flash, max_ram=args.max_ram, max_ms=args.max_ms,
                    clock_hz=args.clock_hz, precision=args.precision, families=args.families,
                    time_budget=args.time_budget, random_state=args.random_state, name=args.name,
                    sizes_per_family=args.sizes, n_jobs=args.jobs, scheduler=args.scheduler, start_from=start_from)
    X, y, X_test, y_test = load_training(args.data)
    result = tinycc_ml.fit(X, y, target=args.target, max_flash=args.max_flash, max_ram=args.max_ram,
                           max_ms=args.max_ms, clock_hz=args.clock_hz, precision=args.precision,
                           families=args.families, time_budget=args.time_budget, random_state=args.random_state,
                           X_test=X_test, y_test=y_test, out_dir=args.output, name=args.name,
                           sizes_per_family=args.sizes, n_jobs=args.jobs, scheduler=args.scheduler,
                           start_from=start_from)
    say(args, result.report())
    if result.plot_note:
        say(args, result.plot_note)
    for path in result.paths:
        say(args, f"wrote {path}")
    return 0


# ---------------------------------------------------------------- cmake-dir


def cmd_cmake_dir(args) -> int:
    from importlib import resources

    print(Path(resources.files("tinycc_ml.buildsys").joinpath("cmake", "TinyccML.cmake")).parent)
    return 0


# ---------------------------------------------------------------- targets


def cmd_targets(args) -> int:
    # deferred: the command line's start-up (the compiler loads for the commands that use it)
    from tinycc_ml.codegen.backend import available_backends

    backends = available_backends()
    width = max((len(n) for n in backends), default=0)
    for name, cls in backends.items():
        precisions = ", ".join(getattr(cls, "precisions", ()) or ())
        can = "" if hasattr(cls, "broken") else f"; can: {', '.join(sorted(cls.capabilities())) or '-'}"
        boards = ", ".join(cls.board_names()) if hasattr(cls, "board_names") and cls.board_names() else ""
        print(f"{name:<{width}}  {cls.description}  [precision: {precisions}{can}"
              f"{'; boards: ' + boards if boards else ''}]")
    return 0


# ---------------------------------------------------------------- demo


def _train_demo_model(X_train, y_train):
    """A ProtoNN: the trainer with small settings when it is there, else the quick initialiser."""
    try:
        # deferred: the command line's start-up (the compiler loads for the commands that use it)
        from tinycc_ml.models.protonn_trainer import ProtoNNClassifier
    except ImportError:
        ProtoNNClassifier = None
    if ProtoNNClassifier is not None:
        clf = ProtoNNClassifier(n_iter=5, epochs=3, random_state=0, verbose=0).fit(X_train, y_train)
        return clf.to_model(), "ProtoNNClassifier (5 iterations)"
    # deferred: the command line's start-up (the compiler loads for the commands that use it)
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
    say = functools.partial(print, flush=True)  # each line as it happens, also through a pipe
    import numpy as np

    # deferred: the command line's start-up (the compiler loads for the commands that use it)
    import tinycc_ml
    from tinycc_ml.api import write_files

    start = time.perf_counter()
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    out = Path(args.output)
    X, y = load_digits(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.25, random_state=0, stratify=y)
    say(f"dataset: scikit-learn digits, {X.shape[0]} images of 8x8 = {X.shape[1]} features, "
          f"{len(np.unique(y))} classes; {len(X_train)} train / {len(X_test)} test rows")

    model, how = _train_demo_model(X_train, y_train)
    say(f"model: ProtoNN from {how}: D={model.input_dim}, projection d^={model.W.shape[0]}, "
          f"m={model.n_prototypes} prototypes, L={model.n_outputs} classes")
    param_bytes = 4 * (model.W.size + model.B.size + model.Z.size)
    out.mkdir(parents=True, exist_ok=True)
    model_path = model.save(out / "protonn_digits.npz")
    say(f"saved {model_path} ({model_path.stat().st_size} bytes on disk; "
          f"W, B, Z = {param_bytes} bytes in float32)")

    result = tinycc_ml.compile(model_path, target="host", out_dir=out, name="digits")
    say(f"compiled to C for target host: constants {result.report['const_bytes']} bytes, "
          f"static RAM {result.report['ram_bytes']} bytes")
    for path in result.paths:
        say(f"  wrote {path}")
    predictor = result.load()

    ref = model.predict(X_test)
    c_pred = predictor.predict(X_test)
    rows = [("float (numpy)", float(np.mean(ref == y_test)), None,
             _time_per_prediction(model.predict, X_test)),
            ("C float32", float(np.mean(c_pred == y_test)), float(np.mean(c_pred == ref)),
             _time_per_prediction(predictor.predict, X_test))]

    try:
        # digits pixels are 0..16; some are 0 in every training image, so the range is declared
        fixed = tinycc_ml.compile(model_path, target="host", name="digits_int16", precision="int16",
                                  calibration=X_train, input_range=(0, 16))
        write_files(out, fixed.files)
        for name in fixed.files:
            say(f"  wrote {out / name}")
        q = fixed.load()
        q_pred = q.predict(X_test)
        rows.append(("C int16", float(np.mean(q_pred == y_test)), float(np.mean(q_pred == ref)),
                     _time_per_prediction(q.predict, X_test)))
    except Exception as exc:  # the demo works with or without fixed point
        if isinstance(exc, ModuleNotFoundError) and exc.name == FIXED_PIPELINE_MODULE:
            say("int16: fixed point is not available in this version, skipped")
        else:
            say(f"int16: skipped ({type(exc).__name__}: {' '.join(str(exc).split())})")

    say(f"\n{'build':<14} {'test accuracy':>13} {'agrees with float':>18} {'time/prediction':>16}")
    for label, acc, agree, seconds in rows:
        agree_text = "-" if agree is None else f"{100 * agree:.1f}%"
        say(f"{label:<14} {100 * acc:>12.1f}% {agree_text:>18} {seconds * 1e6:>13.2f} us")
    say(f"\ndone in {time.perf_counter() - start:.1f} s; C sources in {out}/")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
