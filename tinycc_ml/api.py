"""The public API: load_model and compile."""

from __future__ import annotations

import logging
import os
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from tinycc_ml.backends.base import BuildOutput, get_backend
from tinycc_ml.backends.c_emitter import check_prefix
from tinycc_ml.backends.labels import add_labels
from tinycc_ml.errors import CompileError, DataError, ModelFileError
from tinycc_ml.files import write_tree
from tinycc_ml.models.base import CLASSES_META_KEY, MODEL_FAMILIES, Model, check_task
from tinycc_ml.models.saved import ARRAY_KINDS, FLOAT32_MAX, read_model_file
from tinycc_ml.passes import PassContext, run_passes, run_pipeline
from tinycc_ml.passes.manager import PassOptions

PRECISIONS = ("float", "int16", "int8")
log = logging.getLogger(__name__)
MAX_FIXED_SCALE = 48  # the scale search stays within about +-34; beyond this int32 shifts overflow


def load_model(path) -> Model:
    """Load a saved model: the project's ``.npz`` model file, or an EdgeML model directory
    (ProtoNN: W.npy, B.npy, Z.npy, gamma.npy; Bonsai: W.npy, V.npy, T.npy, Z.npy, ...)."""
    path = Path(path)
    if path.is_dir():
        names = {p.name for p in path.iterdir()}
        families = [cls for cls in MODEL_FAMILIES.load_all().values() if isinstance(cls, type)]
        best = max(families, key=lambda cls: cls.directory_match(names), default=None)
        if best is not None and best.directory_match(names) > 0:
            return best.from_directory(path)
        raise ModelFileError(f"{path}: no EdgeML model in this directory (expected W.npy, B.npy, Z.npy, gamma.npy)")
    if not path.exists():
        raise ModelFileError(f"{path}: no such file or directory")
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
        """A runnable predictor (host target): ``.predict(X)`` (class labels), ``.predict_index(X)``
        and ``.scores(X)``."""
        backend = get_backend(self.target)
        if self.out_dir is not None:
            predictor = backend.load(self.out_dir, self.output)
        else:
            with tempfile.TemporaryDirectory(prefix="tinycc-ml-") as tmp:
                write_files(Path(tmp), self.files)
                predictor = backend.load(Path(tmp), self.output)
        if self.classes is not None and hasattr(predictor, "classes"):
            predictor.classes = self.classes
        return predictor


def write_files(out_dir: Path, files: dict[str, str]) -> list[Path]:
    """Write all files or none (staged beside ``out_dir``, then moved in); files whose content is
    unchanged are left alone. Returns the paths written."""
    return write_tree(out_dir, files)


def model_input_files(path) -> list[Path]:
    """Every file ``load_model(path)`` may read: the model file, or all files of an EdgeML directory."""
    path = Path(path)
    if path.is_dir():
        return sorted(p for p in path.iterdir() if p.is_file())
    return [path]


def as_model(model) -> Model:
    """A Model from a Model, a path to a saved one, a fitted tinycc-ml estimator or a fitted
    scikit-learn object (see :mod:`tinycc_ml.models.from_sklearn`)."""
    if isinstance(model, Model):
        return model
    if isinstance(model, (str, os.PathLike)):
        return load_model(model)
    from sklearn.exceptions import NotFittedError  # only for objects: keeps the CLI's start quick

    from tinycc_ml.models.from_sklearn import SUPPORTED, from_sklearn, is_sklearn_object

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


def check_constants(graph, source: str) -> None:
    """Every float constant and factor of a float graph must be finite in float32: a value that
    overflows (a huge weight, 1/std of a tiny std, a folded product) would be written as inf."""
    for name in graph.order():
        node = graph.node(name)
        for key, value in node.attrs.items():
            if isinstance(value, (bool, str)) or np.asarray(value).dtype.kind != "f":
                continue
            values = np.asarray(value, dtype=np.float64)
            bad = ~(np.abs(values) <= FLOAT32_MAX)
            if np.any(bad):
                worst = values.reshape(-1)[int(np.argmax(bad.reshape(-1)))]
                raise ModelFileError(f"{source}: {name} ({node.op} {key}) holds {worst:g}, beyond the float32 range "
                                     "of the compiled code (weights too large, or a std too small)")


def check_distances(graph, source: str) -> None:
    """Float builds compute squared distances in float32: prototypes so large that the squared
    distance of an input of their own magnitude overflows would make every distance inf and every
    class tie (the C would answer class 0), so such a model is refused with its largest value."""
    for name in graph.order():
        node = graph.node(name)
        if node.op != "sqdist" or graph.op(node.inputs[1]) != "const":
            continue
        protos = np.asarray(graph.node(node.inputs[1]).attrs["value"], dtype=np.float64)
        with np.errstate(over="ignore"):
            reach = 4.0 * np.sum(protos * protos, axis=0)  # (2|p|)^2 summed over the features
        if np.any(~(reach <= FLOAT32_MAX)):
            raise ModelFileError(f"{source}: prototypes of magnitude up to {np.max(np.abs(protos)):g} make squared "
                                 f"distances overflow float32 (beyond {FLOAT32_MAX:g}); scale the features down "
                                 "(e.g. StandardScaler) or compile at precision int16/int8")


