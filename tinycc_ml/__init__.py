"""tinycc-ml: compile trained tiny machine-learning models into dependency-free C for
microcontrollers (ATmega328P, Cortex-M0) and the host."""

from tinycc_ml.api import CompileResult, compile, load_model, save_model
from tinycc_ml.errors import TinyccError
from tinycc_ml.search.fit import FitResult, fit
from tinycc_ml.version import __version__

__all__ = ["CompileResult", "FitResult", "TinyccError", "__version__", "compile", "fit", "load_model",
           "save_model"]
