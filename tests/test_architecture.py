"""The package's structure, as docs/architecture.md draws it, kept by tests: each target package (``avr``,
``arm``, ``host``, and the RISC-V and ESP8266 plug-ins in examples/) is written against ``tinycc_ml.target`` alone and
imports no other target; no private name crosses a module; no import cycle (imports inside functions
counted); an import of tinycc_ml's own modules inside a function only where it defers something, saying
what."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "tinycc_ml"
TARGET_PACKAGES = {"avr": PACKAGE / "avr", "arm": PACKAGE / "arm", "host": PACKAGE / "host",
                   "riscv (examples/)": REPO / "examples" / "tinycc-ml-riscv" / "tinycc_ml_riscv",
                   "esp8266 (examples/)": REPO / "examples" / "tinycc-ml-esp8266" / "tinycc_ml_esp8266"}
PUBLIC_TARGET_API = "tinycc_ml.target"
DEFERRED = "# deferred:"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imports(path: Path, package_module: str | None = None):
    """(imported module, names, line, inside a function) of every import of tinycc_ml in ``path``."""
    tree = ast.parse(path.read_text())
    inner = set()
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            inner |= {id(n) for n in ast.walk(fn) if n is not fn}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level and package_module:
                base = package_module.split(".")
                base = base if path.name == "__init__.py" else base[:-1]
                module = ".".join(base[: len(base) - node.level + 1] + ([module] if module else []))
            if module == "tinycc_ml" or module.startswith("tinycc_ml."):
                out.append((module, [a.name for a in node.names], node.lineno, id(node) in inner))
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name == "tinycc_ml" or a.name.startswith("tinycc_ml."):
                    out.append((a.name, [], node.lineno, id(node) in inner))
    return out


@pytest.mark.parametrize("name", sorted(TARGET_PACKAGES))
def test_a_target_package_imports_only_the_public_target_api(name):
    folder = TARGET_PACKAGES[name]
    own = f"tinycc_ml.{folder.name}" if folder.parent == PACKAGE else folder.name  # a plug-in: its own package
    offenders = []
    for path in sorted(folder.rglob("*.py")):
        for module, _, line, _ in imports(path):
            if module == PUBLIC_TARGET_API or module == own or module.startswith(own + "."):
                continue
            offenders.append(f"{path.relative_to(REPO)}:{line}: imports {module}")
    assert not offenders, "\n".join(offenders)


def test_the_target_packages_do_not_import_each_other():
    packages = {f"tinycc_ml.{folder.name}" for folder in TARGET_PACKAGES.values() if folder.parent == PACKAGE}
    offenders = []
    for own in sorted(packages):
        for path in sorted((PACKAGE / own.split(".")[1]).rglob("*.py")):
            for module, _, line, _ in imports(path):
                other = next((p for p in packages if module == p or module.startswith(p + ".")), None)
                if other and other != own:
                    offenders.append(f"{path.relative_to(REPO)}:{line}: {own} imports {module}")
    assert not offenders, "\n".join(offenders)


def test_no_private_name_is_imported_across_modules():
    offenders = []
    for name, path in modules().items():
        for module, names, line, _ in imports(path, name):
            private = [n for n in names if n.startswith("_") and not n.startswith("__")]
            if private and module != name:
                offenders.append(f"{path.relative_to(REPO)}:{line}: {', '.join(private)} from {module}")
    assert not offenders, "\n".join(offenders)


def import_graph() -> dict[str, set[str]]:
    mods = modules()
    graph: dict[str, set[str]] = {name: set() for name in mods}
    for name, path in mods.items():
        for module, names, _, _ in imports(path, name):
            for target in [f"{module}.{n}" for n in names if f"{module}.{n}" in mods] or [module]:
                while target and target not in mods:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    graph[name].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycles():
    assert not cycles(import_graph())


def test_the_cycle_finder_finds_one():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_an_import_inside_a_function_says_what_it_defers():
    offenders = []
    for name, path in modules().items():
        lines = path.read_text().splitlines()
        for module, _, line, inside in imports(path, name):
            if not inside:
                continue
            above = [text.strip() for text in reversed(lines[: line - 1])]
            block = next((i for i, text in enumerate(above) if not text.startswith(("from ", "import "))), 0)
            if not above or not above[block].startswith(DEFERRED):
                offenders.append(f"{path.relative_to(REPO)}:{line}: {module}")
    assert not offenders, "imports inside functions without a '# deferred: why' comment:\n" + "\n".join(offenders)
