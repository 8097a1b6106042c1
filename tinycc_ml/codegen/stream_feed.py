"""``<prefix>_feed`` and ``<prefix>_reset``: a stream of raw samples in chunks of any size, the model run on the
last window every hop (a front end's build, models/front_end.py).

With a frame stack (passes/frame_stack.py: a front end that begins with a Framer, a stream hop a whole number of
its hops) the state is the newest frame's values, the features of the window's last frames and the values left
until the next decision: each frame's features are computed once, when its last value arrives
(``<prefix>_frame_scores``, the window graph's frame-wise steps on one frame), the oldest frame's dropped; every hop
the rest of the graph (``<prefix>_stack_predict``: window-level steps and the model) decides on the stack. Without
one, the state is one window of input values: when it is full the model decides on it (``<prefix>_predict``), then
it moves on by a hop. Either way the decisions are those of ``features.stream_windows`` on the whole signal, whatever
the chunks, and those of ``<prefix>_predict`` on each window (every node keeps its type and scales).
"""

from __future__ import annotations

from tinycc_ml.codegen.backend import BuildOutput
from tinycc_ml.codegen.emitter import JOINED_BUILD_ARRAYS
from tinycc_ml.codegen.labels import add_to_c
from tinycc_ml.errors import CompileError
from tinycc_ml.passes.frame_stack import FrameStack, split_frame_stack


def feed_state_bytes(output: BuildOutput, window: int) -> int:
    """The static RAM the stream keeps: the window of input values and the count of those filled."""
    return window * (4 if output.input_ctype == "float" else 2) + 4


def frame_stack_of(backend, graph, hop: int) -> tuple[FrameStack | None, str]:
    """(the frame stack of the window graph ``graph`` streamed every ``hop`` input values, why) or (None, why not)."""
    stack = split_frame_stack(graph)
    if isinstance(stack, str):
        return None, stack
    if hop % stack.frame_hop:
        return None, (f"the stream's hop ({hop} values) is not a whole number of the frames' hop ({stack.frame_hop}): "
                      "a window's frames would not be the stream's")
    return stack, (f"{stack.frames} frames of {stack.features} features kept; one frame of {stack.frame_values} "
                   f"values computed every {stack.frame_hop}")


def _inlined(backend, graph, prefix: str) -> tuple[BuildOutput, str]:
    """``graph`` emitted by ``backend`` as the build ``prefix``, its header and source as one text for the model's C."""
    sub = backend.emit(graph, prefix, [])
    header, source = sub.files.pop(f"{prefix}.h"), sub.files.pop(f"{prefix}.c")
    if sub.files:
        raise CompileError(f"{prefix}: the frame stack's build writes {', '.join(sub.files)} besides its C")
    include = f'#include "{prefix}.h"\n'
    if include not in source:
        raise CompileError(f"{prefix}: the frame stack's source does not include its header")
    return sub, source.replace(include, header, 1)


def add_feed(output: BuildOutput, window: int, hop: int, backend=None, graph=None) -> str:
    """Add ``<prefix>_feed`` (float builds: also ``<prefix>_feed_i16``) and ``<prefix>_reset`` for windows of
    ``window`` input values every ``hop`` values: with a frame stack when the window's ``graph`` has one and the
    ``backend`` emits its two parts, else on the whole window. Returns what the stream keeps (report's
    ``frame_stack``: the stack, or "none: " and why not)."""
    p, up, t = output.prefix, output.prefix.upper(), output.input_ctype
    if f"{p}_reset(" in output.files[f"{p}.h"]:
        raise CompileError(f"{p}: the model keeps state of its own; a stream's feed cannot be added to it")
    stack, why = frame_stack_of(backend, graph, hop) if graph is not None else (None, "no graph given")
    if stack is not None:
        try:
            _add_stacked_feed(output, window, hop, backend, stack)
            return why
        except CompileError as exc:  # the target's build of a part is not plain C: the whole window instead
            stack, why = None, str(exc)
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
    source += _feed_functions(p, t, raw)
    source += ["",
               f"void {p}_reset(void)",
               "{",
               f"    {p}_feed_filled = 0;",
               "}"]
    add_to_c(output, head, source)
    output.stream_bytes = feed_state_bytes(output, window)
    return f"none: {why}"


