"""The public API: load_model and compile."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from tinycc_ml.buildsys.examples import MAX_EXAMPLES, example_rows
from tinycc_ml.codegen.backend import BuildOutput, get_backend
from tinycc_ml.codegen.emitter import check_prefix
from tinycc_ml.codegen.labels import add_labels
from tinycc_ml.codegen.proba import add_proba
from tinycc_ml.codegen.run_status import add_status
from tinycc_ml.codegen.stream_feed import add_feed
from tinycc_ml.codegen.tensor_io import add_tensor_io
from tinycc_ml.errors import CompileError, DataError, FitError, ModelFileError, TinyccError
from tinycc_ml.files import write_tree
from tinycc_ml.importers.edgeml import FOLDER_READERS
from tinycc_ml.ir.fixed import quantise, run_fixed_once
from tinycc_ml.ir.ops import OPS
from tinycc_ml.ir.ops.calibration import ovr_decision_rows
from tinycc_ml.model_formats import format_for
from tinycc_ml.models.base import CLASSES_META_KEY, MODEL_FAMILIES, Model, check_task
from tinycc_ml.models.front_end import FrontEndModel, front_end_steps
from tinycc_ml.models.network import NetworkModel
from tinycc_ml.models.network_fixed import (
    FLOAT_NETWORK_PASSES,
    fixed_agreement,
    fixed_network_description,
    fixed_values_report,
    lower_network_to_fixed,
)
from tinycc_ml.models.proba import (
    INPUT_RULES,
    PROBA_FLOAT_SLACK,
    linear_head_error,
    proba_error_bound,
    proba_from_inputs,
    proba_from_scores,
)
from tinycc_ml.models.saved import ARRAY_KINDS, FLOAT32_MAX, read_model_file
from tinycc_ml.passes import PassContext, run_passes, run_pipeline
from tinycc_ml.passes.fixed_pipeline import lower_to_fixed
from tinycc_ml.passes.manager import PassOptions
from tinycc_ml.passes.plan_memory import element_bytes, state_bytes
from tinycc_ml.passes.range_analysis import static_intervals
from tinycc_ml.plugins import import_object

PRECISIONS = ("float", "int16", "int8")
# compile options read when the model file is read (importers/onnx.py): a recurrent layer unrolled or stepped
IMPORT_OPTIONS = ("recurrent", "sequence_length")
PICKLE_SUFFIXES = (".pkl", ".pickle", ".joblib", ".sav")
POOR_AGREEMENT = 0.9  # an integer build agreeing less with its float model on the calibration rows is warned of
REGRESSION_AGREEMENT = 0.99  # share of calibration rows whose value must be within tolerance, or a warning
log = logging.getLogger(__name__)
MAX_FIXED_SCALE = 48  # the scale search stays within about +-34; beyond this int32 shifts overflow


def load_model(path, recurrent: str | None = None, sequence_length: int | None = None) -> Model:
    """Load a saved model: the project's ``.npz`` model file, an ONNX dense network (``.onnx``, needs the
    onnx package), a TFLite int8 network (``.tflite``: a NetworkModel), an XGBoost
    ``.json`` or ``.ubj`` or LightGBM ``.txt`` model file, or an EdgeML model directory
    (ProtoNN: W.npy, B.npy, Z.npy, gamma.npy; Bonsai: W.npy, V.npy, T.npy, Z.npy, ...); the readers of
    other tools' formats are in :mod:`tinycc_ml.importers`.

    An ONNX network's recurrent layers (GRU, LSTM, RNN): ``recurrent="unroll"`` (the default: the whole sequence per
    call) or ``"step"`` (one time step per call, the states kept between calls); ``sequence_length``: the
    sequence's length where the file leaves it dynamic."""
    path = Path(path)
    import_options = {key: value for key, value in (("recurrent", recurrent), ("sequence_length", sequence_length))
                      if value is not None}
    if import_options and path.suffix.lower() != ".onnx":
        raise CompileError(f"{path}: {' and '.join(import_options)} apply to ONNX networks with recurrent layers")
    if path.is_dir():
        names = {p.name for p in path.iterdir()}
        # EdgeML's folders, then any a plug-in family reads (Model.directory_match / from_directory)
        families = [cls for cls in MODEL_FAMILIES.load_all().values() if isinstance(cls, type)]
        readers = [*FOLDER_READERS, *((cls.directory_match, cls.from_directory) for cls in families)]
        match, read = max(readers, key=lambda reader: reader[0](names))
        if match(names) > 0:
            return read(path)
        raise ModelFileError(f"{path}: no EdgeML model in this directory (expected W.npy, B.npy, Z.npy, gamma.npy)")
    if path.suffix.lower() in PICKLE_SUFFIXES:  # refused by name, never opened: unpickling runs code
        raise ModelFileError(f"{path}: pickled objects are not read (loading a pickle runs arbitrary code); save the "
                             "fitted estimator with tinycc_ml.save_model(estimator, 'model.npz') and use that file")
    if not path.exists():
        raise ModelFileError(f"{path}: no such file or directory")
    file_format = format_for(path.suffix)
    if file_format is not None and file_format.reader is not None:  # another tool's file (model_formats.py)
        return import_object(file_format.reader)(path, **import_options)
    family, arrays, meta = read_model_file(path)
    if family not in MODEL_FAMILIES:
        raise ModelFileError(f"{path}: unknown model family {family!r}; known: {', '.join(sorted(MODEL_FAMILIES))}")
    meta = dict(meta)
    classes = meta.pop(CLASSES_META_KEY, None)  # files written before labels were kept: 0..L-1
    task = meta.pop("task", None)
    model = MODEL_FAMILIES.load(family).from_arrays(arrays, meta, str(path))
    model.task = check_task(task, str(path))
    return model.set_classes(classes, str(path))


@dataclass
class CompileResult:
    target: str
    prefix: str
    precision: str
    files: dict[str, str]  # file name -> contents
    out_dir: Path | None
    output: BuildOutput
    graph: object
    report: dict = field(default_factory=dict)
    classes: np.ndarray | None = None  # class label of each class index; None: 0..L-1

    @property
    def paths(self) -> list[Path]:
        """The files written (empty when compiled in memory)."""
        return [self.out_dir / name for name in self.files] if self.out_dir else []

    def load(self):
        """A runnable predictor (host target) with the float model's API for its task: ``.predict(X)``
        gives class labels, regression values in the model's units (float, also for integer builds),
        or the multilabel 0/1 matrix; ``.decision_function(X)`` the scores in the model's units;
        the raw C forms as ``.scores(X)``, ``.values_raw(X)``, ``.predict_index(X)`` (see
        :class:`tinycc_ml.host.build.HostPredictor`)."""
        backend = get_backend(self.target)
        if self.out_dir is not None:
            predictor = backend.load(self.out_dir, self.output)
        else:
            with tempfile.TemporaryDirectory(prefix="tinycc-ml-") as tmp:
                write_files(Path(tmp), self.files)
                predictor = backend.load(Path(tmp), self.output)
        if self.classes is not None and hasattr(predictor, "classes"):
            predictor.classes = self.classes
        if self.output is not None and self.output.ovr_of_pairs and hasattr(predictor, "decision_transform"):
            k = self.output.ovr_of_pairs  # an SVC's pair decisions: scikit-learn's decision_function is their ovr form
            predictor.decision_transform = lambda scores: ovr_decision_rows(scores, k)
        return predictor


