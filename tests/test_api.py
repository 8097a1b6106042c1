"""The Python API: tinycc_ml.compile on models, paths and estimators; the report; and writing
files all-or-nothing."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tinycc_ml
from tinycc_ml import api
from tinycc_ml.errors import CompileError, DataError, ModelFileError, TinyccError
from tinycc_ml.host.batch import VEC
from tinycc_ml.importers.edgeml import save_edgeml_protonn
from tinycc_ml.models.protonn import ProtoNNModel


def make_model(seed=0, D=10, d=4, m=6, L=3, normalise=True) -> ProtoNNModel:
    rng = np.random.default_rng(seed)
    mean = rng.normal(size=D) if normalise else None
    std = rng.uniform(0.5, 2, size=D) if normalise else None
    return ProtoNNModel(rng.normal(size=(d, D)), rng.normal(size=(d, m)), rng.normal(size=(L, m)), 0.5, mean, std)


X = np.random.default_rng(1).normal(size=(40, 10))


def test_compile_in_memory():
    model = make_model()
    result = tinycc_ml.compile(model)
    assert isinstance(result, tinycc_ml.CompileResult)
    assert result.out_dir is None and result.paths == []
    assert set(result.files) == {"protonn.h", "protonn.c"}
    assert result.target == "host" and result.precision == "float" and result.prefix == "protonn"
    predictor = result.load()
    np.testing.assert_array_equal(predictor.predict(X), model.predict(X))
    np.testing.assert_allclose(predictor.scores(X), model.scores(X), rtol=1e-4,
                               atol=1e-5 * np.abs(model.scores(X)).max())


def test_compile_from_paths_npz_and_edgeml(tmp_path):
    model = make_model(2)
    npz = model.save(tmp_path / "m.npz")
    save_edgeml_protonn(model, tmp_path / "edgeml")
    from_model = tinycc_ml.compile(model, name="m").files
    assert tinycc_ml.compile(npz, name="m").files == from_model
    assert tinycc_ml.compile(str(npz), name="m").files == from_model
    assert tinycc_ml.compile(tmp_path / "edgeml", name="m").files == from_model


class FittedEstimator:
    """Anything with to_model() compiles (the trainers are such estimators)."""

    def __init__(self, model):
        self.model = model
        self.calls = 0

    def to_model(self):
        self.calls += 1
        return self.model


def test_compile_an_estimator_like_object():
    model = make_model(3)
    est = FittedEstimator(model)
    result = tinycc_ml.compile(est, name="est")
    assert est.calls == 1
    assert result.files == tinycc_ml.compile(model, name="est").files


def test_compile_a_trained_protonn_classifier():
    from sklearn.datasets import load_iris

    from tinycc_ml.models.protonn_trainer import ProtoNNClassifier

    Xi, yi = load_iris(return_X_y=True)
    clf = ProtoNNClassifier(projection_dim=3, n_prototypes=6, n_iter=1, epochs=1, random_state=0,
                            verbose=0).fit(Xi, yi)
    predictor = tinycc_ml.compile(clf, name="iris").load()
    np.testing.assert_array_equal(predictor.predict(Xi), clf.to_model().predict(Xi))


def test_not_a_model():
    with pytest.raises(CompileError, match="dict"):
        tinycc_ml.compile({"W": 1})


def test_report_fields():
    model = make_model(4, D=10, d=4, m=6, L=3)
    result = tinycc_ml.compile(model, name="rep")
    report = result.report
    assert report["target"] == "host" and report["precision"] == "float"
    assert "protonn" in report["model"] and "W(4, 10)" in report["model"]
    assert any(line.startswith("fold_input_affine") for line in report["passes"])
    # float code keeps the mean subtraction (see fold_input_affine): W (times 1/std), mean, B, Z; the host's
    # batch kernels add W transposed and B with their rows padded to whole vectors of VEC floats (host/batch.py)
    batch_tables = 4 * (10 * VEC + 4 * VEC)
    assert report["const_bytes"] == 4 * (4 * 10 + 10 + 4 * 6 + 3 * 6) + batch_tables
    assert {k: v for k, v in result.output.const_arrays.items() if k.endswith(("_tp", "_p"))} == \
        {"rep_W_folded_tp": 4 * 10 * VEC, "rep_B_p": 4 * 4 * VEC}
    # intermediates: at most the centred input, the projection, the distances/kernels and scores
    assert 0 < report["ram_bytes"] <= 4 * (10 + 4 + 6 + 6 + 3)
    # the file's header states the model's own constants; the batch tables follow in the batch section
    assert f"Constants: {report['const_bytes'] - batch_tables} bytes" in result.files["rep.c"]


def test_options_are_checked_before_anything_is_written(tmp_path):
    model = make_model()
    out = tmp_path / "out"
    bad = [
        (dict(target="nowhere"), CompileError, "nowhere"),
        (dict(name="9lives"), CompileError, "9lives"),
        (dict(name="my-model"), CompileError, "my-model"),
        (dict(name="static"), CompileError, "static"),
        (dict(precision="float16"), CompileError, "float16"),
        (dict(precision="int16"), CompileError, "calibration"),
        (dict(precision="int16", calibration=np.zeros((50, 9))), DataError, "9"),
        (dict(precision="int16", calibration=np.full((50, 10), np.nan)), DataError, "NaN"),
        (dict(precision="int16", calibration=np.zeros((3, 10))), DataError, "3 rows"),
        (dict(precision="int16", calibration=np.array([["a"] * 10] * 20)), DataError, "dtype"),
        (dict(precision="int16", calibration=np.array([[None] * 10] * 20)), DataError, "dtype"),
    ]
    for kwargs, error, words in bad:
        with pytest.raises(error, match=words):
            tinycc_ml.compile(model, out_dir=out, **kwargs)
        assert issubclass(error, TinyccError)
        assert not out.exists(), kwargs
    assert list(tmp_path.iterdir()) == []


def test_bad_model_paths():
    with pytest.raises(ModelFileError, match="missing"):
        tinycc_ml.compile("/nonexistent/missing.npz")


class Boom(Exception):
    pass


def failing_writes(monkeypatch, fail_on: str):
    """Make every Path.write_text/write_bytes of a file named ``fail_on`` fail like a full disk."""
    for method in ("write_text", "write_bytes"):
        real = getattr(Path, method)

        def write(self, *args, real=real, **kwargs):
            if self.name == fail_on:
                raise Boom(f"disk full while writing {self.name}")
            return real(self, *args, **kwargs)

        monkeypatch.setattr(Path, method, write)


def test_write_files_is_all_or_nothing_for_a_new_directory(tmp_path, monkeypatch):
    failing_writes(monkeypatch, "b.c")
    with pytest.raises(Boom):
        api.write_files(tmp_path / "out", {"a.h": "A", "b.c": "B"})
    assert list(tmp_path.iterdir()) == []  # no directory, no staging left behind


def test_write_files_leaves_an_existing_directory_untouched_on_failure(tmp_path, monkeypatch):
    out = tmp_path / "out"
    out.mkdir()
    (out / "a.h").write_text("old A")
    (out / "keep.txt").write_text("mine")
    failing_writes(monkeypatch, "b.c")
    with pytest.raises(Boom):
        api.write_files(out, {"a.h": "new A", "b.c": "new B"})
    assert (out / "a.h").read_text() == "old A"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    monkeypatch.undo()
    api.write_files(out, {"a.h": "new A", "b.c": "new B"})
    assert {p.name: p.read_text() for p in out.iterdir()} == {"a.h": "new A", "b.c": "new B", "keep.txt": "mine"}


def test_compile_failure_mid_emit_leaves_no_directory(tmp_path, monkeypatch):
    from tinycc_ml.host import backend as host

    def broken_emit(*args, **kwargs):
        raise CompileError("emitter gave up")

    monkeypatch.setattr(host.HostBackend, "emit", broken_emit)
    with pytest.raises(CompileError):
        tinycc_ml.compile(make_model(), out_dir=tmp_path / "out")
    assert list(tmp_path.iterdir()) == []


def test_compile_into_a_file_path_is_refused(tmp_path):
    target = tmp_path / "file"
    target.write_text("x")
    with pytest.raises(CompileError, match="not a directory"):
        tinycc_ml.compile(make_model(), out_dir=target)
    assert target.read_text() == "x"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


def test_written_result_loads_from_its_folder(tmp_path):
    model = make_model(5)
    result = tinycc_ml.compile(model, out_dir=tmp_path / "o", name="w")
    assert [p.name for p in result.paths] == ["w.h", "w.c"]
    assert all(p.read_text() == result.files[p.name] for p in result.paths)
    np.testing.assert_array_equal(result.load().predict(X), model.predict(X))


def test_model_without_normalisation():
    model = make_model(6, normalise=False)
    result = tinycc_ml.compile(model)
    assert not any(line.startswith("fold_input_affine") for line in result.report["passes"])
    np.testing.assert_array_equal(result.load().predict(X), model.predict(X))


def test_python_api_writes_the_firmware_project_and_arduino_layouts(tmp_path, capsys):
    """compile(layout=...) gives the same files as the command line's --project / --arduino."""
    from sklearn.datasets import load_digits

    from tinycc_ml import cli
    from tinycc_ml.models.protonn import init_protonn

    X, y = load_digits(return_X_y=True)
    model = init_protonn(X[:300], y[:300], projection_dim=6, prototypes_per_class=1)
    path = model.save(tmp_path / "kws.npz")
    np.savez(tmp_path / "cal.npz", X_train=X[:300])
    for layout, flag in (("project", "--project"), ("arduino", "--arduino")):
        result = tinycc_ml.compile(model, target="avr", precision="int16", calibration=X[:300], name="kws",
                                   layout=layout, out_dir=tmp_path / f"api_{layout}")
        assert cli.main(["compile", str(path), "--target", "avr", "--calibration", str(tmp_path / "cal.npz"),
                         "--name", "kws", flag, "-o", str(tmp_path / f"cli_{layout}")]) == 0
        cli_files = {p.relative_to(tmp_path / f"cli_{layout}").as_posix(): p.read_text()
                     for p in (tmp_path / f"cli_{layout}").rglob("*") if p.is_file()}
        assert cli_files == result.files and all(p.is_file() for p in result.paths)
    with pytest.raises(CompileError, match="cannot write a standalone firmware project"):
        tinycc_ml.compile(model, target="host", layout="project", calibration=X[:300])
    with pytest.raises(CompileError, match="layout 'zip' is not one of"):
        tinycc_ml.compile(model, layout="zip")


