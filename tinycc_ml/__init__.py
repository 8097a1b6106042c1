"""tinycc-ml: compile trained tiny machine-learning models into dependency-free C for
microcontrollers (ATmega328P, Cortex-M0) and the host."""

__version__ = "0.1.0"

from tinycc_ml.api import CompileResult, compile, load_model  # noqa: E402
from tinycc_ml.errors import TinyccError  # noqa: E402

__all__ = ["CompileResult", "TinyccError", "__version__", "compile", "load_model"]
