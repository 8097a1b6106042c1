"""The documentation site builds with `mkdocs build --strict` (offline): a broken link or anchor, a page
missing from the nav, a mkdocstrings warning (an API name that cannot be found, a docstring griffe
cannot read) or a benchmark table without its result file fails here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def test_the_docs_build_strict(tmp_path):
    pytest.importorskip("mkdocs")
    pytest.importorskip("mkdocstrings_handlers.python")
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "NO_MKDOCS_2_WARNING": "1"}
    run = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                         cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    site = tmp_path / "site"
    assert (site / "index.html").is_file() and (site / "api" / "tinycc_ml" / "index.html").is_file()
    benchmarks = (site / "benchmarks" / "cycles" / "index.html").read_text()
    assert "<!-- table:" not in benchmarks and "<table>" in benchmarks  # the hook rendered the result files
    api = (site / "api" / "tinycc_ml" / "index.html").read_text()
    assert "tinycc_ml.compile" in api and "tinycc_ml.fit" in api


def test_a_broken_link_fails_the_build(tmp_path):
    """--strict is what makes a warning fail: a copy of the docs with one link to a missing page fails."""
    pytest.importorskip("mkdocs")
    pytest.importorskip("mkdocstrings_handlers.python")
    import shutil

    shutil.copytree(REPO / "docs", tmp_path / "docs")
    (tmp_path / "benchmarks").mkdir()
    shutil.copytree(REPO / "benchmarks" / "results", tmp_path / "benchmarks" / "results",
                    ignore=shutil.ignore_patterns("*reproducers*"))
    shutil.copy(REPO / "benchmarks" / "results_table.py", tmp_path / "benchmarks")
    config = (REPO / "mkdocs.yml").read_text()
    assert "paths: [.]" in config
    (tmp_path / "mkdocs.yml").write_text(config.replace("paths: [.]", f"paths: [{json.dumps(str(REPO))}]"))
    page = tmp_path / "docs" / "guide" / "cli.md"
    page.write_text(page.read_text() + "\nSee [nowhere](no-such-page.md).\n")
    bad = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                         cwd=tmp_path, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"}, capture_output=True, text=True,
                         timeout=600)
    assert bad.returncode != 0 and "no-such-page.md" in bad.stdout + bad.stderr, bad.stdout + bad.stderr