def test_compile_ignores_the_callers_numpy_error_state():
    """A library that sets numpy.seterr(all="raise") (emlearn does, on import) must not break compiles whose
    passes meet float32 underflow (exp of far distances): the same files as under numpy's defaults."""
    from tinycc_ml.models.protonn import ProtoNNModel

    rng = np.random.default_rng(0)
    model = ProtoNNModel(rng.normal(size=(4, 10)), 40 * rng.normal(size=(4, 12)), rng.normal(size=(3, 12)), 2.0)
    X = rng.normal(size=(64, 10))
    expected = tinycc_ml.compile(model, precision="int16", calibration=X).files
    with np.errstate(all="raise"):
        assert tinycc_ml.compile(model, precision="int16", calibration=X).files == expected
        assert tinycc_ml.compile(model).files == tinycc_ml.compile(model).files


def test_an_unknown_optimize_goal_is_one_clear_error_and_cli_compile_takes_the_flag(tmp_path):
    """optimize is "size" or "speed"; anything else is refused naming the value; --optimize speed on the command
    line writes what compile(optimize="speed") writes (a network's widened weights on the Cortex-M4)."""
    from tests.tflite_builder import NetBuilder
    from tinycc_ml import cli

    n = NetBuilder(5)
    path = tmp_path / "net.tflite"
    path.write_bytes(n.finish(n.conv(n.input((5, 5, 4)), 4, (3, 3))))
    with pytest.raises(CompileError, match="optimize='fast' is not one of size, speed"):
        tinycc_ml.compile(path, target="cortex-m4", optimize="fast")
    result = tinycc_ml.compile(path, target="cortex-m4", name="net", optimize="speed")
    assert cli.main(["compile", str(path), "--target", "cortex-m4", "--name", "net", "--optimize", "speed",
                     "-o", str(tmp_path / "cli")]) == 0
    assert (tmp_path / "cli" / "net.c").read_text() == result.files["net.c"]
    assert "widened to int16" in result.files["net.c"]
    assert "widened to int16" not in tinycc_ml.compile(path, target="cortex-m4", name="net").files["net.c"]
