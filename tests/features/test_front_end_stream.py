"""<name>_feed: a stream cut into chunks of any size (one sample, more than a window at once) decides on exactly
the windows ``stream_windows`` cuts from the whole signal, as the Pipeline decides on them."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import tinycc_ml
from tests.conftest import require_target
from tests.features.front_end_data import SENSOR_WINDOW, motions, sensor_pipeline
from tinycc_ml.features import stream_windows

_BUILDS: dict = {}


def _build(hop: int):
    """(pipeline, host predictor) of a sensor pipeline streamed every ``hop`` samples (built once per hop)."""
    if hop not in _BUILDS:
        X, y = motions(120)
        pipe = sensor_pipeline(X, y, "nb")
        _BUILDS[hop] = pipe, tinycc_ml.compile(pipe, name=f"stream{hop}", stream_hop=hop).load()
    return _BUILDS[hop]


def _signal(seed: int, windows: int) -> np.ndarray:
    """Motions one after another: a stream whose decisions change."""
    X, _ = motions(windows, seed=seed)
    return X.ravel()


@settings(max_examples=30, deadline=None)
@given(hop=st.sampled_from([1, 7, 16, SENSOR_WINDOW]), seed=st.integers(0, 1000),
       cuts=st.lists(st.integers(1, 3 * 3 * SENSOR_WINDOW), min_size=1, max_size=12), single=st.booleans())
def test_any_chunks_give_the_whole_signals_decisions(hop, seed, cuts, single):
    require_target("host")
    pipe, predictor = _build(hop)
    signal = _signal(seed, 3)
    expected = pipe.predict(stream_windows(signal, SENSOR_WINDOW, hop, 3))
    predictor.reset()
    if single:  # one value at a time
        got = [d for v in signal[:3 * (SENSOR_WINDOW + 2 * hop) + 1] for d in predictor.feed([v])]
        expected = expected[:3]
    else:
        bounds = np.cumsum(cuts)
        got = [d for chunk in np.split(signal, bounds[bounds < signal.size]) for d in predictor.feed(chunk)]
    assert list(got) == expected.tolist()


def test_nothing_is_decided_before_a_whole_window_and_reset_starts_over():
    require_target("host")
    pipe, predictor = _build(16)
    signal = _signal(5, 2)
    predictor.reset()
    assert len(predictor.feed(signal[:3 * SENSOR_WINDOW - 1])) == 0  # one value short of the first window
    assert predictor.feed(signal[3 * SENSOR_WINDOW - 1:3 * SENSOR_WINDOW]).tolist() == \
        pipe.predict(signal[None, :3 * SENSOR_WINDOW]).tolist()
    predictor.reset()
    assert len(predictor.feed(signal[:3 * SENSOR_WINDOW - 1])) == 0


def test_raw_int16_counts_decide_as_their_float_values():
    """<name>_feed_i16: a sensor's counts, each exact as a float, give the float stream's decisions."""
    require_target("host")
    _, predictor = _build(16)
    counts = np.round(_signal(7, 3) * 1000).astype(np.int16)
    predictor.reset()
    as_floats = predictor.feed(counts.astype(np.float64))
    predictor.reset()
    assert predictor.feed(counts).tolist() == as_floats.tolist() and len(as_floats) == 9
