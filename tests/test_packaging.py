"""pyproject.toml declares every package tinycc_ml imports (anywhere, function-level imports included)."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# import name -> distribution name, where they differ
DISTRIBUTION = {"sklearn": "scikit-learn", "elftools": "pyelftools"}


def imported_top_level_names() -> dict[str, str]:
    found: dict[str, str] = {}
    for path in sorted((ROOT / "tinycc_ml").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                found.setdefault(name.split(".")[0], str(path.relative_to(ROOT)))
    return found


def test_every_imported_package_is_declared():
    text = (ROOT / "pyproject.toml").read_text()
    # [project] dependencies and the optional-dependencies lists (tomllib is 3.11+; Python 3.10 is supported)
    deps = text[text.index("dependencies = ["):text.index("[project.scripts]")]
    declared = re.findall(r'"([A-Za-z0-9_.\-]+)[^"]*"', deps)
    declared_names = {re.split(r"[<>=!~ \[;]", d, maxsplit=1)[0].lower() for d in declared}
    third_party = {name: where for name, where in imported_top_level_names().items()
                   if name not in sys.stdlib_module_names and name not in ("tinycc_ml", "__future__")}
    assert {"numpy", "sklearn", "scipy"} <= set(third_party)  # the scan sees imports at all
    missing = {name: where for name, where in third_party.items()
               if DISTRIBUTION.get(name, name).lower() not in declared_names}
    assert not missing, f"imported but not declared in pyproject.toml: {missing}"
