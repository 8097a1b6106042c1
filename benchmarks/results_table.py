"""Benchmark result tables: print one as markdown and write it to ``benchmarks/results/<name>.json``.

The documentation site renders the same file where a page says ``<!-- table: <name> -->``
(``docs/hooks/benchmark_tables.py`` calls :func:`render`), so a table on the site is always the one a
script last wrote. A result file is JSON::

    {"name": "...", "script": "benchmarks/x.py --flags", "columns": ["a", "b"], "rows": [["1", "2"]],
     "align": [null, "right"]}            # align optional: null (default), "left", "right" or "center"

Cells are stored as the text they print as (numbers already formatted), so the site shows exactly what
the script printed.

    from results_table import write_table
    write_table("rebuild_time", ["precision", "wall s"], [["int16", "8.33"]], script="benchmarks/rebuild_time.py")
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
_SEPARATOR = {None: "---", "left": ":---", "right": "---:", "center": ":---:"}


def render(table: dict) -> str:
    """The markdown table of a result file's contents."""
    columns = table["columns"]
    align = table.get("align") or [None] * len(columns)
    if len(align) != len(columns):
        raise ValueError(f"table {table.get('name')!r}: {len(align)} alignments for {len(columns)} columns")
    lines = ["| " + " | ".join(columns) + " |", "| " + " | ".join(_SEPARATOR[a] for a in align) + " |"]
    for row in table["rows"]:
        if len(row) != len(columns):
            raise ValueError(f"table {table.get('name')!r}: a row of {len(row)} cells for {len(columns)} columns: "
                             f"{row}")
        lines.append("| " + " | ".join(str(cell) for cell in row) + " |")
    return "\n".join(lines)


def load(name: str, results_dir: Path = RESULTS) -> dict:
    """The table written under ``name``."""
    return json.loads((Path(results_dir) / f"{name}.json").read_text())


def write_table(name: str, columns: Sequence[str], rows: Sequence[Sequence[object]], *, script: str,
                align: Sequence[str | None] | None = None, results_dir: Path | None = RESULTS,
                file=None) -> dict:
    """Print the table as markdown (to ``file``, default stdout) and write it to ``results_dir/<name>.json``.

    ``script`` is the command that produced it (shown on the site). ``results_dir=None`` only prints
    (e.g. a partial run with ``--only`` that should not replace the stored result)."""
    table = {"name": name, "script": script, "columns": [str(c) for c in columns],
             "rows": [[str(cell) for cell in row] for row in rows]}
    if align is not None:
        table["align"] = list(align)
    text = render(table)
    print(text, file=file or sys.stdout, flush=True)
    if results_dir is not None:
        path = Path(results_dir) / f"{name}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(table, indent=1, ensure_ascii=False) + "\n")
    return table
