"""The boosting libraries' answers on a model file, computed in a worker process (tests/booster_file_fuzzing.py):
their own loaders can crash or hang on a mutated file (XGBoost: a segmentation fault on a hand-edited JSON;
LightGBM: a fatal error ending the process), which must not end the fuzzer. A forkserver preloading the
libraries makes a replacement worker cheap."""

from __future__ import annotations

import json
import warnings

import numpy as np

_POOL = None
LIBRARY_SECONDS = 10


def in_library_process(function, *args):
    """function(*args) in the libraries' worker process; None when the library raised, crashed or hung."""
    global _POOL
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures import TimeoutError as FutureTimeout
    from concurrent.futures.process import BrokenProcessPool

    if _POOL is None:
        import atexit

        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(["numpy", "xgboost", "lightgbm", "tests.library_worker"])
        _POOL = ProcessPoolExecutor(max_workers=1, mp_context=context)
        atexit.register(_POOL.shutdown, wait=False, cancel_futures=True)
    try:
        return _POOL.submit(function, *args).result(timeout=LIBRARY_SECONDS)
    except (BrokenProcessPool, FutureTimeout):
        for process in list((getattr(_POOL, "_processes", None) or {}).values()):
            process.kill()
        _POOL.shutdown(wait=False, cancel_futures=True)
        _POOL = None
        return None
    except Exception:  # noqa: BLE001 - the library refuses the file
        return None


def xgboost_answers(path: str, X: np.ndarray, input_dim: int):
    """(margins, values, objective) XGBoost's Booster gives on X (up to best_iteration, as the estimators'
    predict), or None where it reads another number of features."""
    import xgboost

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        booster = xgboost.Booster(model_file=path)
        objective = json.loads(booster.save_config())["learner"]["objective"]["name"]
        if booster.num_features() != input_dim:
            return None
        best = booster.attributes().get("best_iteration")
        iterations = (0, int(best) + 1) if best is not None else (0, 0)
        margin = booster.predict(xgboost.DMatrix(X), output_margin=True, iteration_range=iterations)
        value = booster.predict(xgboost.DMatrix(X), iteration_range=iterations)
    return margin, value, objective


def lightgbm_answers(path: str, X: np.ndarray, input_dim: int):
    """(raw scores, predict's values, "") LightGBM's Booster gives on X, or None for another feature count."""
    import lightgbm

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        booster = lightgbm.Booster(model_file=path)
        if booster.num_feature() != input_dim:
            return None
        return booster.predict(X, raw_score=True), booster.predict(X), ""
