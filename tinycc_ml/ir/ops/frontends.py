"""How the model formats' operators lower to the IR, registered by the op modules that define them (one place per
op): ``TFLITE_BUILTINS`` maps a TFLite builtin operator to its lowering. The readers (``importers/tflite.py``)
look here for every operator they do not lower themselves."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class TfliteBuiltin:
    """A TFLite builtin operator: its schema name and number, the BuiltinOptions union type it reads (None: no
    options), whether the file must give them, its (least, most) inputs, and ``lower(low, options, ins, outs)``
    adding its IR nodes through the reader's lowering (``low``: ``value``, ``add``, ``tensors``)."""

    name: str
    code: int
    lower: Callable
    options: int | None = None
    options_required: bool = False
    inputs: tuple[int, int] = (1, 1)


TFLITE_BUILTINS: dict[str, TfliteBuiltin] = {}


def tflite_builtin(name: str, code: int, options: int | None = None, inputs: tuple[int, int] = (1, 1),
                   options_required: bool = False):
    """Registers the decorated function as the lowering of TFLite's builtin ``name`` (number ``code``)."""
    def register(lower: Callable) -> Callable:
        if name in TFLITE_BUILTINS:
            raise ValueError(f"TFLite builtin {name} registered twice")
        TFLITE_BUILTINS[name] = TfliteBuiltin(name, code, lower, options, options_required, inputs)
        return lower
    return register