def write_files(out_dir: Path, files: dict[str, str]) -> list[Path]:
    """Write all files or none (staged beside ``out_dir``, then moved in); files whose content is
    unchanged are left alone. Returns the paths written. Files of another model already in the folder
    whose names differ only in case, share an include guard, or would be replaced are refused
    (``check_output_names``)."""
    return write_tree(out_dir, files, check=lambda folder: check_output_names(folder, files))


# every generated C or header names its model's prefix in its first lines: "<prefix>: generated by
# tinycc-ml" (model header and source) or "<prefix>_input.h: ..." (the input helper)
_OWNER = re.compile(r"^(?:/\*\s*\n?\s*\*?\s*)([A-Za-z_][A-Za-z0-9_]*?)(?:_input\.h)?: "
                    r"(?:generated by tinycc-ml|float input)")
_GUARD = re.compile(r"^#ifndef ([A-Za-z_]\w*)\n#define \1\b", re.M)


def _owner(text: str) -> str | None:
    match = _OWNER.match(text[:400])
    return match.group(1) if match else None


def check_output_names(out_dir, files: dict) -> None:
    """Refuse writing ``files`` into ``out_dir`` when they would clash with what is there: a name that
    differs only in case from an existing entry (the same file on macOS/Windows, the same include guard and
    macros everywhere), a header whose include guard another header there already uses, or a file that
    another model (another prefix) generated. Runs under the output folder's lock (see files.write_tree)."""
    out_dir = Path(out_dir)
    new_guards: dict[str, str] = {}
    for name, text in files.items():
        if name.endswith(".h") and isinstance(text, str):
            for guard in _GUARD.findall(text):
                new_guards[guard] = name
    owners = {_owner(t) for t in files.values() if isinstance(t, str)} - {None}
    listed: dict[Path, list[str]] = {}
    for name in files:
        path = out_dir / name
        folder = path.parent
        if folder not in listed:
            try:
                listed[folder] = sorted(os.listdir(folder)) if folder.is_dir() else []
            except OSError:
                listed[folder] = []
        for entry in listed[folder]:
            if entry != path.name and entry.lower() == path.name.lower():
                raise CompileError(f"{path}: {folder / entry} is already there, its name differing only in case "
                                   "(one file on case-insensitive file systems; the same include guard and macros); "
                                   "choose another name or folder")
        if path.is_file() and path.suffix in (".h", ".c") and owners:
            try:
                head = path.read_text(errors="replace")[:400]
            except OSError:
                head = ""
            owner = _owner(head)
            if owner is not None and owner not in owners:
                raise CompileError(f"{path}: holds model {owner!r}'s generated code; writing model "
                                   f"{'/'.join(sorted(owners))!r} here would replace it; choose another name")
    for folder, entries in listed.items():
        for entry in entries:
            rel = str((folder / entry).relative_to(out_dir)) if folder != out_dir else entry
            if not entry.endswith(".h") or rel in files:
                continue
            try:
                text = (folder / entry).read_text(errors="replace")[:20000]
            except OSError:
                continue
            for guard in _GUARD.findall(text):
                if guard in new_guards:
                    raise CompileError(f"{out_dir / new_guards[guard]}: its include guard {guard} is already used by "
                                       f"{folder / entry}; one of the two headers would be skipped where both are "
                                       "included; choose another name")


# file names a build tool treats specially (make remakes "Makefile" from Makefile.c by its implicit rules)
RESERVED_STEMS = frozenset({"makefile", "gnumakefile", "cmakelists"})


def check_layout_names(prefix: str, files: dict) -> None:
    """One compile's files: no two names equal but for case, no two headers with one include guard, and the
    model's name not the name of another file the layout writes (``board``, ``examples``, ``main``...)."""
    seen: dict[str, str] = {}
    guards: dict[str, str] = {}
    for name, text in files.items():
        key = name.lower()
        if key in seen:
            raise CompileError(f"name {prefix!r}: the outputs {seen[key]} and {name} differ only in case (one file on "
                               "case-insensitive file systems, one include guard); choose another name")
        seen[key] = name
        if name.endswith(".h") and isinstance(text, str):
            for guard in _GUARD.findall(text):
                if guard in guards:
                    raise CompileError(f"name {prefix!r}: {guards[guard]} and {name} would share the include guard "
                                       f"{guard}; choose another name")
                guards[guard] = name
    stems = {Path(n).stem.lower(): n for n in files if not Path(n).name.startswith(f"{prefix}.")
             and not Path(n).name.startswith(f"{prefix}_")}
    if prefix.lower() in stems:
        raise CompileError(f"name {prefix!r} is the name of the generated {stems[prefix.lower()]}; choose another name")


def save_model(model, path) -> Path:
    """Save anything :func:`compile` accepts (a fitted scikit-learn estimator or pipeline, a fitted
    tinycc-ml estimator, a Model) as a ``.npz`` model file, which the command line
    (``tinycc-ml compile m.npz``, ``--arduino``, ``--project``), CMake and :func:`load_model` take.
    The file holds numeric arrays and JSON metadata only (no pickle). Returns the path written; on
    any error nothing is written."""
    model = as_model(model)
    path = Path(path)
    if path.suffix.lower() != ".npz":
        raise ModelFileError(f"{path}: model files end in .npz")
    return model.save(path)


def model_input_files(path) -> list[Path]:
    """Every file ``load_model(path)`` may read: the model file, or all files of an EdgeML directory."""
    path = Path(path)
    if path.is_dir():
        return sorted(p for p in path.iterdir() if p.is_file())
    return [path]


def as_model(model) -> Model:
    """A Model from a Model, a path to a saved one, a fitted tinycc-ml estimator or a fitted
    scikit-learn object (see :mod:`tinycc_ml.importers.sklearn`)."""
    if isinstance(model, Model):
        return model
    if isinstance(model, (str, os.PathLike)):
        return load_model(model)
    from sklearn.exceptions import NotFittedError  # only for objects: keeps the CLI's start quick

    # deferred: scikit-learn's importer, only for objects (the command line's start-up)
    from tinycc_ml.importers.sklearn import SUPPORTED, from_sklearn, is_sklearn_object

    try:
        if is_sklearn_object(model):
            return from_sklearn(model)
        if hasattr(model, "to_model"):
            return model.to_model()
    except NotFittedError:
        raise CompileError(f"{type(model).__name__} is not fitted; call fit(X, y) before compiling") from None
    raise CompileError(f"cannot compile a {type(model).__name__}: expected a tinycc-ml model, a path to a saved "
                       f"model, or a fitted estimator; supported estimators: {SUPPORTED}")


