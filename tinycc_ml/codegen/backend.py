"""The Backend interface and the backend registry.

BACKENDS is a tinycc_ml.plugins.Registry: the built-in targets by ``"module:Class"``, third-party ones
through the entry-point group ``tinycc_ml.backends`` (each entry naming a Backend subclass), and
``register_backend`` at run time (tests, embedding). Nothing is imported until it is used.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from tinycc_ml.errors import DataError
from tinycc_ml.passes.manager import TargetAttributes
from tinycc_ml.plugins import PluginError, Registry

if TYPE_CHECKING:
    from tinycc_ml.runtime.simulate import TargetRun

ENTRY_POINT_GROUP = "tinycc_ml.backends"


@dataclass
class BuildOutput:
    """What a backend produced: files by name (relative to the output folder) and facts."""

    files: dict[str, str]
    prefix: str
    input_ctype: str
    score_ctype: str
    input_dim: int
    n_scores: int
    const_bytes: int = 0
    ram_bytes: int = 0
    input_scale: object = None  # integer builds: per-feature ints s, x_int[k] = round(x[k] * 2^s[k])
    # TFLite-style builds: the input's (scale, zero point), x_int = ir.fixed.quantise_affine(x, scale, zero, bits)
    input_quantisation: tuple[float, int] | None = None
    kernels: list[dict] = field(default_factory=list)  # per matrix: kernel chosen, predicted cost, candidates
    # per layer whose kernel chose how its weights lie in flash: (layout, why), e.g. ("int8", "optimize='size'")
    weight_layouts: dict[str, tuple[str, str]] = field(default_factory=dict)
    task: dict | None = None  # what the scores mean (models.base.check_task); None: classification
    # an SVC's one-vs-one pair decisions whose decision_function is scikit-learn's one-vs-rest form of them: the
    # number of classes (the predictor transforms the scores as scikit-learn does); None: the scores are it
    ovr_of_pairs: int | None = None
    node_functions: dict[str, list[str]] = field(default_factory=dict)  # node -> kernel functions its code calls
    node_steps: dict[str, str] = field(default_factory=dict)  # node -> what it computes, in the user's words
    optional_ram_bytes: int = 0  # of ram_bytes, what kernels may give up when the build would not fit otherwise
    const_arrays: dict[str, int] = field(default_factory=dict)  # constant array symbol -> bytes
    # (C type, length, dtype, bytes) -> the constant array symbol holding those elements (codegen/emitter.py)
    array_contents: dict[tuple, str] = field(default_factory=dict)
    macs: int = 0  # multiply-accumulates per inference of a network's layers (ir.analyses.multiply_accumulates)
    # the target's CTarget.word_flash (a codegen.word_flash.WordFlash, with the model's prefix) when constants
    # may only be read as aligned 32-bit words: the label and probability tables added later follow it
    word_flash: object = None
    input_bound: dict | None = None  # float builds: the inputs proven exact (codegen/input_bound.py)
    stream_bytes: int = 0  # static RAM of <prefix>_feed's window (codegen/stream_feed.py); 0: no feed

    @property
    def c_quantises_affine(self) -> bool:
        """Whether the C has <prefix>_quantise for a TFLite-style input: int8 (255 thresholds) only; an int16 input's
        rows are quantised before the call."""
        return self.input_quantisation is not None and self.input_ctype == "int8_t"


class CapabilityError(PluginError):
    """A target asked for something it does not declare (a firmware project, a simulator, ...)."""


# What a backend may offer beyond emit/check_fit, each the name of a method it overrides; the CLI, report,
# fit and the profiler ask ``backend.supports(name)`` instead of comparing target names.
CAPABILITIES = {
    "load": "run its builds on this machine from Python (a predictor with predict/scores)",
    "simulate": "run its builds in a simulator and measure them (tinycc-ml report, fit)",
    "profile": "charge each function its cycles or instructions (the report's kernels)",
    "project_files": "write a standalone firmware project (--project)",
    "arduino_library": "write an Arduino library with an example sketch (--arduino)",
}


@dataclass(frozen=True)
class Fit:
    """How a build fits its chip (Backend.check_fit)."""

    chip: str
    flash_bytes: int
    ram_bytes: int  # static
    stack_estimate: int
    how: str  # measured or estimated, and why


class Backend:
    """A code-generation target.

    name: the target name users pass (``--target NAME``).
    precisions: which ``precision=`` values it accepts ("float", "int16", "int8").
    emit(): turn an optimised, planned graph into files.
    check_fit(): the step after emit: CompileError if the build cannot fit the target, else how it fits
        (None: nothing to check, e.g. the host).
    load(): optional, give back a runnable predictor for files written to a folder.
    simulate(): optional, run the files written to a folder on rows of float inputs and measure
        (predictions, scores, cycles or instructions, sizes): what ``tinycc-ml report`` shows.
    """

    name: str = ""
    description: str = ""
    precisions: tuple[str, ...] = ("float",)
    # None: its C for TFLite's network ops (codegen/c_network.py) is tested bit for bit against the interpreter;
    # else why ``compile`` refuses a network for this target
    network_ops: str | None = ("its builds of TFLite networks are not tested bit for bit against the interpreter "
                               "(the generated network C is tested on the host only)")

    def emit(self, graph, prefix: str, model_description: list[str]) -> BuildOutput:
        raise NotImplementedError

    def target_attributes(self) -> TargetAttributes:
        """What the passes need to know about this target (``PassOptions.target``)."""
        return TargetAttributes(name=self.name)

    def check_fit(self, output: BuildOutput) -> Fit | None:
        return None

    def with_memory_limits(self, max_flash: int | None = None, max_ram: int | None = None) -> Backend:
        """This backend checking its builds against the user's own flash and RAM (microcontroller targets;
        a target without a fit check refuses limits). Returns the backend."""
        if max_flash is not None or max_ram is not None:
            raise DataError(f"target {self.name} has no flash or RAM to check: max_flash / max_ram apply to "
                            "microcontroller targets")
        return self

    def with_board(self, board: str | None) -> Backend:
        """This backend building for ``board``, one of its boards (None: its default). Returns the backend."""
        if board is not None:
            raise DataError(f"target {self.name} has no boards to choose from (board {board!r}); boards are for "
                            "microcontroller targets: `tinycc-ml targets` lists them")
        return self

    def for_layout(self, layout: str, example_rows: int = 0) -> Backend:
        """This backend checking its builds as ``layout`` (compile's layouts) will hold them, beside
        ``example_rows`` stored inputs (default: as the model's own files). Returns the backend."""
        return self

    def check_constants_fit(self, graph, precision: str, prefix: str) -> None:
        """Before any calibration: FitError when the lowered float graph's constants alone cannot fit
        the target at ``precision`` (default: no limit, nothing computed)."""

    def check_size_floor(self, graph, prefix: str) -> None:
        """Before the scale search: FitError when the integer ``graph``'s build cannot fit the target
        whatever its scales (default: no limit, nothing computed)."""

    def require_tools(self, method: str = "auto") -> None:
        """ToolchainError naming what is missing to build and run this target's builds here (default: nothing);
        ``method``: the simulator's engine, where it has a choice."""

    # ---- capabilities: override to offer one (CAPABILITIES); the defaults say what is missing
    @classmethod
    def capabilities(cls) -> frozenset[str]:
        """The CAPABILITIES this backend offers: the methods it overrides (a subclass may narrow it)."""
        return frozenset(name for name in CAPABILITIES if getattr(cls, name) is not getattr(Backend, name))

    @classmethod
    def supports(cls, capability: str) -> bool:
        if capability not in CAPABILITIES:
            raise ValueError(f"unknown capability {capability!r}; capabilities: {', '.join(CAPABILITIES)}")
        return capability in cls.capabilities()

    def _missing(self, capability: str) -> CapabilityError:
        return CapabilityError(f"target {self.name} ({type(self).__module__}.{type(self).__name__}) cannot "
                               f"{CAPABILITIES[capability]}: it has no {capability}")

    def load(self, out_dir: Path, output: BuildOutput):
        """A predictor (predict, scores, ...) for the build written to ``out_dir``."""
        raise self._missing("load")

    def simulate(self, out_dir: Path, output: BuildOutput, X) -> TargetRun:
        """Run the build in ``out_dir`` on the rows of ``X`` (float, the model's input) and measure it."""
        raise self._missing("simulate")

    def profile(self, out_dir: Path, output: BuildOutput, X) -> dict[str, float]:
        """Cycles or instructions of one predict call per function symbol, on the rows of ``X``."""
        raise self._missing("profile")

    def project_files(self, result, examples) -> dict[str, str]:
        """Files (relative paths) of a standalone firmware project for a ``CompileResult``."""
        raise self._missing("project_files")

    def arduino_library(self, result, examples) -> dict[str, str]:
        """Files (relative paths) of an Arduino library with an example sketch for a ``CompileResult``."""
        raise self._missing("arduino_library")

    def require(self, capability: str) -> None:
        """CapabilityError naming the target and what it lacks, unless it offers ``capability``."""
        if not self.supports(capability):
            raise self._missing(capability)


BUILTIN_BACKENDS = {
    "host": "tinycc_ml.host.backend:HostBackend",
    "avr": "tinycc_ml.avr.backend:AvrBackend",
    "cortex-m0": "tinycc_ml.arm.cortex_m0:CortexM0Backend",
    "cortex-m4": "tinycc_ml.arm.cortex_m4:CortexM4Backend",
    "cortex-m33": "tinycc_ml.arm.cortex_m4:CortexM33Backend",
}
def _not_a_backend(obj) -> str | None:
    if isinstance(obj, type) and issubclass(obj, Backend):
        return None
    what = f"the class {obj.__name__}" if isinstance(obj, type) else f"a {type(obj).__name__}"
    return f"{what}, not a Backend subclass"


BACKENDS = Registry("target", ENTRY_POINT_GROUP, BUILTIN_BACKENDS, accepts=_not_a_backend)


def register_backend(cls: type[Backend]) -> type[Backend]:
    """Register a Backend subclass under its ``name`` at run time (tests, embedding)."""
    BACKENDS.register(cls.name, cls)
    return cls


def available_backends() -> dict[str, type[Backend]]:
    """Every target by name; a plug-in that fails to load is listed with its error."""
    return {name: _broken(name, obj) if isinstance(obj, PluginError) else obj
            for name, obj in BACKENDS.load_all().items()}


def _broken(name: str, exc: Exception) -> type[Backend]:
    class Broken(Backend):
        description = f"(failed to load: {exc.__cause__ or exc})"
        broken = exc

        def emit(self, *args, **kwargs):
            raise exc

    Broken.name = name
    return Broken


def get_backend(name: str) -> Backend:
    return BACKENDS.load(name)()


def targets_supporting(capability: str) -> list[str]:
    """Names of the loadable targets that offer ``capability`` (CAPABILITIES)."""
    return [name for name, cls in available_backends().items()
            if not hasattr(cls, "broken") and cls.supports(capability)]
