"""The keyword-spotting pipeline of benchmarks/kws_pipeline.py (docs/tutorials/kws-m4.md) at a small size: the
committed synthetic clips, the log-mel front end before the trained keyword network (an ONNX file), the float build
deciding as the Python pipeline (onnxruntime on the front end's features) on held-out voices."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np

import tinycc_ml
from tests.conftest import require_target

BENCHMARK = Path(__file__).resolve().parents[2] / "benchmarks" / "kws_pipeline.py"


def _benchmark():
    spec = importlib.util.spec_from_file_location("kws_pipeline", BENCHMARK)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_clips_are_what_the_readme_says():
    data = np.load(BENCHMARK.parents[1] / "data" / "keywords" / "keywords.npz")
    assert data["clips"].shape == (40, 4000) and data["clips"].dtype == np.int16 and int(data["rate"]) == 8000
    assert data["words"].tolist() == ["yes", "no", "up", "down"]
    assert np.bincount(data["labels"]).tolist() == [10] * 4 and len(set(data["voices"].tolist())) == 10
    assert np.all(np.abs(data["clips"]).max(axis=1) > 5000)  # every clip holds a spoken word


def test_the_float_keyword_build_decides_as_the_python_pipeline(tmp_path):
    require_target("host")
    kws = _benchmark()
    X, y = kws.keyword_rows(12, slice(0, -kws.HELD_OUT), seed=0)
    X_test, y_test = kws.keyword_rows(10, slice(-kws.HELD_OUT, None), seed=1)
    front = kws.log_mel_front_end(X)
    kws.keyword_network(front.transform(X), y, tmp_path / "keywords.onnx", hidden=16)
    python = kws.onnxruntime_labels(tmp_path / "keywords.onnx", front.transform(X_test))
    predictor = tinycc_ml.compile(tmp_path / "keywords.onnx", front_end=front, name="kws").load()
    assert predictor.predict(X_test).tolist() == python.tolist()
    assert np.mean(python == y_test) >= 0.8  # held-out voices: the network learnt the words, not the voices
