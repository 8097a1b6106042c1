"""The command line, mostly in-process (``cli.main``) for speed; ``python -m tinycc_ml`` and the
console script are checked through subprocesses."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tinycc_ml
from tinycc_ml import cli
from tinycc_ml.ir.text import parse_graph
from tinycc_ml.models.protonn import ProtoNNModel
from tinycc_ml.passes import PIPELINES

REPO = Path(__file__).resolve().parents[1]


def small_model() -> ProtoNNModel:
    rng = np.random.default_rng(7)
    return ProtoNNModel(rng.normal(size=(3, 8)), rng.normal(size=(3, 5)), rng.normal(size=(3, 5)), 0.6,
                        rng.normal(size=8), rng.uniform(0.5, 2.0, size=8))


@pytest.fixture
def model_file(tmp_path) -> Path:
    return small_model().save(tmp_path / "model.npz")


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("tinycc-ml: error: ")
    return lines[0]


def test_compile_writes_files_and_says_so(model_file, tmp_path, capsys):
    out = tmp_path / "deep" / "out"
    assert cli.main(["compile", str(model_file), "--target", "host", "-o", str(out), "--name", "kws"]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["kws.c", "kws.h"]
    stdout = capsys.readouterr().out
    assert str(out / "kws.c") in stdout and str(out / "kws.h") in stdout
    assert "int kws_predict(const float *x);" in (out / "kws.h").read_text()
    # the files are the same as the Python API gives
    assert tinycc_ml.compile(model_file, name="kws").files == {p.name: p.read_text() for p in out.iterdir()}


def test_compile_default_name_is_the_family(model_file, tmp_path, capsys):
    assert cli.main(["compile", str(model_file), "-o", str(tmp_path / "o")]) == 0
    assert sorted(p.name for p in (tmp_path / "o").iterdir()) == ["protonn.c", "protonn.h"]


def test_dump_ir_after(model_file, tmp_path, capsys):
    assert cli.main(["compile", str(model_file), "-o", str(tmp_path / "o"), "--dump-ir-after", "dce"]) == 0
    err = capsys.readouterr().err
    assert err.count("// IR after") == 1 and "// IR after dce" in err
    assert "graph protonn {" in err
    assert cli.main(["compile", str(model_file), "-o", str(tmp_path / "o"), "--dump-ir-after", "all"]) == 0
    err = capsys.readouterr().err
    assert re.findall(r"// IR after (\w+)", err) == PIPELINES["float"]
    assert cli.main(["compile", str(model_file), "-o", str(tmp_path / "o2"), "--dump-ir-after", "cse",
                     "--dump-ir-after", "fold_input_affine"]) == 0
    assert re.findall(r"// IR after (\w+)", capsys.readouterr().err) == ["fold_input_affine", "cse"]


def test_dumped_ir_parses_when_constants_are_small(tmp_path, capsys):
    model = ProtoNNModel(np.eye(2), np.zeros((2, 1)), np.ones((1, 1)), 1.0)  # every array <= 8 elements
    path = model.save(tmp_path / "tiny.npz")
    assert cli.main(["compile", str(path), "-o", str(tmp_path / "o"), "--dump-ir-after", "plan_memory"]) == 0
    err = capsys.readouterr().err
    graph = parse_graph(err.split("\n", 1)[1])
    assert graph.name == "protonn"


def test_targets_lists_host_with_description(capsys):
    assert cli.main(["targets"]) == 0
    out = capsys.readouterr().out
    (host,) = [line for line in out.splitlines() if line.split()[0] == "host"]
    assert "C99" in host and "float" in host


@pytest.mark.parametrize("argv, words", [
    (["compile", "{model}", "-o", "{out}", "--target", "nowhere"], ["nowhere"]),
    (["compile", "{model}", "-o", "{out}", "--name", "2fast"], ["2fast"]),
    (["compile", "{model}", "-o", "{out}", "--name", "a b"], ["a b"]),
    (["compile", "{model}", "-o", "{out}", "--dump-ir-after", "frobnicate"], ["frobnicate"]),
    (["compile", "{tmp}/nope.npz", "-o", "{out}"], ["nope.npz"]),
    (["compile", "{model}", "-o", "{out}", "--precision", "float", "--calibration", "{tmp}/calib.npy"],
     ["--calibration"]),
    (["compile", "{model}", "-o", "{out}", "--precision", "int8"], ["calibration"]),
])
def test_user_errors_are_one_line_and_status_2(model_file, tmp_path, capsys, argv, words):
    np.save(tmp_path / "calib.npy", np.zeros((20, 8)))
    out = tmp_path / "out"
    argv = [a.format(model=model_file, out=out, tmp=tmp_path) for a in argv]
    assert cli.main(argv) == 2
    line = one_error_line(capsys)
    for word in words:
        assert word in line
    assert not out.exists()


def test_multiline_messages_are_joined_into_one_line(model_file, tmp_path, capsys, monkeypatch):
    def fail(*args, **kwargs):
        raise tinycc_ml.TinyccError("first line\nsecond line")

    monkeypatch.setattr(tinycc_ml, "compile", fail)
    assert cli.main(["compile", str(model_file), "-o", str(tmp_path / "o")]) == 2
    assert one_error_line(capsys) == "tinycc-ml: error: first line second line"


def test_an_existing_file_in_the_way_is_a_clean_error(model_file, tmp_path, capsys):
    blocker = tmp_path / "out"
    blocker.write_text("precious")
    assert cli.main(["compile", str(model_file), "-o", str(blocker)]) == 2
    assert "out" in one_error_line(capsys)
    assert blocker.read_text() == "precious"


@pytest.mark.parametrize("argv", [[], ["compile"], ["compile", "m.npz"], ["frobnicate"],
                                  ["compile", "m.npz", "-o", "x", "--precision", "int4"]])
def test_usage_errors_exit_2(argv, capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "error:" in err


def test_unexpected_exceptions_keep_their_traceback(model_file, tmp_path, monkeypatch):
    def bug(*args, **kwargs):
        raise RuntimeError("a bug in the compiler")

    monkeypatch.setattr(tinycc_ml, "compile", bug)
    with pytest.raises(RuntimeError, match="a bug"):
        cli.main(["compile", str(model_file), "-o", str(tmp_path / "o")])


def test_python_dash_m_and_subprocess_behaviour(model_file, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    run = subprocess.run([sys.executable, "-m", "tinycc_ml", "--version"], capture_output=True, text=True, env=env)
    assert run.returncode == 0 and run.stdout.strip() == f"tinycc-ml {tinycc_ml.__version__}"
    run = subprocess.run([sys.executable, "-m", "tinycc_ml", "compile", str(model_file), "--name", "bad-name",
                          "-o", str(tmp_path / "o")], capture_output=True, text=True, env=env)
    assert run.returncode == 2 and run.stderr.count("\n") == 1 and "Traceback" not in run.stderr
    assert not (tmp_path / "o").exists()
    # a bug (here: a model module that raises) shows a traceback and is not status 2
    code = ("import sys, tinycc_ml; from tinycc_ml import cli\n"
            "def boom(*a, **k): raise ZeroDivisionError('boom')\n"
            "tinycc_ml.compile = boom\n"
            f"sys.exit(cli.main(['compile', {str(model_file)!r}, '-o', {str(tmp_path / 'o')!r}]))\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert run.returncode == 1 and "Traceback" in run.stderr and "ZeroDivisionError" in run.stderr


def test_demo_runs_end_to_end(tmp_path, capsys):
    out = tmp_path / "demo"
    assert cli.main(["demo", "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "digits" in text
    names = {p.name for p in out.iterdir()}
    assert {"digits.c", "digits.h", "protonn_digits.npz"} <= names
    rows = {m.group(1): m for m in re.finditer(
        r"^(float \(numpy\)|C float32|C int16)\s+([\d.]+)%\s+(\S+)\s+([\d.]+) us$", text, re.M)}
    assert {"float (numpy)", "C float32"} <= set(rows), text
    assert float(rows["float (numpy)"].group(2)) > 85.0
    assert float(rows["C float32"].group(3).rstrip("%")) >= 99.0  # agreement with the float model
    assert "C int16" in rows or "int16:" in text  # either the row, or why it is missing
    # the files it wrote are real: the saved model reloads and the C compiles against it
    model = tinycc_ml.load_model(out / "protonn_digits.npz")
    assert model.input_dim == 64 and model.n_outputs == 10
    assert tinycc_ml.compile(model, name="digits").files["digits.c"] == (out / "digits.c").read_text()


def test_demo_works_without_fixed_point(tmp_path, capsys, monkeypatch):
    real = tinycc_ml.compile

    def no_fixed(*args, **kwargs):
        if kwargs.get("precision", "float") != "float":
            raise ModuleNotFoundError("No module named 'tinycc_ml.passes.fixed_pipeline'",
                                      name="tinycc_ml.passes.fixed_pipeline")
        return real(*args, **kwargs)

    monkeypatch.setattr(tinycc_ml, "compile", no_fixed)
    monkeypatch.setattr(cli, "_train_demo_model", lambda X, y: (
        __import__("tinycc_ml.models.protonn", fromlist=["init_protonn"]).init_protonn(X, y, 8, 2), "init"))
    assert cli.main(["demo", "-o", str(tmp_path / "d")]) == 0
    text = capsys.readouterr().out
    assert "C int16" not in text and "int16" in text and "C float32" in text


def test_fixed_point_from_the_command_line(model_file, tmp_path, capsys):
    import importlib.util

    rows = np.random.default_rng(0).normal(size=(64, 8))
    np.savez(tmp_path / "calib.npz", X=rows)
    out = tmp_path / "q"
    status = cli.main(["compile", str(model_file), "-o", str(out), "--name", "q", "--precision", "int16",
                       "--calibration", str(tmp_path / "calib.npz"), "--dump-ir-after", "range_analysis"])
    captured = capsys.readouterr()
    if importlib.util.find_spec("tinycc_ml.passes.fixed_pipeline") is None:  # not built yet: a clean refusal
        assert status == 2 and captured.err.count("\n") == 1 and not out.exists()
        return
    assert status == 0, captured.err
    assert "// IR after range_analysis" in captured.err  # fixed-point pass names are accepted
    assert "int16_t" in (out / "q.h").read_text()
    predictor = tinycc_ml.compile(model_file, name="q", precision="int16", calibration=rows).load()
    agree = np.mean(predictor.predict(rows) == tinycc_ml.load_model(model_file).predict(rows))
    assert agree >= 0.9
