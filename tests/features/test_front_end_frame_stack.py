"""The frame stack of <name>_feed (passes/frame_stack.py): each frame's features computed once, when its last sample
arrives, and the model run on the stack every hop. Float (MFCC with a per-frame mean and variance normalisation)
and int16 builds (MFCC with a per-frame mean removal) decide on every window of a stream cut into any chunks as
<name>_predict decides on it; a stream hop that is not a whole number of frame hops keeps the whole window."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline

import tinycc_ml
from tests.conftest import require_target
from tests.features.front_end_data import AUDIO_RATE, AUDIO_WINDOW, tones
from tinycc_ml.features import DCT, FrameNormalizer, Framer, Log, MelFilterBank, PowerSpectrum, Window, stream_windows
from tinycc_ml.passes.frame_stack import split_frame_stack

_BUILDS: dict = {}


def _pipeline(with_std: bool):
    X, y = tones(90)
    X = np.round(X * 3000)  # int16 counts
    return make_pipeline(Framer(256, 128), Window(256), PowerSpectrum(256), MelFilterBank(AUDIO_RATE, 256, 20),
                         Log(floor=1.0), DCT(20, 10), FrameNormalizer(10, with_std=with_std),
                         LogisticRegression(max_iter=3000)).fit(X, y), X


def _build(precision: str, hop: int):
    key = precision, hop
    if key not in _BUILDS:
        pipe, X = _pipeline(with_std=precision == "float")
        options = {"calibration": X[::3]} if precision != "float" else {}
        _BUILDS[key] = tinycc_ml.compile(pipe, name=f"stack_{precision}_{hop}", precision=precision, stream_hop=hop,
                                         **options)
    return _BUILDS[key]


def _signal(seed: int) -> np.ndarray:
    return np.round(tones(3, seed=seed)[0].ravel() * 3000)


@settings(max_examples=12, deadline=None)
@given(precision=st.sampled_from(["float", "int16"]), hop=st.sampled_from([128, 256]), seed=st.integers(0, 500),
       cuts=st.lists(st.integers(1, 2 * AUDIO_WINDOW), min_size=1, max_size=8))
def test_the_stacked_stream_decides_as_predict_on_every_window(precision, hop, seed, cuts):
    require_target("host")
    result = _build(precision, hop)
    predictor = result.load()
    signal = _signal(seed)
    windows = stream_windows(signal, AUDIO_WINDOW, hop)
    expected = predictor.predict(windows)  # float samples quantised by feed as predict quantises them
    predictor.reset()
    bounds = np.cumsum(cuts)
    got = [d for chunk in np.split(signal, bounds[bounds < signal.size]) for d in predictor.feed(chunk)]
    assert got == expected.tolist() and len(got) == len(windows) == 1 + (signal.size - AUDIO_WINDOW) // hop


@settings(max_examples=6, deadline=None)
@given(seed=st.integers(0, 500), scale=st.sampled_from([0.03, 0.1, 3.3]),
       cuts=st.lists(st.integers(1, 2 * AUDIO_WINDOW), min_size=1, max_size=6))
def test_an_int16_stream_takes_what_predict_takes_and_its_codes_through_feed_raw(seed, scale, cuts):
    """Float samples are quantised with the input scale, as predict quantises them, not cast to codes (quiet ones
    cast as they are decide otherwise in most windows; loud ones are beyond the input's range); the codes themselves
    go through feed_raw, as rows through run_raw."""
    require_target("host")
    predictor = _build("int16", 128).load()
    signal = tones(3, seed=seed)[0].ravel() * 3000 * scale
    windows = stream_windows(signal, AUDIO_WINDOW, 128)
    bounds = np.cumsum(cuts)
    chunks = np.split(signal, bounds[bounds < signal.size])
    predictor.reset()
    got = [d for chunk in chunks for d in predictor.feed(chunk)]
    assert got == predictor.predict(windows).tolist() and len(got) == len(windows)
    codes = predictor.quantise(signal[None, :AUDIO_WINDOW])[0]  # one window's codes: the first of the stream
    predictor.reset()
    assert predictor.feed_raw(codes).tolist() == np.asarray(predictor.classes)[predictor.run_raw(codes)[1]].tolist()
    with pytest.raises(ValueError, match="stream value 0 is 40000"):
        predictor.feed_raw([40000])


@pytest.mark.parametrize("precision", ["float", "int16"])
def test_each_frame_is_computed_once_and_its_state_is_counted(precision):
    result = _build(precision, 128)
    stream = result.report["stream"]
    assert stream["frame_stack"].startswith("7 frames of 10 features kept; one frame of 256 values computed every 128")
    source = result.files[f"stack_{precision}_128.c"]
    feed = source[source.index(f"static int stack_{precision}_128_feed_one"):]
    assert "_frame_scores(" in feed and "_stack_predict(" in feed and "_128_predict(" not in feed
    value_bytes = 4 if precision == "float" else 2
    assert stream["state_bytes"] >= 256 * value_bytes + 7 * 10 * value_bytes  # the frame and the stack, at least


@pytest.mark.parametrize("precision", ["float", "int16"])
def test_the_stream_parts_store_no_constant_predict_stores(precision):
    """The frame and stack parts' tables and weights equal to the window build's are #defines of its arrays: no two
    constant arrays of the C hold the same elements (a firmware calling _predict and _feed stores each once), and
    the framer's copy reads no table of positions."""
    import re

    source = _build(precision, 128).files[f"stack_{precision}_128.c"]
    arrays = re.findall(r"^static const (\w+) (\w+)\[(\d+)\][^=]*= \{\n(.*?)\n\};", source, re.M | re.S)
    contents = [(ctype, length, body) for ctype, _, length, body in arrays]
    assert len(set(contents)) == len(contents), [name for *_, name in arrays]
    shared = re.findall(r"^#define stack_\w+_128_(?:frame|stack)_(\w+) stack_\w+_128_\1$", source, re.M)
    assert any(name.startswith("window") for name in shared) and len(shared) >= 4, shared
    assert "_indices[" not in source


def test_a_hop_between_frames_keeps_the_whole_window_and_says_why():
    require_target("host")
    result = _build("float", 64)
    assert result.report["stream"]["frame_stack"].startswith("none: the stream's hop (64 values) is not a whole "
                                                             "number of the frames' hop (128)")
    predictor = result.load()
    signal = _signal(3)
    predictor.reset()
    assert predictor.feed(signal).tolist() == predictor.predict(stream_windows(signal, AUDIO_WINDOW, 64)).tolist()


def test_a_front_end_without_frames_has_no_stack():
    from tinycc_ml.ir.graph import Graph
    from tinycc_ml.models.lowering import add_input

    g = Graph()
    x = add_input(g, 8)
    g.set_output("scores", g.add("log", [x], name="log"))
    assert split_frame_stack(g) == "the front end does not begin with a Framer's frames"


@pytest.mark.parametrize("target", ["avr", "cortex-m0"])
def test_small_framed_front_ends_keep_a_stack_on_the_small_chips(target):
    """16-sample frames every 8 of a 64-sample sensor axis: the stack's two parts build for the chip (its compiler,
    -Werror) and its state is in the fit check's RAM."""
    from sklearn.naive_bayes import GaussianNB

    from tests.features.front_end_data import motions

    require_target(target)
    X, y = motions(150)
    X = X[:, ::3]
    pipe = make_pipeline(Framer(16, 8), Window(16), PowerSpectrum(16), Log(floor=1e-3), GaussianNB()).fit(X, y)
    result = tinycc_ml.compile(pipe, target=target, precision="int16", calibration=X, name="axis")
    stream = result.report["stream"]
    assert stream["frame_stack"] == "7 frames of 9 features kept; one frame of 16 values computed every 8"
    assert 2 * 16 + 2 * 7 * 9 <= stream["state_bytes"] <= result.report["fit"]["ram_bytes"]
