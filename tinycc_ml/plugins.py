"""The one plug-in mechanism: a registry maps a name to an object (a backend class, a model family,
a pass, a simulator) and imports it only when asked for.

Three sources:
  1. the built-ins, a table of ``name -> "module:attribute"`` strings (nothing is imported up front);
  2. the entry points of the registry's group installed packages declare, e.g. in pyproject.toml
     ``[project.entry-points."tinycc_ml.backends"] riscv = "my_backend:RiscvBackend"``; one with a
     built-in's name never replaces it (an installed package must not silently change what "host" means:
     the built-in wins and a warning names both);
  3. ``registry.register(name, obj)`` at run time (tests, embedding): wins over both, as asked.
A registry may check what it loads (``accepts``: a backend registry holds Backend subclasses); a plug-in
that fails to import, exits (SystemExit) on import, or is not what the registry holds is a PluginError.

The registries themselves live beside what they hold (backends.base.BACKENDS, models.base.FAMILIES,
passes.manager.PASSES, runtime.simulate.SIMULATORS); this module imports nothing of tinycc_ml's
except its errors, so any module can use it without an import cycle.
"""

from __future__ import annotations

import importlib
import logging
import sys
from collections.abc import Callable, Iterator, MutableMapping
from importlib.metadata import entry_points

from tinycc_ml.errors import CompileError


class PluginError(CompileError):
    """A plug-in that is unknown or failed to import."""


def import_object(spec: str):
    """The object a ``"package.module:attr.sub"`` string names."""
    module, _, attr = spec.partition(":")
    obj = importlib.import_module(module)
    for part in filter(None, attr.split(".")):
        obj = getattr(obj, part)
    return obj


_ENTRY_POINT_SPECS: dict[tuple, dict[str, str]] = {}
_WARNED_CLASHES: set[tuple[str, str]] = set()
log = logging.getLogger(__name__)


class Registry(MutableMapping):
    """``name -> object``, loaded lazily; a mapping (``in``, ``[]``, iteration over names, ``register``).

    kind: what it holds, for messages ("target", "model family", ...).
    group: the entry-point group third-party packages declare entries in.
    builtins: ``name -> "module:attr"`` of the objects shipped with tinycc_ml.
    """

    def __init__(self, kind: str, group: str, builtins: dict[str, str] | None = None,
                 accepts: Callable[[object], str | None] | None = None):
        self.kind, self.group = kind, group
        self.accepts = accepts  # obj -> None when it may be held, else what is wrong with it
        self._specs: dict[str, str] = dict(builtins or {})
        self._loaded: dict[str, object] = {}
        self._registered: dict[str, object] = {}

    # ---- sources
    def _entry_point_specs(self) -> dict[str, str]:
        # scanning every installed distribution costs ~10 ms and compile asks several registries:
        # once per process and search path (the function is in the key so tests can swap it)
        key = (entry_points, self.group, tuple(sys.path))
        if key not in _ENTRY_POINT_SPECS:
            _ENTRY_POINT_SPECS[key] = {ep.name: ep.value for ep in entry_points(group=self.group)}
        return _ENTRY_POINT_SPECS[key]

    def _all_specs(self) -> dict[str, str]:
        plugged = self._entry_point_specs()
        for name in sorted(set(plugged) & set(self._specs)):
            if plugged[name] != self._specs[name] and (self.group, name) not in _WARNED_CLASHES:
                _WARNED_CLASHES.add((self.group, name))
                log.warning("%s %r: the installed plug-in %s (entry point group %s) has the name of the built-in "
                            "%s; the built-in is used", self.kind, name, plugged[name], self.group, self._specs[name])
        return {**plugged, **self._specs}

    def register(self, name: str, obj) -> None:
        self._registered[name] = obj

    def decorator(self, name_of: Callable[[object], str]):
        """A class decorator registering the class under ``name_of(cls)``."""

        def register(obj):
            self.register(name_of(obj), obj)
            return obj

        return register

    # ---- look-up
    def names(self) -> list[str]:
        return sorted({*self._all_specs(), *self._registered})

    def load(self, name: str):
        """The object, importing it on first use; PluginError when unknown or broken."""
        if name in self._registered:
            return self._registered[name]
        specs = self._all_specs()
        if name not in specs:
            raise PluginError(f"unknown {self.kind} {name!r}; available: {', '.join(self.names())}")
        spec = specs[name]
        if (name, spec) not in self._loaded:
            try:
                obj = import_object(spec)
            except Exception as exc:  # a broken plug-in must not take the compiler down
                raise PluginError(f"{self.kind} {name}: plug-in {spec} failed to load: {exc}") from exc
            except SystemExit as exc:  # nor end the process without a word
                raise PluginError(f"{self.kind} {name}: plug-in {spec} exited while loading "
                                  f"(SystemExit({exc.code!r}))") from None
            wrong = self.accepts(obj) if self.accepts else None
            if wrong:
                raise PluginError(f"{self.kind} {name}: plug-in {spec} is {wrong}")
            self._loaded[(name, spec)] = obj
        return self._loaded[(name, spec)]

    def load_all(self) -> dict[str, object]:
        """Every entry by name; a broken one maps to its PluginError (for listings)."""
        out: dict[str, object] = {}
        for name in self.names():
            try:
                out[name] = self.load(name)
            except PluginError as exc:
                out[name] = exc
        return out

    # ---- MutableMapping
    def __getitem__(self, name: str):
        try:
            return self.load(name)
        except PluginError as exc:
            if name not in self.names():
                raise KeyError(name) from None
            raise exc

    def __setitem__(self, name: str, obj) -> None:
        self.register(name, obj)

    def __delitem__(self, name: str) -> None:
        if name in self._registered:
            del self._registered[name]
        elif name in self._specs:
            del self._specs[name]
        else:
            raise KeyError(name)

    def __contains__(self, name) -> bool:
        return name in self._registered or name in self._all_specs()

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())
