"""Your own chip's memory: ``compile``/``report`` (``max_flash``/``max_ram``, ``--max-flash``/``--max-ram``)
check a build against it instead of the target chip's."""

from __future__ import annotations

import numpy as np
import pytest

import tinycc_ml
from tests.conftest import require_target
from tinycc_ml import cli
from tinycc_ml.errors import DataError, FitError
from tinycc_ml.models.linear import LinearModel


@pytest.fixture(scope="module")
def linear():
    rng = np.random.default_rng(0)
    return LinearModel(rng.normal(size=(10, 300)), rng.normal(size=10)), rng.normal(size=(40, 300))


def test_a_build_is_held_to_the_flash_and_ram_given(linear):
    require_target("cortex-m0")
    model, X = linear
    fit = tinycc_ml.compile(model, target="cortex-m0", precision="int16", calibration=X).report["fit"]
    assert fit["how"].startswith("measured")
    roomy = tinycc_ml.compile(model, target="cortex-m0", precision="int16", calibration=X,
                              max_flash=fit["flash_bytes"], max_ram=fit["ram_bytes"] + fit["stack_estimate"])
    assert roomy.report["fit"]["flash_bytes"] == fit["flash_bytes"] and "limited to" in roomy.report["fit"]["chip"]
    with pytest.raises(FitError, match=rf"limited to {fit['flash_bytes'] - 1} B flash.*needs {fit['flash_bytes']} "
                                       rf"bytes of flash \(has {fit['flash_bytes'] - 1}\)"):
        tinycc_ml.compile(model, target="cortex-m0", precision="int16", calibration=X,
                          max_flash=fit["flash_bytes"] - 1)
    with pytest.raises(FitError, match=r"limited to 262144 B flash, 1024 B RAM"):
        tinycc_ml.compile(model, target="cortex-m0", precision="int16", calibration=X, max_ram=1024)
    with pytest.raises(FitError, match="its constants alone need at least"):  # before any calibration
        tinycc_ml.compile(model, target="cortex-m0", precision="int16", calibration=X, max_flash=2048)


def test_limits_beyond_the_chip_or_without_a_chip_are_refused(linear):
    model, X = linear
    with pytest.raises(DataError, match=r"max_flash 300000 is more than the nRF51822 \(Cortex-M0\)'s 262144 bytes"):
        tinycc_ml.compile(model, target="cortex-m0", max_flash=300_000)
    for bad in (0, -5, 2.5, True):
        with pytest.raises(DataError, match="max_ram must be a positive number of bytes"):
            tinycc_ml.compile(model, target="avr", max_ram=bad)
    with pytest.raises(DataError, match="target host has no flash or RAM to check"):
        tinycc_ml.compile(model, target="host", max_flash=4096)


def test_the_command_line_says_it_in_one_line(linear, tmp_path, capsys):
    require_target("cortex-m0")
    model, X = linear
    path = model.save(tmp_path / "lin.npz")
    np.save(tmp_path / "calib.npy", X)
    args = ["compile", str(path), "--target", "cortex-m0", "--calibration", str(tmp_path / "calib.npy"),
            "-o", str(tmp_path / "out")]
    assert cli.main([*args, "--max-flash", "4K"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "limited to 4096 B flash" in err and not (tmp_path / "out").exists()
    assert cli.main([*args, "--max-flash", "64K", "--max-ram", "4K"]) == 0
    assert (tmp_path / "out" / "linear.c").exists()
