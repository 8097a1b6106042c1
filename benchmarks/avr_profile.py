"""Per-function AVR cycle breakdown of one compiled model: simavr's runner sums the cycles spent at
each program address inside the timed predict calls, avr-nm maps addresses to symbols.

    from avr_profile import avr_profile
    rows = avr_profile(files, prefix, x_int16, n_scores, input_ctype, score_ctype)  # [(symbol, cycles)]

Cycles are totals over the predict and scores calls divided by their number (exact per row when every row
takes the same path). A symbol without a size (an asm kernel) runs up to the next symbol.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from tinycc_ml.runtime import sim_avr, toolchains
from tinycc_ml.runtime.simulate import make_spec


def _symbols(elf: str) -> list[tuple[int, str]]:
    out = subprocess.run([toolchains.find_tool("avr-nm"), "-n", elf], capture_output=True, text=True,
                         check=True).stdout
    syms = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "tTwW" and not parts[2].startswith(".L"):
            addr = int(parts[0], 16)
            if addr < 0x800000:  # flash, not data
                syms.append((addr, parts[2]))
    return syms


def avr_profile(files: dict[str, str], prefix: str, x: np.ndarray, n_scores: int, input_ctype: str,
                score_ctype: str) -> list[tuple[str, float]]:
    with tempfile.TemporaryDirectory(prefix="tinycc-ml-prof-") as work:
        for name, text in files.items():
            Path(work, name).write_text(text)
        spec = make_spec([os.path.join(work, f"{prefix}.c")], os.path.join(work, f"{prefix}.h"), prefix,
                         x.shape[1], n_scores, input_ctype, score_ctype)
        fw = sim_avr.build(spec, work)
        n = x.shape[0]
        rows = np.concatenate([np.ones((n, 1), np.uint8), x.view(np.uint8).reshape(n, -1)], axis=1)
        inp, outp, prof = (os.path.join(work, f) for f in ("in.bin", "out.bin", "prof.txt"))
        Path(inp).write_bytes(rows.tobytes() + b"\x00")
        subprocess.run([sim_avr.runner_path(), fw.bin, inp, outp, str(10**10), str(10**8), "atmega328p",
                        "16000000", prof], check=True, capture_output=True)
        counts = np.loadtxt(prof, dtype=np.int64, ndmin=2)
        syms = _symbols(fw.elf)
    addrs = np.array([a for a, _ in syms])
    per: dict[str, int] = {}
    for pc, cyc in counts:
        i = int(np.searchsorted(addrs, pc, side="right")) - 1
        name = syms[i][1] if i >= 0 else "?"
        per[name] = per.get(name, 0) + int(cyc)
    calls = 2 * n  # the harness times predict and scores for each row
    return sorted(((k, v / calls) for k, v in per.items()), key=lambda kv: -kv[1])
