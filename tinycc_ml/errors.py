"""Error types. Every user-facing failure is a TinyccError whose message names the
file or value at fault and the problem; the CLI prints it on one line and exits 2."""


class TinyccError(Exception):
    """Base of every error tinycc-ml raises on purpose."""


class ModelFileError(TinyccError):
    """A saved model (file or directory) is missing, malformed or holds bad values."""


class DataError(TinyccError, ValueError):
    """Training, calibration or evaluation data is unusable (a ValueError, as scikit-learn expects)."""


class FrontEndError(TinyccError, ValueError):
    """A front-end parameter that cannot work (an FFT length that is not a power of two, a hop longer than its
    window, a mel band holding no FFT bin): the message names the parameter and its value."""


class DataTypeError(DataError, TypeError):
    """Data of a type that cannot be used at all (e.g. objects where numbers are expected)."""


class IRError(TinyccError):
    """An IR graph breaks a typing or structure rule."""


class IRParseError(IRError):
    """The IR text form could not be parsed; the message carries line and column."""


class CompileError(TinyccError):
    """A model cannot be compiled as asked (bad name, unknown target, does not fit)."""


class FitError(CompileError):
    """A build does not fit its chip's flash or RAM; the message gives the sizes. When the constants are what
    does not fit, ``constant_bytes`` is what they take and ``constant_room`` what the chip leaves them."""

    def __init__(self, message: str, constant_bytes: int | None = None, constant_room: int | None = None,
                 subject: str | None = None):
        super().__init__(message)
        self.constant_bytes, self.constant_room = constant_bytes, constant_room
        self.subject = subject  # how the message names the build ("model kws"), when it starts with it

    @property
    def finding(self) -> str:
        """The message without the build's name at its start: what a caller that names the build itself
        (``fit``, beside a candidate's label) says after that name."""
        text = str(self)
        if self.subject and text.startswith(self.subject + " "):
            return text[len(self.subject) + 1:]
        return text


class ToolchainError(TinyccError):
    """A compiler or simulator needed for a build or a run is missing or failed."""


class InfeasibleError(TinyccError, ValueError):
    """No model meets the limits asked of ``tinycc_ml.fit``; ``closest`` holds the nearest candidates
    (dicts as in pareto.json), the message names them and the limits they break."""

    def __init__(self, message: str, closest: list | None = None):
        super().__init__(message)
        self.closest = list(closest or [])
