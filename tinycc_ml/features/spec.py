"""A front end as a small JSON file, for the command line (``tinycc-ml compile net.tflite --front-end front.json``)
and for keeping a front end beside its network: the steps' classes and parameters and the width of the raw rows.

    {"samples": 16000,
     "steps": [{"Framer": {"frame_length": 512, "hop_length": 320}},
               {"Window": {"frame_length": 512}},
               {"PowerSpectrum": {"n_fft": 512}},
               {"MelFilterBank": {"sample_rate": 16000, "n_fft": 512, "n_mels": 20}},
               {"Log": {"floor": 1.0}}]}

``samples`` is the values of one raw row (a 3-axis sensor window of 128 samples: 384). The steps hold no learnt
state, so the file is the whole front end: ``load_front_end`` gives the fitted Pipeline ``save_front_end`` wrote.
Read as JSON, never unpickled; a bad file is refused with one FrontEndError naming the file, the value and why.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from tinycc_ml.errors import FrontEndError
from tinycc_ml.features.base import FrontEndStep
from tinycc_ml.features.sensor import SensorFeatures
from tinycc_ml.features.spectral import DCT, FrameNormalizer, Framer, Log, MelFilterBank, PowerSpectrum, Window
from tinycc_ml.files import atomic_write_bytes

STEP_CLASSES = {cls.__name__: cls for cls in (Framer, Window, PowerSpectrum, MelFilterBank, Log, DCT,
                                              FrameNormalizer, SensorFeatures)}
MAX_SAMPLES = 1 << 24


def _steps_of(front) -> list[FrontEndStep]:
    from sklearn.pipeline import Pipeline

    steps = [s for _, s in front.steps] if isinstance(front, Pipeline) else list(front) \
        if isinstance(front, (list, tuple)) else [front]
    others = [type(s).__name__ for s in steps if type(s).__name__ not in STEP_CLASSES]
    if others or not steps:
        raise FrontEndError(f"save_front_end: {', '.join(others) or 'no steps'}: a front-end file holds "
                            f"tinycc_ml.features steps only ({', '.join(STEP_CLASSES)})")
    return steps


def _plain(value):
    """get_params() in JSON's types (tuples as lists, numpy scalars as numbers)."""
    if isinstance(value, (list, tuple, np.ndarray)):
        return [_plain(v) for v in value]
    return value.item() if isinstance(value, np.generic) else value


def front_end_json(front) -> str:
    """The file's text for a fitted front end (a Pipeline of tinycc_ml.features steps, a list of them or one)."""
    steps = _steps_of(front)
    if not hasattr(steps[0], "n_features_in_"):
        raise FrontEndError("save_front_end: the front end is not fitted (fit it on raw rows first: the file keeps "
                            "the rows' width)")
    lines = [json.dumps({type(s).__name__: {k: _plain(v) for k, v in s.get_params().items()}}) for s in steps]
    return f'{{"samples": {int(steps[0].n_features_in_)},\n "steps": [\n  ' + ",\n  ".join(lines) + "]}\n"


def save_front_end(front, path) -> Path:
    """Write the fitted front end to ``path`` as JSON (atomically: a reader never sees half a file)."""
    path = Path(path)
    atomic_write_bytes(path, front_end_json(front).encode())
    return path


def load_front_end(path):
    """The fitted Pipeline the file at ``path`` describes; FrontEndError naming the file, the value and the
    problem for anything else (not JSON, an unknown step, a parameter that cannot work, widths that do not chain)."""
    from sklearn.pipeline import make_pipeline

    path = Path(path)
    try:
        spec = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise FrontEndError(f"{path}: cannot read the front-end file: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise FrontEndError(f"{path}: not a JSON front-end file ({exc})") from None
    if not isinstance(spec, dict) or set(spec) != {"samples", "steps"}:
        keys = sorted(spec) if isinstance(spec, dict) else type(spec).__name__
        raise FrontEndError(f"{path}: expected an object with 'samples' and 'steps', found {keys}")
    samples, specs = spec["samples"], spec["steps"]
    if isinstance(samples, bool) or not isinstance(samples, int) or not 1 <= samples <= MAX_SAMPLES:
        raise FrontEndError(f"{path}: samples={samples!r}: expected the raw row's width, an integer in "
                            f"[1, {MAX_SAMPLES}]")
    if not isinstance(specs, list) or not specs:
        raise FrontEndError(f"{path}: steps={specs!r}: expected a list of steps, each {{\"Class\": {{params}}}}")
    steps = []
    for i, step in enumerate(specs):
        if not (isinstance(step, dict) and len(step) == 1):
            raise FrontEndError(f"{path}: step {i} {step!r}: expected one {{\"Class\": {{params}}}}")
        (name, params), = step.items()
        if name not in STEP_CLASSES:
            raise FrontEndError(f"{path}: step {i} {name!r}: not a front-end step (one of {', '.join(STEP_CLASSES)})")
        if not isinstance(params, dict):
            raise FrontEndError(f"{path}: step {i} {name}: parameters {params!r} are not an object")
        known = STEP_CLASSES[name]().get_params()
        unknown = sorted(set(params) - set(known))
        if unknown:
            raise FrontEndError(f"{path}: step {i} {name}: unknown parameter {unknown[0]!r} (it takes "
                                f"{', '.join(known)})")
        steps.append(STEP_CLASSES[name](**{k: _tuples(v) for k, v in params.items()}))
    try:
        return make_pipeline(*steps).fit(np.zeros((1, samples)))
    except (TypeError, ValueError) as exc:  # FrontEndError is a ValueError
        raise FrontEndError(f"{path}: {exc}") from None


def _tuples(value):
    """JSON's lists back to the tuples the steps' parameters are (SensorFeatures' features and bands)."""
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value
