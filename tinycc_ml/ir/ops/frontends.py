"""How the model formats' operators lower to the IR, registered by the op modules that define them (one place per
op): ``TFLITE_BUILTINS`` maps a TFLite builtin operator to its lowering, ``TFLITE_CUSTOMS`` a custom operator (by
its ``custom_code``, e.g. TFLite Micro's signal library: "SignalRfft") to its lowering. The readers
(``importers/tflite.py``) look here for every operator they do not lower themselves."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tinycc_ml.ir.ops.registry import TypeRuleError


@dataclass(frozen=True)
class TfliteBuiltin:
    """A TFLite builtin operator: its schema name and number, the BuiltinOptions union type it reads (None: no
    options), whether the file must give them, its (least, most) inputs and outputs, and ``lower(low, options, ins,
    outs)`` adding its IR nodes through the reader's lowering (``low``: ``value``, ``add``, ``tensors``)."""

    name: str
    code: int
    lower: Callable
    options: int | None = None
    options_required: bool = False
    inputs: tuple[int, int] = (1, 1)
    outputs: tuple[int, int] = (1, 1)
    optional: tuple[int, ...] = ()  # inputs the file may leave out (index -1)


TFLITE_BUILTINS: dict[str, TfliteBuiltin] = {}


def tflite_builtin(name: str, code: int, options: int | None = None, inputs: tuple[int, int] = (1, 1),
                   options_required: bool = False, outputs: tuple[int, int] = (1, 1), optional: tuple[int, ...] = ()):
    """Registers the decorated function as the lowering of TFLite's builtin ``name`` (number ``code``)."""
    def register(lower: Callable) -> Callable:
        if name in TFLITE_BUILTINS:
            raise ValueError(f"TFLite builtin {name} registered twice")
        TFLITE_BUILTINS[name] = TfliteBuiltin(name, code, lower, options, options_required, inputs, outputs, optional)
        return lower
    return register


@dataclass(frozen=True)
class TfliteCustom:
    """A TFLite custom operator: its ``custom_code``, its (least, most) inputs and outputs, and ``lower(low, options,
    ins, outs)`` adding its IR nodes; ``options`` is its ``custom_options`` FlexBuffer map read as a dict."""

    name: str
    lower: Callable
    inputs: tuple[int, int] = (1, 1)
    outputs: tuple[int, int] = (1, 1)


TFLITE_CUSTOMS: dict[str, TfliteCustom] = {}


def tflite_custom(name: str, inputs: tuple[int, int] = (1, 1), outputs: tuple[int, int] = (1, 1)):
    """Registers the decorated function as the lowering of TFLite's custom operator ``name``."""
    def register(lower: Callable) -> Callable:
        if name in TFLITE_CUSTOMS:
            raise ValueError(f"TFLite custom operator {name} registered twice")
        TFLITE_CUSTOMS[name] = TfliteCustom(name, lower, inputs, outputs)
        return lower
    return register


def custom_int(options: dict, key: str, op: str, least: int, most: int, default: int | None = None) -> int:
    """An integer option of a custom operator, refused (TypeRuleError, naming it) when absent without a default,
    not an integer, or outside [least, most]."""
    value = options.get(key, default)
    if value is None or isinstance(value, float) or not isinstance(value, int):
        raise TypeRuleError(f"{op}: option {key!r} is {'absent' if value is None else repr(value)}; an integer "
                            "is needed")
    if not least <= int(value) <= most:
        raise TypeRuleError(f"{op}: option {key!r} is {int(value)}, outside [{least}, {most}]")
    return int(value)
