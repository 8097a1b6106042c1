"""The "Adding a backend" page's blocks (docs/backends.md) run as written: the Python block is a module of a plug-in
package, the TOML block its entry points, and the shell block's error is what the CLI prints."""

from __future__ import annotations

import re
import sys
from importlib.metadata import EntryPoint
from pathlib import Path

import numpy as np
import pytest
import tomllib

import tinycc_ml
from tests.conftest import require_target
from tinycc_ml import cli, plugins
from tinycc_ml.testing import check_model, random_inputs, random_model

REPO = Path(__file__).resolve().parents[1]


def section() -> str:
    """The page up to its kernels section (which has its own run block, run by test_readme_blocks)."""
    return (REPO / "docs" / "backends.md").read_text().split("## Hand-written kernels")[0]


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", section(), re.S)


@pytest.fixture
def my_riscv(tmp_path, monkeypatch):
    """The Python block as module my_riscv, found through the TOML block's entry points."""
    (code,) = blocks("python")
    (tmp_path / "my_riscv.py").write_text(code)
    monkeypatch.syspath_prepend(str(tmp_path))
    entry_points = tomllib.loads(blocks("toml")[0])["project"]["entry-points"]
    real = plugins.entry_points

    def fake(group=None, **kwargs):
        found = list(real(group=group, **kwargs))
        for name, value in entry_points.get(group, {}).items():
            found.append(EntryPoint(name=name, value=value, group=group))
        return found

    monkeypatch.setattr(plugins, "entry_points", fake)
    yield
    sys.modules.pop("my_riscv", None)


def test_the_python_and_toml_blocks_make_a_target(my_riscv, capsys, tmp_path):
    assert cli.main(["targets"]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("my-riscv"))
    assert "RISC-V RV32IMC" in line and "can: simulate" in line
    rng = np.random.default_rng(4)
    model = random_model("protonn", rng)
    X = random_inputs(model, rng, 24)
    result = tinycc_ml.compile(model, target="my-riscv", precision="int16", calibration=X, name="rv")
    assert result.report["fit"]["chip"].startswith("RV32IMC")
    require_target("my-riscv")  # skips (fails in CI) naming what is missing
    check_model("my-riscv", model, X, "int16", tmp_path / "run")  # bit-exact in QEMU, streaming too


def test_the_shell_block_error_is_what_the_cli_prints(tmp_path, capsys, monkeypatch):
    (block,) = re.findall(r"```\n(\$ tinycc-ml .*?)```", section(), re.S)
    command, expected = block.strip().splitlines()
    args = command.removeprefix("$ tinycc-ml ").split()
    rng = np.random.default_rng(0)
    random_model("protonn", rng).save(tmp_path / "kws.npz")
    monkeypatch.chdir(tmp_path)
    assert cli.main(args) == 2
    assert capsys.readouterr().err.strip() == expected
    assert not (tmp_path / "fw").exists()
