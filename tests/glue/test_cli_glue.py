"""One data-file convention for compile and report, consistent default precision, -v/-q, progress."""

from __future__ import annotations

import io
import logging

import numpy as np
import pytest

from tinycc_ml import cli, progress
from tinycc_ml.datafiles import load_rows
from tinycc_ml.errors import DataError
from tinycc_ml.models.protonn import ProtoNNModel


@pytest.fixture
def model_file(tmp_path):
    rng = np.random.default_rng(5)
    return ProtoNNModel(rng.normal(size=(3, 8)), rng.normal(size=(3, 5)), rng.normal(size=(3, 5)), 0.6).save(
        tmp_path / "model.npz")


def test_compile_takes_the_report_data_file_and_defaults_to_int16(model_file, tmp_path, capsys):
    rng = np.random.default_rng(1)
    np.savez(tmp_path / "data.npz", X_train=rng.normal(size=(40, 8)), y_train=rng.integers(0, 5, 40),
             X_test=rng.normal(size=(10, 8)), y_test=rng.integers(0, 5, 10))
    assert cli.main(["compile", str(model_file), "--calibration", str(tmp_path / "data.npz"), "-o",
                     str(tmp_path / "o")]) == 0
    assert "precision int16" in capsys.readouterr().out
    assert "Agreement with the float model on 40 calibration rows" in (tmp_path / "o" / "protonn.h").read_text()
    assert cli.main(["compile", str(model_file), "-o", str(tmp_path / "f")]) == 0  # no data: float
    assert "precision float" in capsys.readouterr().out


def test_data_file_convention(tmp_path):
    rng = np.random.default_rng(2)
    X_train, X_test, y_test = rng.normal(size=(20, 4)), rng.normal(size=(6, 4)), np.arange(6)
    np.savez(tmp_path / "split.npz", X_train=X_train, X_test=X_test, y_test=y_test)
    rows, labels, calibration = load_rows(tmp_path / "split.npz", "calibration")
    assert np.array_equal(rows, X_train) and labels is None and np.array_equal(calibration, X_train)
    rows, labels, calibration = load_rows(tmp_path / "split.npz", "test")
    assert np.array_equal(rows, X_test) and np.array_equal(labels, y_test) and np.array_equal(calibration, X_train)
    np.savez(tmp_path / "one.npz", anything=X_test)
    assert np.array_equal(load_rows(tmp_path / "one.npz", "test")[0], X_test)
    np.save(tmp_path / "rows.npy", X_train)
    assert np.array_equal(load_rows(tmp_path / "rows.npy")[0], X_train)
    np.savez(tmp_path / "bad.npz", X=X_test, y=np.arange(5))
    with pytest.raises(DataError, match="bad.npz.*6 rows in X"):
        load_rows(tmp_path / "bad.npz", "test")
    np.savez(tmp_path / "flat.npz", X=np.zeros(3))
    with pytest.raises(DataError, match=r"flat.npz: X has shape \(3,\)"):
        load_rows(tmp_path / "flat.npz")
    np.savez(tmp_path / "two.npz", a=X_test, b=X_test)
    with pytest.raises(DataError, match="two.npz.*X_train, X or X_test"):
        load_rows(tmp_path / "two.npz")


def test_quiet_and_verbose(model_file, tmp_path, capsys):
    assert cli.main(["-q", "compile", str(model_file), "-o", str(tmp_path / "q")]) == 0
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == "" and (tmp_path / "q" / "protonn.c").exists()
    assert cli.main(["-q", "compile", str(tmp_path / "missing.npz"), "-o", str(tmp_path / "q2")]) == 2
    assert capsys.readouterr().err.startswith("tinycc-ml: error: ")  # errors still show
    assert cli.main(["-v", "compile", str(model_file), "-o", str(tmp_path / "v")]) == 0
    assert f"tinycc-ml: read {model_file}" in capsys.readouterr().err
    assert cli.main(["compile", str(model_file), "-o", str(tmp_path / "n")]) == 0
    assert capsys.readouterr().err == ""  # no -v: no log lines
    assert logging.getLogger("tinycc_ml").handlers == []  # main() leaves the caller's logging as it was


def test_progress_logs_and_draws_only_when_asked(monkeypatch, caplog):
    # logging is process-wide: what another test module in this worker left (a library's logging.disable,
    # a disabled or non-propagating logger) must not decide this test
    monkeypatch.setattr(logging.root.manager, "disable", logging.NOTSET)
    for name in ("tinycc_ml", "tinycc_ml.progress"):
        monkeypatch.setattr(logging.getLogger(name), "disabled", False)
        monkeypatch.setattr(logging.getLogger(name), "propagate", True)
    progress_logger = logging.getLogger("tinycc_ml.progress")
    monkeypatch.setattr(progress_logger, "level", progress_logger.level)  # put back after the test
    progress_logger.setLevel(logging.NOTSET)  # (setLevel also clears the loggers' cached levels)
    monkeypatch.setattr(progress, "LOG_EVERY_SECONDS", 0.0)
    monkeypatch.setattr(progress, "DRAW_EVERY_SECONDS", 0.0)
    fake_tty = io.StringIO()
    monkeypatch.setattr(progress.sys, "stderr", fake_tty)
    progress.show_bar(False)
    with caplog.at_level(logging.INFO, logger="tinycc_ml"):
        with progress.Progress("search", total=4, unit="trials") as bar:
            for _ in range(4):
                bar.advance()
    assert "search: 4/4 trials" in caplog.text and fake_tty.getvalue() == ""
    progress.show_bar(True)
    try:
        with progress.Progress("sim", total=2, unit="rows") as bar:
            bar.advance()
        drawn = fake_tty.getvalue()
        assert drawn.startswith("\r[##########..........] sim: 1/2 rows") and drawn.endswith("\r")
    finally:
        progress.show_bar(False)