def check_calibration(X, input_dim: int, source: str = "calibration data", min_rows: int = 16) -> np.ndarray:
    X = np.asarray(X)
    if X.dtype.kind not in ARRAY_KINDS:
        raise DataError(f"{source}: dtype {X.dtype} is not bool, integer or real float")
    X = X.astype(np.float64)
    if X.ndim != 2 or X.shape[1] != input_dim:
        raise DataError(f"{source}: shape {X.shape}, expected (rows, {input_dim}) to match the model's input")
    if not np.all(np.isfinite(X)):
        row = int(np.argwhere(~np.isfinite(X))[0][0])
        raise DataError(f"{source}: row {row} holds NaN or Inf")
    if len(X) < min_rows:
        raise DataError(f"{source}: {len(X)} rows, at least {min_rows} are needed to choose scales")
    return X


def widen_flat_features(X: np.ndarray, options: dict) -> tuple[np.ndarray, dict | None]:
    """Calibration rows in which some features take one value v on every row: with no spread, every other
    value of such a feature would saturate in the integer build (and "agreement 100%" would hide it). Unless
    the user declared ``input_range``, such features are calibrated over v - m .. v + m, m = max(|v|, 1), by
    two rows appended (the first row with those features at either end); a warning names them and the range.
    Returns the rows to calibrate on and what was done (None: every feature has a spread)."""
    lo, hi = X.min(axis=0), X.max(axis=0)
    flat = np.flatnonzero(lo == hi)
    if not len(flat) or options.get("input_range") is not None:
        return X, None
    margin = np.maximum(np.abs(lo[flat]), 1.0)
    new_lo, new_hi = lo[flat] - margin, hi[flat] + margin
    extra = np.repeat(X[:1], 2, axis=0)
    extra[0, flat], extra[1, flat] = new_lo, new_hi
    shown = ", ".join(f"{k} (always {v:g}; calibrated over [{a:g}, {b:g}])" for k, v, a, b in
                      zip(flat[:8].tolist(), lo[flat][:8], new_lo[:8], new_hi[:8]))
    more = f" and {len(flat) - 8} more" if len(flat) > 8 else ""
    log.warning("calibration data: feature%s %s%s of %d %s no spread, so any other value would saturate: each is "
                "calibrated over its value +- max(|value|, 1) instead. Give calibration rows that span the inputs you "
                "expect (or, from Python, input_range=(lo, hi))", "s" if len(flat) > 1 else "", shown, more,
                X.shape[1], "have" if len(flat) > 1 else "has")
    info = {"features": flat.tolist(), "values": lo[flat].tolist(),
            "ranges": [[float(a), float(b)] for a, b in zip(new_lo, new_hi)]}
    return np.concatenate([X, extra]), info


def check_constants(graph, source: str) -> None:
    """Every float constant and factor of a float graph must be finite in float32: a value that
    overflows (a huge weight, 1/std of a tiny std, a folded product) would be written as inf."""
    for name in graph.order():
        node = graph.node(name)
        for key, value in node.attrs.items():
            if isinstance(value, (bool, str)) or np.asarray(value).dtype.kind != "f":
                continue
            if np.asarray(value).dtype == np.float32 and np.all(np.isfinite(value)):
                continue  # a finite float32 is within the range (a forest's tables: no float64 copy)
            values = np.asarray(value, dtype=np.float64)
            bad = ~(np.abs(values) <= FLOAT32_MAX)
            if np.any(bad):
                worst = values.reshape(-1)[int(np.argmax(bad.reshape(-1)))]
                raise ModelFileError(f"{source}: {name} ({node.op} {key}) holds {worst:g}, beyond the float32 range "
                                     "of the compiled code (weights too large, or a std too small)")


def _beyond_fixed_point(float_graph, model: Model, calibration, what: str) -> TinyccError:
    """The error for a model whose values fixed point cannot scale: the model's (CompileError) when its largest
    constant (a layer's weights, named, with their magnitude) exceeds the largest calibration value, else
    the calibration rows' (DataError): the larger of the two drives the values out of reach."""
    input_peak = float(np.max(np.abs(calibration)))
    largest = [(float(np.max(np.abs(np.asarray(values, dtype=np.float64)))), name)
               for name in float_graph.order() for node in [float_graph.node(name)]
               for values in [node.attrs.get("value", node.attrs.get("values"))]  # sparse: its non-zeros
               if node.op in ("const", "sparse_const") and values is not None and np.asarray(values).size]
    magnitude, name = max(largest, default=(0.0, None))
    if name is not None and magnitude > input_peak:  # the larger of the two is what drives the values out of reach
        return CompileError(f"{model.describe()}: its constant {name} (weights up to {magnitude:.3g}) drives "
                            f"{what}, on calibration inputs up to {input_peak:g}; compile it at precision float, "
                            "or retrain it with smaller weights (regularisation)")
    return DataError(f"calibration data: values up to {input_peak:g} drive the model's {what}")


# the input range a float build is checked over when neither calibration rows nor input_range are given:
# it catches weights so large that any input overflows; the rows give the check the inputs' own range
NOMINAL_INPUT_RANGE = (-1.0, 1.0)


def float_input_range(model: Model, calibration, options: dict) -> tuple[np.ndarray, np.ndarray, str]:
    """(lo, hi, what) of the input a float build is checked over: the declared input_range, else the
    calibration rows' per-feature range, else NOMINAL_INPUT_RANGE."""
    if options.get("input_range") is not None:
        lo, hi = (np.asarray(v, dtype=np.float64) for v in options["input_range"])
        return lo, hi, f"the declared input range [{np.min(lo):g}, {np.max(hi):g}]"
    if calibration is not None:
        X = check_calibration(calibration, model.input_dim, min_rows=1)
        return X.min(axis=0), X.max(axis=0), f"the calibration rows' range (up to {np.max(np.abs(X)):g})"
    lo, hi = NOMINAL_INPUT_RANGE
    return np.float64(lo), np.float64(hi), (f"inputs in [{lo:g}, {hi:g}] (give calibration rows or input_range to "
                                           "check your inputs' range)")


