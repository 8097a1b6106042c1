"""``<prefix>_feed`` and ``<prefix>_reset``: a stream of raw samples in chunks of any size, the model run on the
last window every hop (a front end's build, models/front_end.py).

The state is one window of input values in static RAM and how many of them hold samples: each value is stored as
it arrives; when the window is full the model decides on it, then the window moves on by a hop (the newest
window - hop values to its start). The decisions are those of ``features.stream_windows`` on the whole signal,
whatever the chunks.
"""

from __future__ import annotations

from tinycc_ml.codegen.backend import BuildOutput
from tinycc_ml.codegen.labels import add_to_c
from tinycc_ml.errors import CompileError


def feed_state_bytes(output: BuildOutput, window: int) -> int:
    """The static RAM the stream keeps: the window of input values and the count of those filled."""
    return window * (4 if output.input_ctype == "float" else 2) + 4


def add_feed(output: BuildOutput, window: int, hop: int) -> None:
    """Add ``<prefix>_feed`` and ``<prefix>_reset`` for windows of ``window`` input values every ``hop`` values."""
    p, up, t = output.prefix, output.prefix.upper(), output.input_ctype
    if f"{p}_reset(" in output.files[f"{p}.h"]:
        raise CompileError(f"{p}: the model keeps state of its own; a stream's feed cannot be added to it")
    head = [f"#define {up}_FEED_WINDOW {window}L /* input values a decision reads */",
            f"#define {up}_FEED_HOP {hop}L /* input values between decisions */",
            "/* Append n input values (a multi-axis sensor's interleaved as the model's rows hold them) to the",
            f" * stream; each window completed (the first after {up}_FEED_WINDOW values, then every {up}_FEED_HOP)",
            " * is decided on as <prefix>_predict would: the class indices go to decisions[] (NULL: not kept), at most",
            f" * n / {up}_FEED_HOP + 1 of them. Returns how many windows completed (0: none yet). */",
            f"int {p}_feed(const {t} *samples, long n, int *decisions);",
            "/* Forget the stream: the next value fed starts a new window. */",
            f"void {p}_reset(void);"]
    source = [f"static {t} {p}_feed_window[{window}];",
              f"static long {p}_feed_filled;",
              "",
              f"int {p}_feed(const {t} *samples, long n, int *decisions)",
              "{",
              "    int made = 0;",
              "    for (long i = 0; i < n; ++i) {",
              f"        {p}_feed_window[{p}_feed_filled++] = samples[i];",
              f"        if ({p}_feed_filled < {window}L)",
              "            continue;",
              f"        const int decision = {p}_predict({p}_feed_window);",
              "        if (decisions)",
              "            decisions[made] = decision;",
              "        ++made;",
              f"        for (long k = 0; k < {window - hop}L; ++k) /* the window moves on by a hop */",
              f"            {p}_feed_window[k] = {p}_feed_window[k + {hop}L];",
              f"        {p}_feed_filled = {window - hop}L;",
              "    }",
              "    return made;",
              "}",
              "",
              f"void {p}_reset(void)",
              "{",
              f"    {p}_feed_filled = 0;",
              "}"]
    add_to_c(output, head, source)
    output.stream_bytes = feed_state_bytes(output, window)
