"""The help texts name every model format and every target, from the tables the code reads them with."""

from __future__ import annotations

import contextlib
import io

import pytest

from tinycc_ml.cli import build_parser
from tinycc_ml.codegen.backend import BACKENDS
from tinycc_ml.model_formats import MODEL_FORMATS


def _help(command: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        build_parser().parse_args([command, "--help"])
    return " ".join(out.getvalue().split())  # argparse wraps lines


@pytest.mark.parametrize("command", ["compile", "report", "fit"])
def test_the_target_option_names_every_registered_target(command):
    text = _help(command)
    assert BACKENDS.names() and all(name in text for name in BACKENDS.names())
    assert "cortex-m4" in text and "cortex-m33" in text


def test_compile_names_every_model_format():
    text = _help("compile")
    for suffix in (".npz", ".tflite", ".onnx", ".json", ".ubj", ".txt"):
        assert f"{suffix}" in text
    assert all(s in text for f in MODEL_FORMATS for s in f.suffixes) and "EdgeML model folder" in text


def test_the_cli_page_names_every_model_format_and_builtin_target():
    from pathlib import Path

    from tinycc_ml.codegen.backend import BUILTIN_BACKENDS

    page = (Path(__file__).parent.parent / "docs" / "guide" / "cli.md").read_text()
    assert all(f"`{s}`" in page for f in MODEL_FORMATS for s in f.suffixes)
    assert all(f"`{name}`" in page for name in BUILTIN_BACKENDS)


def test_user_docs_speak_of_no_issue_numbers_and_nothing_in_progress():
    import re
    from pathlib import Path

    root = Path(__file__).parent.parent
    pages = [root / "README.md", root / "mkdocs.yml", *sorted((root / "docs").rglob("*.md"))]
    for page in pages:
        text = page.read_text()
        assert not re.search(r"(?<!--)\bissue \d", text, re.I), page
        assert "in progress" not in text.lower(), page