def float_peaks(graph, lo, hi):
    """(value, the largest magnitude interval analysis proves for it over inputs [lo, hi]) for every float value of
    ``graph`` the analysis reaches, in graph order (NaN where it proves nothing finite)."""
    intervals = static_intervals(graph, lo, hi, float_check=True)
    for name in graph.order():
        node = graph.node(name)
        inner = OPS[node.op].inner_interval
        if inner is not None and all(i in intervals for i in node.inputs):  # a fused op's unstored values
            with np.errstate(invalid="ignore", over="ignore"):
                values = inner(node.attrs, [intervals[i] for i in node.inputs])
                yield name, np.max(np.abs(np.concatenate([np.ravel(b) for b in values])), initial=0.0)
        if name in intervals and graph.type(name).dtype.kind == "f32" and node.op != "const":
            with np.errstate(invalid="ignore"):
                yield name, np.max(np.abs(np.concatenate([np.ravel(b) for b in intervals[name]])), initial=0.0)


def check_float_range(graph, lo, hi, what: str, source: str) -> None:
    """Interval analysis of a float build over the input range [lo, hi]: every value it computes must stay
    within float32 (the C's type), or the build would compute inf, and from it NaN, where the model's own
    float64 arithmetic does not. Refused naming the first value that can leave it, and how far."""
    for name, peak in float_peaks(graph, lo, hi):
        if not peak <= FLOAT32_MAX:  # NaN too
            raise CompileError(f"{source}: {name} ({graph.op(name)}) can reach {peak:g} on {what}, beyond float32's "
                               f"{FLOAT32_MAX:g}: the float build would compute inf or NaN where the model does not; "
                               "scale the weights or inputs down, or compile at precision int16/int8")


def _within_float32(graph, lo, hi) -> bool:
    return all(peak <= FLOAT32_MAX for _, peak in float_peaks(graph, lo, hi))


def float_input_bound(graph, lo, hi) -> dict | None:
    """The inputs a float build is proven to compute within float32 for: {"bound": R} (|x[k]| <= R for every
    k, R the largest float32 power-of-two multiple of the checked range's magnitude that interval analysis
    proves), {"lo": ..., "hi": ...} (the checked range itself, per feature, where no such R covers it), or None
    where no finite input can overflow (then only NaN/inf are refused, by a bound of float32's largest).
    Beyond it the build's float32 values could overflow where the model's float64 ones do not (GaussianNB's
    squared distances at 1e20, a polynomial kernel at 1e13): the C answers no class for such rows
    (codegen/input_bound.py). Trees only compare their input: no bound (their NaN rules decide)."""
    (x,) = graph.inputs()
    if all(graph.op(u) == "tree_ensemble" for u in graph.users(x)):
        return None
    if _within_float32(graph, -FLOAT32_MAX, FLOAT32_MAX):
        return {"bound": FLOAT32_MAX}
    start = float(max(1.0, np.max(np.abs(lo)), np.max(np.abs(hi))))
    if not _within_float32(graph, -start, start):
        return {"lo": np.broadcast_to(np.asarray(lo, dtype=np.float64), graph.type(x).shape).copy(),
                "hi": np.broadcast_to(np.asarray(hi, dtype=np.float64), graph.type(x).shape).copy()}
    good, bad = 0, int(np.floor(np.log2(FLOAT32_MAX / start))) + 1  # start * 2^good proven; 2^bad beyond float32
    while bad - good > 1:
        mid = (good + bad) // 2
        if _within_float32(graph, -start * 2.0**mid, start * 2.0**mid):
            good = mid
        else:
            bad = mid
    bound = np.float32(start * 2.0**good)
    if float(bound) > start * 2.0**good:  # the float32 at or below it
        bound = np.nextafter(bound, np.float32(0))
    return {"bound": float(bound)}


COARSE_PROBA = 0.01  # an integer build's probability bound past which the user is told


def _add_proba(model: Model, graph, output: BuildOutput, report: dict, calibration) -> None:
    """``<prefix>_proba`` in the files; in the report its rule and, for integer builds, the error
    bound that follows from the scores' largest error on the calibration rows, and the largest
    error measured there (the fixed-point interpreter's scores, against the float model's)."""
    rule = model.proba_rule
    dtype = graph.type(graph.output("scores")).dtype
    add_proba(output, rule, model.n_outputs if rule == "logistic_each" else model.n_classes,
              dtype.scale if dtype.is_fixed else None, model.proba_constants)
    info = {"rule": rule, "max_abs_error_bound": PROBA_FLOAT_SLACK}
    if rule in INPUT_RULES:  # a head read from the input: its float32 evaluation and the input's quantisation
        rows = check_calibration(calibration, model.input_dim) if calibration is not None else None
        if rows is None:
            info["max_abs_error_bound"] = None  # stated for the rows it is measured on
        else:
            integer_input = output.input_scale is not None
            steps = (2.0 ** -np.broadcast_to(np.asarray(output.input_scale, dtype=np.float64), (model.input_dim,))
                     if integer_input else None)
            head_error = linear_head_error(rows, model.proba_constants, steps)
            info["max_abs_error_bound"] = min(head_error / 2 + PROBA_FLOAT_SLACK, 1.0)
            if integer_input:
                seen = quantise(rows, output.input_scale, 16) * steps
                measured = np.abs(proba_from_inputs(seen, rule, model.proba_constants) - model.predict_proba(rows))
                info["calibration_max_abs_error"] = float(np.max(measured)) + PROBA_FLOAT_SLACK
                if info["max_abs_error_bound"] > COARSE_PROBA:
                    log.warning("%s: the probabilities of this integer build may be off by up to %.3g on the "
                                "calibration rows (their head reads the input at the steps the prediction needs); "
                                "a float build or scaled features (a StandardScaler step) give them to %.1g",
                                model.describe(), info["max_abs_error_bound"], COARSE_PROBA)
    elif dtype.is_fixed:
        # the rows agreement ran on this graph are not run again (run_fixed_once)
        scores = run_fixed_once(graph, quantise(calibration, output.input_scale, 16))["scores"] * 2.0**-dtype.scale
        float_scores = model.scores(calibration)  # the model's own probabilities are these through the rule
        measured = np.abs(proba_from_scores(scores, rule, model.proba_constants)
                          - proba_from_scores(float_scores, rule, model.proba_constants))
        info["max_abs_error_bound"] = proba_error_bound(rule, report["score_error"]["max_abs"], float_scores)
        info["calibration_max_abs_error"] = float(np.max(measured)) + PROBA_FLOAT_SLACK
    report["proba"] = info


# what compile(layout=...) writes: the model's files, or a layout a backend capability makes around them
LAYOUTS = {"files": None, "project": "project_files", "arduino": "arduino_library"}


SIZE_ADVICE_MARGIN = 0.9  # advice aims under the room left: code around the tables grows a little with them


