"""A Pipeline of front-end steps and a model compiled into one C entry point on raw samples: float builds agree
with the float64 pipeline to float32 rounding, on the host and in the Cortex-M4 simulator."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.tree import DecisionTreeClassifier

import tinycc_ml
from tests.conftest import require_target
from tests.features.front_end_data import mfcc_pipeline, motions, sensor_pipeline, tones
from tinycc_ml.errors import CompileError, DataError
from tinycc_ml.features import SensorFeatures
from tinycc_ml.importers.sklearn import from_sklearn


def test_an_mfcc_pipeline_compiles_to_raw_samples_in():
    require_target("host")
    X, y = tones(90)
    pipe = mfcc_pipeline(X, y)
    result = tinycc_ml.compile(pipe)
    predictor = result.load()
    rows, _ = tones(40, seed=1)
    expected = pipe.decision_function(rows)
    # measured 1.7e-6 on scores up to 5: float32 rounding of frames, FFT, mel, log, DCT and the linear model
    assert np.max(np.abs(predictor.decision_function(rows) - expected)) <= 1e-4 * (1 + np.max(np.abs(expected)))
    assert predictor.predict(rows).tolist() == pipe.predict(rows).tolist()
    assert result.output.input_dim == 1024
    assert "front end (Framer -> Window -> PowerSpectrum -> MelFilterBank" in result.report["model"]


@pytest.mark.parametrize("model, window", [("forest", 64), ("nb", 64), ("scaled_logistic", 64), ("nb", 30),
                                           ("nb", 32)])
def test_sensor_pipelines_decide_as_scikit_learn(model, window):
    """Band powers by the FFT (64 samples: the bands' DFT rows would be many), by the DFT rows (32) and of a window
    of no power of two (30)."""
    require_target("host")
    X, y = motions(150, window=window)
    pipe = sensor_pipeline(X, y, model)
    result = tinycc_ml.compile(pipe)
    assert ("power" in result.graph.order()) == (window == 64)
    predictor = result.load()
    rows, _ = motions(60, seed=2, window=window)
    assert predictor.predict(rows).tolist() == pipe.predict(rows).tolist()
    if model != "forest":
        expected = pipe.predict_proba(rows)
        assert np.max(np.abs(predictor.predict_proba(rows) - expected)) <= 1e-4


@pytest.mark.parametrize("sim_target", ["cortex-m4"], indirect=True)
def test_front_ends_run_on_the_m4(sim_target, tmp_path):
    from tinycc_ml.codegen.backend import get_backend

    for name, (X, y), make in [("mfcc", tones(60), mfcc_pipeline), ("sensor", motions(120), sensor_pipeline)]:
        pipe = make(X, y)
        rows = X[:6]
        result = tinycc_ml.compile(pipe, target=sim_target, out_dir=tmp_path / name, name=name)
        run = get_backend(sim_target).simulate(tmp_path / name, result.output, rows)
        assert pipe.classes_[np.asarray(run.predictions)].tolist() == pipe.predict(rows).tolist()
        if name == "mfcc":
            expected = pipe.decision_function(rows)
            assert np.max(np.abs(np.asarray(run.scores) - expected)) <= 1e-4 * (1 + np.max(np.abs(expected)))
        stream = result.report["stream"]
        if name == "mfcc":  # a frame stack: the newest frame's 256 samples and 7 frames of 10 features, at least
            assert stream["frame_stack"].startswith("7 frames of 10 features kept")
            assert stream["state_bytes"] >= 4 * 256 + 4 * 7 * 10
        else:  # no frames: the whole window
            assert stream["frame_stack"] == "none: the front end does not begin with a Framer's frames"
            assert stream["state_bytes"] == 4 * result.output.input_dim + 4
        assert result.report["fit"]["ram_bytes"] >= result.report["stream"]["state_bytes"]


def test_a_front_end_round_trips_through_a_model_file(tmp_path):
    X, y = motions(80)
    pipe = sensor_pipeline(X, y, "nb")
    path = tinycc_ml.save_model(pipe, tmp_path / "motion.npz")
    loaded = tinycc_ml.load_model(path)
    assert loaded.family == "front_end"
    np.testing.assert_array_equal(loaded.scores(X), from_sklearn(pipe).scores(X))
    assert loaded.predict(X).tolist() == pipe.predict(X).tolist()
    assert [type(s).__name__ for s in loaded.steps] == ["SensorFeatures"]
    assert loaded.steps[0].get_params() == pipe[0].get_params() | {"bands": [list(b) for b in pipe[0].bands],
                                                                    "features": list(pipe[0].features)}


def test_integer_builds_and_misplaced_steps_are_refused_by_name():
    X, y = motions(60)
    pipe = sensor_pipeline(X, y, "nb")
    with pytest.raises(CompileError, match="a front end \\(SensorFeatures\\) compiles at precision float or int16 "
                                           "\\(16-bit fixed point\\); precision int8 is not built for it"):
        tinycc_ml.compile(pipe, precision="int8", calibration=X)
    A, a = tones(40)
    with pytest.raises(CompileError, match="FrameNormalizer: with_std=True divides by each frame's spread "
                                           "\\(1 / sqrt\\), which has no fixed-point form; precision int16 is not "
                                           "built"):
        tinycc_ml.compile(mfcc_pipeline(A, a), precision="int16", calibration=A)
    late = make_pipeline(StandardScaler(), SensorFeatures(3, 50.0), DecisionTreeClassifier()).fit(X, y)
    with pytest.raises(CompileError, match="tinycc_ml.features' front-end steps \\(first\\)"):
        tinycc_ml.compile(late)
    with pytest.raises(CompileError, match="stream_hop sets the hop of a front end's stream"):
        tinycc_ml.compile(DecisionTreeClassifier().fit(X, y), stream_hop=4)
    with pytest.raises(DataError, match="stream_hop=65: expected an integer number of samples in \\[1, 64\\]"):
        tinycc_ml.compile(pipe, stream_hop=65)
