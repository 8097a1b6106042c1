"""A front end as a JSON file (tinycc_ml.features.save_front_end / load_front_end, docs/guide/front-ends.md) and
``tinycc-ml compile/report MODEL --front-end FILE``: the file gives back the front end it was written from (the same
features on any rows, the same text again), the command line's build is the Python API's byte for byte, and a file
that cannot work is refused in one line naming the file and the value, with nothing written."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.pipeline import make_pipeline

import tinycc_ml
from tests.features.front_end_data import tones
from tests.features.front_end_networks import int8_cnn, log_mel
from tests.test_cli import one_error_line
from tinycc_ml import cli
from tinycc_ml.errors import FrontEndError
from tinycc_ml.features import (
    DCT,
    FrameNormalizer,
    Framer,
    Log,
    MelFilterBank,
    PowerSpectrum,
    SensorFeatures,
    Window,
    load_front_end,
    save_front_end,
)
from tinycc_ml.features.spec import front_end_json


# At most 11 bands: 12 htk bands over a 32-point FFT leave the lowest without a bin (refused; test_front_end_steps)
@settings(max_examples=40, deadline=None)
@given(log2_fft=st.integers(5, 9), frame_part=st.sampled_from([1.0, 0.75, 0.5]), hop_part=st.sampled_from([1.0, 0.5,
                                                                                                              0.25]),
       mels=st.integers(2, 11), window=st.sampled_from(["hann", "hamming"]), periodic=st.booleans(),
       scale=st.sampled_from(["htk", "slaney"]), coefficients=st.integers(0, 6), frames=st.integers(1, 4),
       normalise=st.booleans())
def test_a_saved_front_end_loads_as_the_same_front_end(tmp_path_factory, log2_fft, frame_part, hop_part, mels,
                                                      window, periodic, scale, coefficients, frames, normalise):
    n_fft = 1 << log2_fft
    length = max(4, int(n_fft * frame_part))
    hop = max(1, int(length * hop_part))
    steps = [Framer(length, hop), Window(length, window, periodic), PowerSpectrum(n_fft, frame_length=length),
             MelFilterBank(8000.0, n_fft, mels, scale=scale), Log(floor=1e-3)]
    steps += [DCT(mels, min(coefficients, mels))] if coefficients else []
    steps += [FrameNormalizer(min(coefficients, mels) if coefficients else mels)] if normalise else []
    width = length + (frames - 1) * hop
    front = make_pipeline(*steps).fit(np.zeros((1, width)))
    path = tmp_path_factory.mktemp("front") / "front.json"
    save_front_end(front, path)
    loaded = load_front_end(path)
    rows = np.random.default_rng(log2_fft + mels).normal(0, 1000, (3, width))
    assert np.array_equal(loaded.transform(rows), front.transform(rows))
    assert front_end_json(loaded) == path.read_text()


def test_a_sensor_front_end_round_trips_its_tuples(tmp_path):
    front = make_pipeline(SensorFeatures(3, 50.0, bands=((1.0, 5.0), (5.0, 12.0)))).fit(np.zeros((1, 384)))
    loaded = load_front_end(save_front_end(front, tmp_path / "sensor.json"))
    assert loaded.steps[0][1].get_params() == front.steps[0][1].get_params()
    rows = np.random.default_rng(0).normal(0, 100, (2, 384))
    assert np.array_equal(loaded.transform(rows), front.transform(rows))


def _network(tmp_path):
    X, _ = tones(30)
    front = log_mel(X)
    int8_cnn(tmp_path / "kws.tflite")
    save_front_end(front, tmp_path / "front.json")
    np.savez(tmp_path / "rows.npz", X_test=X[:8], y_test=np.zeros(8, np.int64), X_train=X)
    return front


def test_compile_with_a_front_end_file_is_the_python_build(tmp_path, capsys):
    front = _network(tmp_path)
    out = tmp_path / "out"
    assert cli.main(["compile", str(tmp_path / "kws.tflite"), "--front-end", str(tmp_path / "front.json"), "-o",
                     str(out), "--name", "kws"]) == 0
    python = tinycc_ml.compile(tmp_path / "kws.tflite", front_end=front, name="kws")
    assert {p.name: p.read_text() for p in out.iterdir()} == python.files
    assert "int kws_feed(" in (out / "kws.h").read_text()


def test_report_with_a_front_end_file_runs_the_raw_rows(tmp_path, capsys):
    _network(tmp_path)
    assert cli.main(["report", str(tmp_path / "kws.tflite"), "--front-end", str(tmp_path / "front.json"), "--data",
                     str(tmp_path / "rows.npz"), "--target", "host", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["rows"] == 8 and report["agreement_with_float"] == 1.0


BAD_FILES = {
    "not JSON": ("{samples: 16000", "not a JSON front-end file"),
    "a list": ("[1, 2]", "expected an object with 'samples' and 'steps'"),
    "samples": ('{"samples": -3, "steps": [{"Log": {}}]}', "samples=-3"),
    "no steps": ('{"samples": 1024, "steps": []}', "steps=[]"),
    "unknown step": ('{"samples": 1024, "steps": [{"Spectrogram": {}}]}', "step 0 'Spectrogram': not a front-end"),
    "unknown parameter": ('{"samples": 1024, "steps": [{"Framer": {"frame_len": 256}}]}',
                          "unknown parameter 'frame_len'"),
    "n_fft": ('{"samples": 1024, "steps": [{"Framer": {"frame_length": 500, "hop_length": 250}}, '
              '{"PowerSpectrum": {"n_fft": 500}}]}', "n_fft=500"),
    "hop": ('{"samples": 1024, "steps": [{"Framer": {"frame_length": 256, "hop_length": 300}}]}',
            "hop_length=300 is longer than frame_length=256"),
    "mels": ('{"samples": 1024, "steps": [{"Framer": {"frame_length": 256, "hop_length": 128}}, '
             '{"PowerSpectrum": {"n_fft": 256}}, {"MelFilterBank": {"sample_rate": 8000, "n_fft": 256, '
             '"n_mels": 200}}]}', "n_mels=200"),
    "short rows": ('{"samples": 100, "steps": [{"Framer": {"frame_length": 256, "hop_length": 128}}]}',
                   "shorter than frame_length=256"),
}


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_a_bad_front_end_file_is_one_line_naming_it(case, tmp_path, capsys):
    _network(tmp_path)
    text, says = BAD_FILES[case]
    (tmp_path / "bad.json").write_text(text)
    out = tmp_path / "out"
    assert cli.main(["compile", str(tmp_path / "kws.tflite"), "--front-end", str(tmp_path / "bad.json"), "-o",
                     str(out)]) == 2
    line = one_error_line(capsys)
    assert str(tmp_path / "bad.json") in line and says in line, line
    assert not out.exists()
    with pytest.raises(FrontEndError) as raised:
        load_front_end(tmp_path / "bad.json")
    assert isinstance(raised.value, ValueError) and says in str(raised.value)


def test_a_front_end_the_network_does_not_take_is_refused_naming_both(tmp_path, capsys):
    _network(tmp_path)
    wider = make_pipeline(Framer(256, 128), Window(256), PowerSpectrum(256), MelFilterBank(8000, 256, 20),
                          Log()).fit(np.zeros((1, 1024)))
    save_front_end(wider, tmp_path / "wide.json")
    assert cli.main(["compile", str(tmp_path / "kws.tflite"), "--front-end", str(tmp_path / "wide.json"), "-o",
                     str(tmp_path / "out")]) == 2
    line = one_error_line(capsys)
    assert "140 features" in line and "112 values" in line, line
    assert not (tmp_path / "out").exists()


def test_save_front_end_refuses_what_is_not_a_fitted_front_end(tmp_path):
    from sklearn.preprocessing import StandardScaler

    with pytest.raises(FrontEndError, match="StandardScaler"):
        save_front_end(make_pipeline(StandardScaler()), tmp_path / "x.json")
    with pytest.raises(FrontEndError, match="not fitted"):
        save_front_end(make_pipeline(Log()), tmp_path / "x.json")
    assert not (tmp_path / "x.json").exists()
