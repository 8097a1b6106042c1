"""tinycc-ml: compile trained tiny ML models into dependency-free C for
microcontrollers (ATmega328P, Cortex-M0) and the host."""

# The public names are imported on first use (PEP 562): ``import tinycc_ml`` stays cheap, so the command
# line's start-up (before it can turn Ctrl-C into one line) imports almost nothing.
from tinycc_ml.version import __version__

_LAZY = {"CompileResult": "tinycc_ml.api", "compile": "tinycc_ml.api", "load_model": "tinycc_ml.api",
         "save_model": "tinycc_ml.api", "TinyccError": "tinycc_ml.errors", "FitResult": "tinycc_ml.search.fit",
         "fit": "tinycc_ml.search.fit"}

__all__ = ["CompileResult", "FitResult", "TinyccError", "__version__", "compile", "fit", "load_model",
           "save_model"]


def __getattr__(name: str):
    import importlib

    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    if not name.startswith("_"):  # a submodule used as an attribute (tinycc_ml.api.as_model) after import tinycc_ml
        try:
            return importlib.import_module(f"tinycc_ml.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"tinycc_ml.{name}":
                raise
    raise AttributeError(f"module 'tinycc_ml' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
