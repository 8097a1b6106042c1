"""SignalFilterBank: triangular (mel) filters over a uint32 power spectrum, each channel the uint64 sum of its
bins times their weights (signal/src/filter_bank.cc). Channel c's bins are [freq_starts[c], + widths[c]), their
weights at weight_starts[c]; every bin also adds its unweight to the channel before it (channel -1, the first
of the num_channels + 1 filters the file gives, is discarded). Weights are int16 widened to uint64, the sums
wrap modulo 2^64 as they do in C."""

from __future__ import annotations

import numpy as np

from tinycc_ml.ir.ops.frontends import custom_int, tflite_custom
from tinycc_ml.ir.ops.registry import OpDef, need, register_op
from tinycc_ml.ir.ops.signal.common import I16, INTEGER_ONLY, U32, U64, declared_result, need_type, with_rows

CONFIG = ("weights", "unweights", "channel_frequency_starts", "channel_weight_starts", "channel_widths")


def _infer(ts, attrs, declared):
    x, weights, unweights, freq_starts, weight_starts, widths = ts
    need_type(x, U32, "the spectrum", rank=1)
    for t, what in zip(ts[1:], CONFIG):
        need_type(t, I16, f"the {what}", rank=1)
    channels = int(attrs["num_channels"])
    need(channels >= 1 and freq_starts.size == weight_starts.size == widths.size == channels + 1,
         f"{channels} channels need {channels + 1} starts and widths, got {freq_starts.size}, {weight_starts.size}, "
         f"{widths.size}")
    need(weights.size == unweights.size, f"{weights.size} weights and {unweights.size} unweights")
    return declared_result(declared, (channels,), U64)


def check_config(bins: int, n_weights: int, freq_starts, weight_starts, widths) -> None:
    """Every channel reads bins and weights that exist (TFLite Micro would read past its arrays)."""
    for c, (f, w, n) in enumerate(zip(freq_starts, weight_starts, widths)):
        need(n >= 0 and f >= 0 and w >= 0 and f + n <= bins and w + n <= n_weights,
             f"filter {c} reads bins [{f}, {f + n}) of {bins} and weights [{w}, {w + n}) of {n_weights}")


def accumulate(x, weights, unweights, freq_starts, weight_starts, widths) -> np.ndarray:
    """(rows, bins) uint32 -> (rows, channels) uint64."""
    x = np.asarray(x).astype(np.uint64)
    w = np.asarray(weights, np.int64).astype(np.uint64)  # int16 widened as C widens it: sign-extended, modulo 2^64
    u = np.asarray(unweights, np.int64).astype(np.uint64)
    out = np.zeros((len(x), len(widths)), np.uint64)
    carry = np.zeros(len(x), np.uint64)
    with np.errstate(over="ignore"):
        for c, (f, s, n) in enumerate(zip(freq_starts, weight_starts, widths)):
            bins = x[:, int(f):int(f) + int(n)]
            out[:, c] = carry + (bins * w[int(s):int(s) + int(n)]).sum(axis=1, dtype=np.uint64)
            carry = (bins * u[int(s):int(s) + int(n)]).sum(axis=1, dtype=np.uint64)
    return out[:, 1:]


def _fixed(call):
    x, *config = with_rows(call.ins, call.in_types)
    return accumulate(x, *(c.reshape(-1) for c in config))


def _c(em, node) -> list[str]:
    x, weights, unweights, freq_starts, weight_starts, widths = node.inputs
    y = em.var(node.name)
    return ["{", "    uint64_t weighted = 0, unweighted = 0;",
            f"    for (long c = 0; c < {node.type.size + 1}; ++c) {{",
            f"        const long start = {em.at(freq_starts, 'c')}, first = {em.at(weight_starts, 'c')};",
            f"        const long width = {em.at(widths, 'c')};",
            "        for (long j = 0; j < width; ++j) {",
            f"            const uint64_t power = {em.at(x, 'start + j')};",
            f"            weighted += (uint64_t)(int64_t){em.at(weights, 'first + j')} * power;",
            f"            unweighted += (uint64_t)(int64_t){em.at(unweights, 'first + j')} * power;",
            "        }",
            "        if (c > 0)", f"            {y}[c - 1] = weighted;",
            "        weighted = unweighted;", "        unweighted = 0;", "    }", "}"]


register_op(OpDef(
    "signal_filter_bank", 6, _infer,
    lambda xs, attrs: accumulate(np.asarray(xs[0], np.int64)[None], *xs[1:])[0].astype(np.float64),
    {"num_channels": "int"},
    "TFLite Micro's SignalFilterBank: weighted sums of a uint32 power spectrum's bins per channel, uint64",
    fixed=_fixed, c={"fixed": _c}, unsupported=INTEGER_ONLY))


@tflite_custom("SignalFilterBank", inputs=(6, 6))
def lower(low, options, ins, outs) -> None:
    channels = custom_int(options, "num_channels", "SignalFilterBank", 1, 1 << 15)
    config = [low.tensors[i] for i in ins[1:]]
    for t, what in zip(config, CONFIG):
        need(t.data is not None, f"SignalFilterBank: the {what} {t.name!r} must be a constant")
    x = low.value(ins[0])
    check_config(low.graph.type(x).size, config[0].data.size, *(t.data.reshape(-1).astype(int) for t in config[2:]))
    low.add("signal_filter_bank", [x, *(low.value(i, "") for i in ins[1:])], {"num_channels": channels},
            low.tensors[outs[0]])