def compile(model, target: str = "host", out_dir=None, name: str | None = None, precision: str = "float",
            calibration=None, dump_ir_after=(), **options) -> CompileResult:
    """Compile ``model`` (a Model, a fitted estimator, or a path to a saved model) to C.

    precision: "float", or "int16"/"int8" for integer-only code (needs ``calibration`` rows).
    out_dir: where to write ``<name>.h``/``<name>.c``; None keeps the files in memory.
    """
    model = as_model(model)
    prefix = check_prefix(name or model.family)
    backend = get_backend(target)
    if precision not in PRECISIONS:
        raise CompileError(f"precision {precision!r} is not one of {', '.join(PRECISIONS)}")
    if precision not in backend.precisions:
        raise CompileError(f"target {target} supports precision {', '.join(backend.precisions)}, not {precision}")
    log.info("compiling %s for target %s, precision %s", model.describe(), target, precision)
    ctx = PassContext(options=PassOptions.from_user(precision, options, backend.target_attributes()),
                      dump_after=set(dump_ir_after))
    graph = model.lower()
    graph.analyses.task = model.task  # the scale search reads it (regression: no argmax absorbs a saturation)
    check_constants(graph, model.describe())
    report: dict = {"model": model.describe(), "target": target, "precision": precision}
    description = [f"Model: {model.describe()}.", f"Precision: {precision}."]
    if model.task["kind"] != "classification":
        report["task"] = dict(model.task)
        description.append("Task: " + ", ".join(f"{k} {v}" for k, v in model.task.items()) + ".")
    if precision == "float":
        graph = run_pipeline(graph, "float", ctx)
        check_constants(graph, model.describe())
        check_distances(graph, model.describe())
    else:
        if calibration is None:
            raise CompileError(f"precision {precision} needs calibration data (rows of typical inputs)")
        calibration = check_calibration(calibration, model.input_dim)
        from tinycc_ml.passes.fixed_pipeline import lower_to_fixed

        # the integer pipeline folds mean/std into the weights first: a fold that overflows
        # float32 is the model's fault, said before any calibration is looked at
        check_constants(run_passes(graph.copy(), ["fold_input_affine", "constant_fold"], PassContext()),
                        model.describe())
        try:
            graph = lower_to_fixed(graph, precision, calibration, ctx, report, description)
        except (OverflowError, FloatingPointError) as exc:
            raise DataError(f"calibration data: values up to {np.max(np.abs(calibration)):g} drive the model's "
                            f"intermediate values beyond what {precision} fixed point can scale ({exc})") from None
        if model.task["kind"] == "regression":  # the value's error is what a regression user needs to know
            error = report["fixed_point_error"] = {**report["score_error"], "rows": report["calibration_rows"]}
            description.append(f"Value error against the float model on {error['rows']} calibration rows: "
                               f"max {error['max_abs']:.4g}, mean {error['mean_abs']:.4g}.")
        worst = max((abs(graph.type(n).dtype.scale) for n in graph.order() if graph.type(n).dtype.is_fixed),
                    default=0)
        if worst > MAX_FIXED_SCALE:  # int32 arithmetic cannot shift that far: say why, not where
            raise DataError(f"calibration data: values up to {np.max(np.abs(calibration)):g} need a fixed-point "
                            f"scale of 2^{worst} or 2^-{worst}, beyond what {precision} code can compute "
                            f"(at most 2^{MAX_FIXED_SCALE})")
    graph.analyses.task = model.task  # what the scores mean: the header's extra entry points follow it
    output = backend.emit(graph, prefix, description)
    log.info("emitted %s: constants %d bytes, intermediates %d bytes", ', '.join(output.files), output.const_bytes,
             output.ram_bytes)
    try:
        classes = model.classes
    except NotImplementedError:  # a model that does not say how many classes it has: one per score
        classes = np.arange(output.n_scores)
    add_labels(output, classes)
    fit = backend.check_fit(output)  # CompileError when the build cannot fit the target
    report.update(passes=list(ctx.log), const_bytes=output.const_bytes, ram_bytes=output.ram_bytes,
                  kernels=list(output.kernels))
    if fit is not None:
        report["fit"] = asdict(fit)
    if out_dir is not None:
        write_files(Path(out_dir), output.files)
    return CompileResult(target, prefix, precision, dict(output.files), Path(out_dir) if out_dir else None,
                         output, graph, report, classes=classes)
