"""MkDocs hook: ``<!-- table: NAME -->`` on a page becomes the table of ``benchmarks/results/NAME.json``.

The result files are written by the benchmark scripts through ``benchmarks/results_table.py``, whose
``render`` makes the markdown here too. A missing or malformed file stops the build."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

from mkdocs.exceptions import PluginError

ROOT = Path(__file__).resolve().parents[2]
MARKER = re.compile(r"^<!-- table: ([A-Za-z0-9_.-]+) -->$", re.M)


def _results_table():
    spec = importlib.util.spec_from_file_location("results_table", ROOT / "benchmarks" / "results_table.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_MODULE = _results_table()


def table_markdown(name: str) -> str:
    try:
        table = _MODULE.load(name)
    except FileNotFoundError:
        raise PluginError(f"benchmark table {name!r}: no file benchmarks/results/{name}.json") from None
    except ValueError as exc:
        raise PluginError(f"benchmark table {name!r}: benchmarks/results/{name}.json is not JSON: {exc}") from None
    try:
        text = _MODULE.render(table)
    except (KeyError, ValueError) as exc:
        raise PluginError(f"benchmark table {name!r}: {exc}") from None
    return f"{text}\n\n*Table: `benchmarks/results/{name}.json`, written by `{table['script']}`.*"


def on_page_markdown(markdown: str, page, config, files) -> str:
    return MARKER.sub(lambda m: table_markdown(m.group(1)), markdown)
