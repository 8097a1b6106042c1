"""Per-function Cortex-M0 instruction breakdown of one compiled model (tinycc_ml.runtime.profile, unicorn).

    from m0_profile import m0_profile
    rows = m0_profile(files, prefix, x_int16, n_scores, input_ctype, score_ctype)  # [(symbol, instructions)]

Instructions per predict call, largest first.
"""

from __future__ import annotations

from avr_profile import profile_files


def m0_profile(files, prefix, x, n_scores, input_ctype, score_ctype) -> list[tuple[str, float]]:
    return profile_files("cortex-m0", files, prefix, x, n_scores, input_ctype, score_ctype)
