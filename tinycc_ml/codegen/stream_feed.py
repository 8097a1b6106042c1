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
    """Add ``<prefix>_feed`` (float builds: also ``<prefix>_feed_i16``) and ``<prefix>_reset`` for windows of
    ``window`` input values every ``hop`` values."""
    p, up, t = output.prefix, output.prefix.upper(), output.input_ctype
    if f"{p}_reset(" in output.files[f"{p}.h"]:
        raise CompileError(f"{p}: the model keeps state of its own; a stream's feed cannot be added to it")
    head = [f"#define {up}_FEED_WINDOW {window}L /* input values a decision reads */",
            f"#define {up}_FEED_HOP {hop}L /* input values between decisions */",
            "/* Append n input values (a multi-axis sensor's interleaved as the model's rows hold them) to the",
            f" * stream; each window completed (the first after {up}_FEED_WINDOW values, then every {up}_FEED_HOP)",
            " * is decided on as <prefix>_predict would: the class indices go to decisions[] (NULL: not kept), at most",
            f" * n / {up}_FEED_HOP + 1 of them. Returns how many windows completed (0: none yet). */",
            f"int {p}_feed(const {t} *samples, long n, int *decisions);"]
    raw = t == "float"  # a float build also takes a sensor's raw int16 counts, each exact as a float
    if raw:
        head += ["/* The same for raw int16 samples (ADC or sensor counts, the units the model was trained in). */",
                 f"int {p}_feed_i16(const int16_t *samples, long n, int *decisions);"]
    head += ["/* Forget the stream: the next value fed starts a new window. */",
             f"void {p}_reset(void);"]
    source = [f"static {t} {p}_feed_window[{window}];",
              f"static long {p}_feed_filled;",
              "",
              "/* one value in; 1 when it completes a window (its decision in *decision), else 0 */",
              f"static int {p}_feed_one({t} value, int *decision)",
              "{",
              f"    {p}_feed_window[{p}_feed_filled++] = value;",
              f"    if ({p}_feed_filled < {window}L)",
              "        return 0;",
              f"    *decision = {p}_predict({p}_feed_window);",
              f"    for (long k = 0; k < {window - hop}L; ++k) /* the window moves on by a hop */",
              f"        {p}_feed_window[k] = {p}_feed_window[k + {hop}L];",
              f"    {p}_feed_filled = {window - hop}L;",
              "    return 1;",
              "}"]
    for name, sample_type, value in [("feed", t, "samples[i]")] + ([("feed_i16", "int16_t", "(float)samples[i]")]
                                                                     if raw else []):
        source += ["",
                   f"int {p}_{name}(const {sample_type} *samples, long n, int *decisions)",
                   "{",
                   "    int made = 0, decision;",
                   "    for (long i = 0; i < n; ++i)",
                   f"        if ({p}_feed_one({value}, &decision)) {{",
                   "            if (decisions)",
                   "                decisions[made] = decision;",
                   "            ++made;",
                   "        }",
                   "    return made;",
                   "}"]
    source += ["",
               f"void {p}_reset(void)",
               "{",
               f"    {p}_feed_filled = 0;",
               "}"]
    add_to_c(output, head, source)
    output.stream_bytes = feed_state_bytes(output, window)