def _add_stacked_feed(output: BuildOutput, window: int, hop: int, backend, stack: FrameStack) -> None:
    p, up, t = output.prefix, output.prefix.upper(), output.input_ctype
    # the parts' constants equal to the window build's (the front end's tables, the network's weights) are #defines
    # of them: a firmware calling both _predict and _feed stores them once
    joined = JOINED_BUILD_ARRAYS.set(output.array_contents)
    try:
        frame, frame_c = _inlined(backend, stack.frame_graph, f"{p}_frame")
        rest, rest_c = _inlined(backend, stack.stack_graph, f"{p}_stack")
    finally:
        JOINED_BUILD_ARRAYS.reset(joined)
    if frame.input_ctype != t or frame.score_ctype != rest.input_ctype:
        raise CompileError(f"{p}: the frame stack's types differ ({t} in, {frame.score_ctype} features, "
                           f"{rest.input_ctype} stacked)")
    length, frame_hop, frames, k = stack.frame_values, stack.frame_hop, stack.frames, stack.features
    f_t = frame.score_ctype
    head = [f"#define {up}_FEED_WINDOW {window}L /* input values a decision reads */",
            f"#define {up}_FEED_HOP {hop}L /* input values between decisions */",
            "/* Append n input values to the stream; each frame's features are computed once, when its last value",
            f" * arrives ({frames} frames of {k} features kept, one every {frame_hop} values), and each window",
            " * completed",
            f" * (the first after {up}_FEED_WINDOW values, then every {up}_FEED_HOP) is decided on as <prefix>_predict",
            " * would: the class indices go to decisions[] (NULL: not kept), at most",
            f" * n / {up}_FEED_HOP + 1 of them. Returns how many windows completed (0: none yet). */",
            f"int {p}_feed(const {t} *samples, long n, int *decisions);"]
    raw = t == "float"
    if raw:
        head += ["/* The same for raw int16 samples (ADC or sensor counts, the units the model was trained in). */",
                 f"int {p}_feed_i16(const int16_t *samples, long n, int *decisions);"]
    head += ["/* Forget the stream: the next value fed starts a new window. */",
             f"void {p}_reset(void);"]
    source = ["", "/* the frame stack's two graphs: one frame's features, the model on the stacked features */",
              frame_c.rstrip("\n"), "", rest_c.rstrip("\n"), "",
              f"static {t} {p}_feed_frame[{length}]; /* the newest frame's values so far */",
              f"static long {p}_feed_filled;",
              f"static {f_t} {p}_feed_stack[{frames * k}]; /* the last frames' features, oldest first */",
              f"static long {p}_feed_frames;",
              f"static long {p}_feed_until = {window}L; /* values until the next decision */",
              "",
              "/* one value in; 1 when it completes a window (its decision in *decision), else 0 */",
              f"static int {p}_feed_one({t} value, int *decision)",
              "{",
              f"    {p}_feed_frame[{p}_feed_filled++] = value;",
              f"    if ({p}_feed_filled == {length}L) {{ /* a frame is complete: its features onto the stack */",
              f"        if ({p}_feed_frames == {frames}L) {{ /* the oldest frame leaves */",
              f"            for (long i = 0; i < {(frames - 1) * k}L; ++i)",
              f"                {p}_feed_stack[i] = {p}_feed_stack[i + {k}L];",
              f"            --{p}_feed_frames;",
              "        }",
              f"        {p}_frame_scores({p}_feed_frame, {p}_feed_stack + {p}_feed_frames * {k}L);",
              f"        ++{p}_feed_frames;",
              f"        for (long i = 0; i < {length - frame_hop}L; ++i) /* the next frame's first values */",
              f"            {p}_feed_frame[i] = {p}_feed_frame[i + {frame_hop}L];",
              f"        {p}_feed_filled = {length - frame_hop}L;",
              "    }",
              f"    if (--{p}_feed_until > 0)",
              "        return 0;",
              f"    {p}_feed_until = {hop}L;",
              f"    *decision = {p}_stack_predict({p}_feed_stack);",
              "    return 1;",
              "}"]
    source += _feed_functions(p, t, raw)
    source += ["",
               f"void {p}_reset(void)",
               "{",
               f"    {p}_feed_filled = 0;",
               f"    {p}_feed_frames = 0;",
               f"    {p}_feed_until = {window}L;",
               "}"]
    add_to_c(output, head, source)
    values = 4 if t == "float" else 2
    features = {"float": 4, "int16_t": 2, "int8_t": 1, "uint8_t": 1}.get(f_t, 4)
    output.const_bytes += frame.const_bytes + rest.const_bytes
    output.stream_bytes = (length * values + frames * k * features + 12 + frame.ram_bytes + rest.ram_bytes)


def _feed_functions(p: str, t: str, raw: bool) -> list[str]:
    """``<p>_feed`` (and ``<p>_feed_i16``): each value through ``<p>_feed_one``, the decisions kept."""
    source = []
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
    return source
