"""The Backend interface and the backend registry.

Built-in backends and third-party ones are found the same way: through the entry-point group
``tinycc_ml.backends``, each entry naming a Backend subclass. ``register_backend`` adds one
at run time (tests, embedding).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path

from tinycc_ml.errors import CompileError

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
    notes: list[str] = field(default_factory=list)


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
    """

    name: str = ""
    description: str = ""
    precisions: tuple[str, ...] = ("float",)

    def emit(self, graph, prefix: str, model_description: list[str]) -> BuildOutput:
        raise NotImplementedError

    def check_fit(self, output: BuildOutput) -> Fit | None:
        return None

    def load(self, out_dir: Path, output: BuildOutput):
        raise CompileError(f"target {self.name} builds are not runnable on this machine from Python")


_REGISTERED: dict[str, type[Backend]] = {}


def register_backend(cls: type[Backend]) -> type[Backend]:
    _REGISTERED[cls.name] = cls
    return cls


def available_backends() -> dict[str, type[Backend]]:
    found: dict[str, type[Backend]] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            cls = ep.load()
        except Exception as exc:  # a broken plug-in must not take the compiler down
            found.setdefault(ep.name, _broken(ep.name, exc))
            continue
        found[ep.name] = cls
    # Built-ins also work from a source tree that was never pip-installed.
    from tinycc_ml.backends import avr, cortex_m0, host  # noqa: F401

    for name, cls in _REGISTERED.items():
        found.setdefault(name, cls)
    return dict(sorted(found.items()))


def _broken(name: str, exc: Exception) -> type[Backend]:
    class Broken(Backend):
        description = f"(failed to load: {exc})"

        def emit(self, *args, **kwargs):
            raise CompileError(f"target {name}: plug-in failed to load: {exc}")

    Broken.name = name
    return Broken


def get_backend(name: str) -> Backend:
    backends = available_backends()
    if name not in backends:
        raise CompileError(f"unknown target {name!r}; available: {', '.join(backends)}")
    return backends[name]()