@contextlib.contextmanager
def size_advice(model: Model, precision: str):
    """A FitError over the constants gains what would fit: the family's settings at the fraction of its
    constants the chip leaves room for, and that ``tinycc-ml fit`` searches them."""
    try:
        yield
    except FitError as exc:
        if not exc.constant_bytes or exc.constant_room is None or exc.constant_room >= exc.constant_bytes:
            if isinstance(model, NetworkModel) and "RAM" in str(exc):
                raise FitError(f"{exc.args[0]}; a network's RAM is mostly its activation arena (the layer outputs "
                               "live at once): smaller feature maps (a lower input resolution, fewer channels) "
                               "need less", exc.constant_bytes, exc.constant_room, exc.subject) from None
            raise
        room = max(exc.constant_room, 0)
        advice = (model.size_advice(int(SIZE_ADVICE_MARGIN * room), exc.constant_bytes,
                                    4 if precision == "float" else 2) if room else None)
        hint = (f"; {advice}" if advice else "") + "; `tinycc-ml fit` (tinycc_ml.fit) searches the sizes that fit"
        if isinstance(model, NetworkModel):  # no setting of ours or of `fit` shrinks a file's weights
            hint = f"; {advice}" if advice else ""
        raise FitError(f"{exc.args[0]}. The chip leaves about {room} bytes for constants, "
                       f"{100 * room / exc.constant_bytes:.0f}% of what this model needs{hint}",
                       exc.constant_bytes, exc.constant_room, exc.subject) from None


def arena_bytes(graph) -> int:
    """Bytes of the planned arenas (plan_memory) of ``graph``: a network's activation arena."""
    return sum(n * element_bytes(key) for key, n in graph.analyses.arenas.items())


def patches_line(patches: dict | None, ram_limit: int) -> str:
    """The description's line on patch-based execution (``ram_limit``): the split, grid, arena and extra MACs."""
    if patches is None:
        return f"Patch-based execution: none needed (the whole layers fit ram_limit {ram_limit:,} B)."
    return (f"Patch-based execution: the layers up to %{patches['split']} computed in {patches['grid'][0]}x"
            f"{patches['grid'][1]} patches of its output, so the arena fits ram_limit {ram_limit:,} B "
            f"({patches['unpatched_arena_bytes']:,} B with whole layers), at {patches['extra_macs']:,} more MACs "
            f"(+{patches['extra_macs_percent']}% of {patches['macs'] - patches['extra_macs']:,}).")


def check_distances(graph, source: str) -> None:
    """Float builds compute squared distances in float32: prototypes so large that the squared
    distance of an input of their own magnitude overflows would make every distance inf and every
    class tie (the C would answer class 0), so such a model is refused with its largest value."""
    for name in graph.order():
        node = graph.node(name)
        if node.op not in ("sqdist", "sqdist_kvote") or graph.op(node.inputs[1]) != "const":
            continue
        protos = np.asarray(graph.node(node.inputs[1]).attrs["value"], dtype=np.float64)
        with np.errstate(over="ignore"):
            reach = 4.0 * np.sum(protos * protos, axis=0)  # (2|p|)^2 summed over the features
        if np.any(~(reach <= FLOAT32_MAX)):
            raise ModelFileError(f"{source}: prototypes of magnitude up to {np.max(np.abs(protos)):g} make squared "
                                 f"distances overflow float32 (beyond {FLOAT32_MAX:g}); scale the features down "
                                 "(e.g. StandardScaler) or compile at precision int16/int8")


def compile(model, target: str = "host", out_dir=None, name: str | None = None, precision: str = "float",
            calibration=None, dump_ir_after=(), layout: str = "files", examples=None, example_labels=None,
            max_flash: int | None = None, max_ram: int | None = None, board: str | None = None,
            **options) -> CompileResult:
    """Compile ``model`` (a Model, a fitted estimator, or a path to a saved model) to C.

    precision: "float", or "int16"/"int8" for integer-only code (needs ``calibration`` rows).
    out_dir: where to write the files; None keeps them in memory (``result.files``).
    layout: "files" (``<name>.h``/``<name>.c``), "project" (a standalone firmware project, as ``--project``)
    or "arduino" (an Arduino library with an example sketch, as ``--arduino``); the last two store up to 8
    ``examples`` rows (default: the calibration rows) with ``example_labels`` (class labels, optional).
    max_flash, max_ram: the flash and RAM of your own chip, in bytes, when it has less than the target's
    (a 16 KB Cortex-M0): the build is checked against them (FitError with the sizes) instead of the chip's.
    board: one of the target's boards (``tinycc-ml targets`` lists them; e.g. "stm32f405", "nrf52840" for
    cortex-m4): the build is checked against that board's chip, and ``layout="project"`` writes its start-up,
    linker script and UART.
    """
    # numpy's default error handling whatever the caller's (a library that sets seterr(all="raise") on
    # import must not turn the float32 underflow the passes expect into an exception)
    with np.errstate(divide="warn", over="warn", under="ignore", invalid="warn"):
        try:
            return _compile(model, target, out_dir, name, precision, calibration, dump_ir_after, layout, examples,
                            example_labels, (max_flash, max_ram), options, board)
        except FitError as exc:  # a float network: the other precisions and dialects that fit, named
            fitting = _fitting_alternatives(model, target, name, precision, calibration, layout, examples,
                                            example_labels, (max_flash, max_ram), options, board)
            if fitting is None:
                raise
            raise FitError(f"{exc.args[0]}; {fitting}", exc.constant_bytes, exc.constant_room, exc.subject) from None
        except ModelFileError as exc:  # found while compiling a loaded file: name the file, as loading does
            if isinstance(model, (str, os.PathLike)):
                name_the_file(exc, model)
            raise


def weights_report(optimize: str, layouts: dict[str, tuple[str, str]]) -> dict:
    """The report's "weights": the layout of each layer whose kernel chose how its weights lie in flash, and a
    line saying which layouts the build has and why (the kernels' reasons, grouped)."""
    groups: dict[tuple[str, str], int] = {}
    for choice in layouts.values():
        groups[choice] = groups.get(choice, 0) + 1
    summary = "; ".join(f"{layout} on {n} of {len(layouts)} layers ({why})" for (layout, why), n in groups.items())
    return {"optimize": optimize, "layers": {node: layout for node, (layout, _) in layouts.items()},
            "summary": summary}


def _build_choice(precision: str, options: dict) -> str:
    """A precision and int8 dialect as the command line gives them."""
    dialect = options.get("int8_dialect")
    return f"--precision {precision}" + (f" --int8-dialect {dialect}" if dialect else "")


