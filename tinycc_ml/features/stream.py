"""The whole-signal reference of streaming: the windows ``<name>_feed`` runs the model on."""

from __future__ import annotations

import numpy as np

from tinycc_ml.errors import DataError


def stream_windows(signal, window: int, hop: int, values_per_sample: int = 1) -> np.ndarray:
    """The windows a stream of ``signal`` decides on: ``window`` samples (of ``values_per_sample`` interleaved values
    each) ending at every ``hop``-th sample once a whole window has arrived, as rows (k, window * values_per_sample).
    ``<name>_feed`` (and the host predictor's ``feed``) decide on exactly these, whatever the chunks."""
    values = np.asarray(signal, dtype=np.float64).ravel()
    width, step = window * values_per_sample, hop * values_per_sample
    if values.size < width:
        return np.empty((0, width))
    starts = np.arange(0, values.size - width + 1, step)
    return values[starts[:, None] + np.arange(width)[None, :]]


def check_stream_hop(hop, window: int) -> int:
    """``hop`` (samples between decisions) as an int in [1, window]; a DataError naming it otherwise."""
    if isinstance(hop, bool) or not isinstance(hop, (int, np.integer)) or not 1 <= hop <= window:
        raise DataError(f"stream_hop={hop!r}: expected an integer number of samples in [1, {window}] (the window)")
    return int(hop)
