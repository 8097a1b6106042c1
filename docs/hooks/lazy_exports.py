"""griffe extension: the names ``tinycc_ml`` imports on first use (its ``_LAZY`` table, PEP 562) become
aliases of the objects they name, so the API reference documents ``tinycc_ml.compile`` by that name without
importing anything."""

from __future__ import annotations

import ast

import griffe


class LazyExports(griffe.Extension):
    def on_module_members(self, *, mod: griffe.Module, **kwargs) -> None:
        lazy = mod.members.get("_LAZY")
        if lazy is None or not isinstance(lazy, griffe.Attribute) or lazy.value is None:
            return
        for name, module in ast.literal_eval(str(lazy.value)).items():
            if name not in mod.members:
                mod.set_member(name, griffe.Alias(name, f"{module}.{name}", parent=mod))