def _fitting_alternatives(model, target, name, precision, calibration, layout, examples, example_labels,
                          memory_limits, options, board) -> str | None:
    """For a float network (ONNX, float .tflite) refused for its size: which of its other builds (float, int16,
    int8 in TFLite's and in the project's power-of-two dialect) fit, each compiled and checked as the refused
    one was, with its flash and RAM; None for other models (one precision's refusal says what to shrink)."""
    try:
        model = as_model(model)
    except (CompileError, DataError, ModelFileError, OSError):
        return None
    if not isinstance(model, NetworkModel) or model.is_quantised:
        return None
    backend = get_backend(target)
    tried = (precision, options.get("int8_dialect", "tflite") if precision == "int8" else None)
    fits, refused = [], []
    for other, dialect in (("int8", "pow2"), ("int8", "tflite"), ("int16", None), ("float", None)):
        if (other, dialect) == tried or other not in backend.precisions or (other != "float" and calibration is None):
            continue
        others = {k: v for k, v in options.items() if k != "int8_dialect"}
        if dialect == "pow2":
            others["int8_dialect"] = dialect
        choice = _build_choice(other, others)
        package_log = logging.getLogger("tinycc_ml")
        level = package_log.level
        package_log.setLevel(logging.ERROR)  # the refused build said its warnings; the trials repeat them
        try:
            result = _compile(model, target, None, name, other, calibration if other != "float" else None, (),
                              layout, examples, example_labels, memory_limits, others, board)
        except FitError:
            refused.append(choice)
            continue
        except (CompileError, DataError) as exc:  # this build cannot be made at all: not an alternative
            log.info("%s: %s", choice, exc)
            continue
        finally:
            package_log.setLevel(level)
        fit = result.report.get("fit")
        if fit is not None:
            fits.append(f"{choice} ({fit['flash_bytes']} bytes of flash, {fit['ram_bytes']} bytes of static RAM "
                        f"+ ~{fit['stack_estimate']} bytes of stack)")
    if fits:
        return "these builds of it fit: " + ", ".join(fits)
    if refused:
        return f"none of its other builds fits either ({', '.join(refused)})"
    if calibration is None:
        return ("its integer builds (--precision int16, int8, int8 with --int8-dialect pow2) take less memory: they "
                "need calibration rows (--calibration)")
    return None


def name_the_file(exc: ModelFileError, path) -> None:
    """``exc``'s message starting with the model file's path, unless it names it already."""
    if str(path) not in str(exc):
        exc.args = (f"{path}: {exc.args[0] if exc.args else exc}", *exc.args[1:])


# files from other libraries: their stem names the model better than the family ("trees", "network")
STEM_NAMED_SUFFIXES = (".json", ".txt", ".onnx", ".tflite")


def default_name(source, model: Model) -> str:
    """The C prefix when none is given: an imported model file's stem made an identifier (``xgb-iris.json``
    -> ``xgb_iris``) where that is a name compile accepts, else the model's family."""
    if isinstance(source, (str, os.PathLike)) and Path(source).suffix.lower() in STEM_NAMED_SUFFIXES:
        stem = re.sub(r"[^A-Za-z0-9_]", "_", Path(source).stem)
        stem = f"m_{stem}" if stem[:1].isdigit() else stem
        try:
            if stem.lower() not in RESERVED_STEMS and check_prefix(stem) == stem:
                return stem
        except CompileError:
            pass  # a keyword, a system header's name, too long: the family's name instead
    return model.family


def _stored_rows(rows) -> int:
    """How many example rows a layout stores (0 when ``rows`` is none or malformed: example_rows says why)."""
    try:
        shape = np.shape(rows) if rows is not None else ()
    except ValueError:
        return 0
    return min(shape[0], MAX_EXAMPLES) if len(shape) == 2 else 0


def quantise_network_model(model: NetworkModel, calibration) -> tuple[NetworkModel, dict]:
    """A float network's int8 form from calibration rows, and how far it agrees with the float network on
    them: the share of rows predicting the same class, the largest score difference."""
    if calibration is None:
        raise CompileError(f"{model.describe()}: a float network is quantised to int8 from calibration data (rows "
                           "of typical inputs, each the input tensor's elements in order): pass calibration")
    rows = check_calibration(calibration, model.input_dim)
    quantised = model.quantise(rows)
    float_scores, int8_scores = model.scores(rows), quantised.scores(rows)
    agreement = float(np.mean(np.argmax(float_scores, axis=1) == np.argmax(int8_scores, axis=1)))
    if agreement < POOR_AGREEMENT:
        log.warning("%s: the int8 network predicts what the float network predicts on only %.1f%% of the "
                    "calibration rows", model.describe(), 100 * agreement)
    return quantised, {"quantised_from_float": True, "calibration_rows": len(rows),
                       "agreement_with_float": agreement,
                       "max_score_error": float(np.max(np.abs(float_scores - int8_scores)))}


def _own_network_graph(model: NetworkModel, graph, precision: str, calibration, ctx: PassContext, report: dict,
                       description: list[str]):
    """A float network's graph for its float C, or in the project's fixed point from the calibration rows; the
    report and the header's description filled."""
    if precision == "float":
        graph = run_passes(graph, FLOAT_NETWORK_PASSES, ctx)
    else:
        if calibration is None:
            raise CompileError(f"{model.describe()}: precision {precision} chooses the network's fixed-point scales "
                               "from calibration data (rows of typical inputs, each the input tensor's elements in "
                               "order): pass calibration")
        rows = check_calibration(calibration, model.input_dim)
        float_graph = graph.copy()
        graph = lower_network_to_fixed(graph, precision, rows, ctx)
        figures = fixed_agreement(float_graph, graph, rows)
        report.update(figures, dialect="pow2", calibration_rows=len(rows), values=fixed_values_report(graph),
                      scale_adjustments=dict(ctx.options.scale_adjust))
        if figures["agreement_with_float"] < POOR_AGREEMENT:
            log.warning("%s: the %s build predicts what the float network predicts on only %.1f%% of the calibration "
                        "rows", model.describe(), precision, 100 * figures["agreement_with_float"])
        description.extend(fixed_network_description(graph, figures, len(rows)))
    report["arena_bytes"] = arena_bytes(graph)
    description.append(f"Activation arena: {report['arena_bytes']} bytes of static RAM, one buffer the layers' "
                       "outputs share by liveness.")
    return graph


def before_network(model, front_end) -> FrontEndModel:
    """``compile(model, front_end=...)``: the fitted front end's steps before ``model`` (a network, or any model a
    file holds: an ONNX dense network reads as an MLP, which compiles with its front end as a Pipeline would)."""
    if isinstance(model, FrontEndModel):
        raise CompileError(f"front_end=: {model.describe()} has a front end already")
    return FrontEndModel(front_end_steps(front_end), model, source=f"front end before {model.describe()}")


def front_end_lines(model: FrontEndModel) -> list[str]:
    """The header's words on a front end's input and the network's input and scores after it."""
    net = model.network
    dtype = net.graph.type(net.input_name).dtype
    features = ("float32, as they are" if dtype.is_float else
                f"quantised as the network's input: q = round(x / {float(np.float32(dtype.qscales[0]))!r}) "
                f"{'-' if dtype.zero_point < 0 else '+'} {abs(dtype.zero_point)}, "
                "halves away from zero, saturated (TFLite's QUANTIZE)")
    return [f"Input: {model.input_dim} raw samples (float32); the front end computes in float32.",
            f"Features: the network's input {list(net.input_shape)} in order, {features}.",
            *[line for line in net.interface_lines() if line.startswith("Scores")]]


