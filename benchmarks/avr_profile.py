"""Per-function AVR cycle breakdown of one compiled model (tinycc_ml.runtime.profile, simavr).

    from avr_profile import avr_profile
    rows = avr_profile(files, prefix, x_int16, n_scores, input_ctype, score_ctype)  # [(symbol, cycles)]

Cycles per predict call, largest first.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

from tinycc_ml.runtime.profile import function_profile


def profile_files(target: str, files: dict[str, str], prefix: str, x: np.ndarray, n_scores: int, input_ctype: str,
                  score_ctype: str) -> list[tuple[str, float]]:
    with tempfile.TemporaryDirectory(prefix="tinycc-ml-prof-") as work:
        for name, text in files.items():
            Path(work, name).write_text(text)
        prof = function_profile(target, [Path(work, f"{prefix}.c")], Path(work, f"{prefix}.h"), prefix, x, n_scores,
                                input_ctype, score_ctype)
    return sorted(prof.items(), key=lambda kv: -kv[1])


def avr_profile(files, prefix, x, n_scores, input_ctype, score_ctype) -> list[tuple[str, float]]:
    return profile_files("avr", files, prefix, x, n_scores, input_ctype, score_ctype)