def _check_size_before_search(backend, model, fixed_graph, prefix: str, precision: str) -> None:
    """FitError when the integer build's constants or intermediates alone cannot fit the target: said before
    the scale search, whose choice changes neither (a wide GaussianNB's search took minutes before the refusal)."""
    fixed_graph.analyses.task = model.task
    with size_advice(model, precision):
        backend.check_size_floor(fixed_graph, prefix)


def _compile(model, target, out_dir, name, precision, calibration, dump_ir_after, layout, examples, example_labels,
             memory_limits, options, board=None) -> CompileResult:
    if layout not in LAYOUTS:
        raise CompileError(f"layout {layout!r} is not one of {', '.join(LAYOUTS)}")
    options = dict(options)
    import_options = {key: options.pop(key) for key in IMPORT_OPTIONS if key in options}
    source, model = model, (load_model(model, **import_options) if import_options and isinstance(model, (
        str, os.PathLike)) else as_model(model))
    if import_options and not isinstance(source, (str, os.PathLike)):
        reimport = getattr(model, "reimport", None)
        if reimport is None:
            raise CompileError(f"{' and '.join(import_options)}: options of ONNX networks with recurrent layers (GRU, "
                               f"LSTM, RNN); {model.describe()} has none")
        model = reimport(**import_options)
    network_form = getattr(model, "network_form", None)  # an ONNX file's dense chain, loaded as the mlp family
    if network_form is not None and precision == "int8":
        if options.get("int8_dialect") == "pow2":  # the mlp family's own int8: the project's power-of-two scales
            options.pop("int8_dialect")
        elif get_backend(target).network_ops is None:  # TFLite's int8: the chain read as a float network
            model = network_form()
    front_end = options.pop("front_end", None)
    if front_end is not None:
        model = before_network(model, front_end)
    if isinstance(model, NetworkModel):
        refusal = model.integer_refusal(precision, options.get("int8_dialect"))
        if refusal is not None:
            raise CompileError(refusal)
    prefix = check_prefix(default_name(source, model.model if front_end is not None else model)
                          if name is None else name)
    if prefix.lower() in RESERVED_STEMS:
        raise CompileError(f"name {prefix!r} would write {prefix}.c and {prefix}.h: make's implicit rules rebuild a "
                           f"file named {prefix} from {prefix}.c; choose another name")
    stream_hop = options.pop("stream_hop", None)
    if stream_hop is not None:
        if not isinstance(model, FrontEndModel):
            raise CompileError(f"stream_hop sets the hop of a front end's stream (<name>_feed); {model.describe()} "
                               "has no front end")
        model = model.with_stream_hop(stream_hop)
    backend = get_backend(target).with_board(board).with_memory_limits(*memory_limits)
    if LAYOUTS[layout]:
        backend.require(LAYOUTS[layout])
        backend = backend.for_layout(layout, _stored_rows(examples if examples is not None else calibration))
    if precision not in PRECISIONS:
        raise CompileError(f"precision {precision!r} is not one of {', '.join(PRECISIONS)}")
    if precision not in backend.precisions:
        raise CompileError(f"target {target} supports precision {', '.join(backend.precisions)}, not {precision}")
    model.check_precision(precision)
    front_net = model.network if isinstance(model, FrontEndModel) else None  # compile(network, front_end=...)
    net = front_net or model
    network = isinstance(net, NetworkModel)
    quantisation: dict = {}
    if "int8_dialect" in options and (precision != "int8" or not network or net.is_quantised):
        raise CompileError(f"int8_dialect chooses how a float network (ONNX, float .tflite) computes at precision "
                           f"int8; {model.describe()} at precision {precision} has no such choice")
    ctx = PassContext(options=PassOptions.from_user(precision, options, backend.target_attributes()),
                      dump_after=set(dump_ir_after))
    # a float network at float, int16, or int8 with int8_dialect="pow2": its own graph (float C, or the project's
    # fixed point); otherwise TFLite's int8 (the file's, or quantised from the calibration rows)
    own_network = network and not net.is_quantised and (precision != "int8" or ctx.options.int8_dialect == "pow2")
    if front_net is not None and own_network and precision != "float":
        raise CompileError(f"a front end before {net.describe()}: the network's int8 with int8_dialect='pow2' is not "
                           "built after a front end; precision int8 (TFLite's dialect) or float")
    if ctx.options.ram_limit is not None and (not network or own_network):
        raise CompileError(f"ram_limit bounds a TFLite int8 network's activation arena (its early layers computed by "
                           f"patches); {model.describe()} at precision {precision} has none: max_ram checks a "
                           "build's whole RAM")
    if network:
        if backend.network_ops is not None:
            raise CompileError(f"{model.describe()}: target {target} does not generate TFLite's network ops: "
                               f"{backend.network_ops}")
        if not own_network:
            if not net.is_quantised and front_net is not None:  # quantised from the front end's features
                rows = None if calibration is None else model.features(check_calibration(calibration, model.input_dim))
                net, quantisation = quantise_network_model(net, rows)
                model = model.with_model(net)
            elif not net.is_quantised:  # a float network: quantised to TFLite's int8 from the calibration rows
                model, quantisation = quantise_network_model(model, calibration)
                net = model
            precision = net.reference  # the file's own arithmetic (TFLite's int8 or 16x8 kernels)
            ctx.options.precision = precision
    log.info("compiling %s for target %s, precision %s", model.describe(), target, precision)
    if precision != "float" and calibration is not None and \
            type(model).for_calibration is not Model.for_calibration:  # an integer graph that depends on the rows
        model = model.for_calibration(check_calibration(calibration, model.input_dim))
    graph = model.lower_for(precision)
    graph.analyses.task = model.task  # the scale search reads it (regression: no argmax absorbs a saturation)
    check_constants(graph, model.describe())
    with size_advice(model, precision):
        backend.check_constants_fit(graph, precision, prefix)  # before any calibration or search
    report: dict = {"model": model.describe(), "target": target, "precision": precision}
    if network and quantisation:
        report.update(quantisation)
    description = [f"Model: {model.describe()}.", f"Precision: {precision}."]
    if model.task["kind"] != "classification":
        report["task"] = dict(model.task)
        description.append("Task: " + ", ".join(f"{k} {v}" for k, v in model.task.items()) + ".")
    if own_network:
        graph = _own_network_graph(model, graph, precision, calibration, ctx, report, description)
        description.extend(net.recurrent_lines())
        if graph.states():
            report["state_bytes"] = state_bytes(graph)
            description.append(f"State kept between calls: {report['state_bytes']} bytes of static RAM.")
    elif network:  # quantised already: no scale choice; its ranges are its types'
        graph = run_passes(graph, ["dce", "patch_stages", "dce", "plan_memory"], ctx)
        report["arena_bytes"] = arena_bytes(graph)
        description.append(f"Activation arena: {report['arena_bytes']} bytes of static RAM, one buffer the layers' "
                           "outputs share by liveness.")
        if ctx.options.ram_limit is not None:
            report["patches"] = graph.analyses.patches
            description.append(patches_line(graph.analyses.patches, ctx.options.ram_limit))
        description.extend(net.interface_lines() if front_net is None else front_end_lines(model))
        if graph.states():
            report["state_bytes"] = state_bytes(graph)
            description.append(f"State kept between calls: {report['state_bytes']} bytes of static RAM (a stream's "
                               "frames one call each; <name>_reset() starts a new stream).")
    elif precision == "float":
        graph = run_pipeline(graph, "float", ctx)
        check_constants(graph, model.describe())
        check_distances(graph, model.describe())
        checked = float_input_range(model, calibration, options)
        check_float_range(graph, *checked, model.describe())
        graph.analyses.input_bound = float_input_bound(graph, checked[0], checked[1])
        if graph.analyses.input_bound is not None:
            report["input_bound"] = {k: np.asarray(v).tolist() for k, v in graph.analyses.input_bound.items()}
    else:
        if calibration is None:
            raise CompileError(f"precision {precision} needs calibration data (rows of typical inputs)")
        calibration = check_calibration(calibration, model.input_dim)

        # the integer pipeline folds mean/std into the weights first: a fold that overflows
        # float32 is the model's fault, said before any calibration is looked at (not verified here: the
        # pipeline's first passes verify the graph they take)
        check_constants(run_passes(graph.copy(), ["fold_input_affine", "constant_fold"], PassContext(debug=False)),
                        model.describe())
        rows, flat = widen_flat_features(calibration, options)
        if flat is not None:
            report["calibration_flat_features"] = flat
        float_graph = graph
        try:
            graph = lower_to_fixed(graph, precision, rows, ctx, report, description,
                                   before_search=lambda fixed: _check_size_before_search(backend, model, fixed,
                                                                                         prefix, precision))
        except (OverflowError, FloatingPointError) as exc:
            raise _beyond_fixed_point(float_graph, model, calibration,
                                      f"intermediate values beyond what {precision} fixed point can scale ({exc})"
                                      ) from None
        agreement = report.get("agreement_with_float", 1.0)
        if model.task["kind"] == "classification" and agreement < POOR_AGREEMENT:  # said, not only reported
            log.warning("%s: the %s build predicts what the float model predicts on only %.1f%% of the calibration "
                        "rows (scores spanning more than %s can hold; see report['values'])", model.describe(),
                        precision, 100 * agreement, precision)
        if model.task["kind"] == "regression":  # the value's error is what a regression user needs to know
            error = report["fixed_point_error"] = {**report["score_error"], "rows": report["calibration_rows"],
                                                   "within_tolerance": agreement}
            description.append(f"Value error against the float model on {error['rows']} calibration rows: "
                               f"max {error['max_abs']:.4g}, mean {error['mean_abs']:.4g}; "
                               f"{100 * agreement:.2f}% of the rows within {error['tolerance']:.4g}.")
            if agreement < REGRESSION_AGREEMENT:
                better = "int16" if precision == "int8" else "float"
                log.warning("%s: the %s build's value is within %.4g (1%% of its range) of the float model's on only "
                            "%.1f%% of the calibration rows (error max %.4g, mean %.4g); %s keeps the value",
                            model.describe(), precision, error["tolerance"], 100 * agreement, error["max_abs"],
                            error["mean_abs"], better)
        # the values' scales, and those of values fused into an op (kNN's distances: sqdist_kvote)
        worst = max([abs(graph.type(n).dtype.scale) for n in graph.order() if graph.type(n).dtype.is_fixed]
                    + [abs(int(graph.node(n).attrs["dist_scale"])) for n in graph.order()
                       if "dist_scale" in graph.node(n).attrs], default=0)
        if worst > MAX_FIXED_SCALE:  # int32 arithmetic cannot shift that far: say why, and whose values
            raise _beyond_fixed_point(float_graph, model, calibration,
                                      f"values that need a fixed-point scale of 2^{worst} or 2^-{worst}, beyond what "
                                      f"{precision} code can compute (at most 2^{MAX_FIXED_SCALE})")
    graph.analyses.task = model.task  # what the scores mean: the header's extra entry points follow it
    graph.analyses.optimize = ctx.options.optimize
    output = backend.emit(graph, prefix, description)
    if output.weight_layouts:
        report["weights"] = weights_report(ctx.options.optimize, output.weight_layouts)
    log.info("emitted %s: constants %d bytes, intermediates %d bytes", ', '.join(output.files), output.const_bytes,
             output.ram_bytes)
    try:
        classes = model.classes
    except NotImplementedError:  # a model that does not say how many classes it has: one per score
        classes = np.arange(output.n_scores)
    add_labels(output, classes)
    if getattr(model, "scores_kind", None) == "pairs" and getattr(model, "decision_shape", None) == "ovr":
        output.ovr_of_pairs = model.n_class_count  # probabilities kept the pair decisions in the C
    if network and front_net is None and (len(model.input_parts) > 1 or len(model.output_parts) > 1):
        add_tensor_io(output, model.input_tensors(), model.output_tensors(), model.input_ctypes())
    add_status(output)
    if model.proba_rule is not None:
        _add_proba(model, graph, output, report, calibration)
    if isinstance(model, FrontEndModel) and model.task["kind"] == "classification":
        hop = model.stream_hop * model.values_per_sample
        kept = add_feed(output, model.input_dim, hop, backend, graph)
        report["stream"] = {"window_samples": model.window_samples, "hop_samples": model.stream_hop,
                            "values_per_sample": model.values_per_sample, "state_bytes": output.stream_bytes,
                            "frame_stack": kept}
    with size_advice(model, precision):
        fit = backend.check_fit(output)  # CompileError when the build cannot fit the target
    report.update(passes=list(ctx.log), const_bytes=output.const_bytes, ram_bytes=output.ram_bytes,
                  kernels=list(output.kernels))
    if fit is not None:
        report["fit"] = asdict(fit)
    result = CompileResult(target, prefix, precision, dict(output.files), None, output, graph, report,
                           classes=classes)
    if LAYOUTS[layout]:
        rows = examples if examples is not None else calibration
        result.files = getattr(backend, LAYOUTS[layout])(result, example_rows(result, model, rows, example_labels))
        own = {f"{prefix}.h", f"{prefix}.c"}
        for name, text in output.files.items():  # the layout must hold the model's own files as emitted
            if name in own and not any(Path(n).name == name and t == text for n, t in result.files.items()):
                raise CompileError(f"name {prefix!r}: the {layout} layout writes a file {name} of its own; choose "
                                   "another name")
        check_layout_names(prefix, result.files)
    if out_dir is not None:
        write_files(Path(out_dir), result.files)
        result.out_dir = Path(out_dir)
    return result
