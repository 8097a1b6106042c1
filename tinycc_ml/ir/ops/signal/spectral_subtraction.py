"""SignalFilterBankSpectralSubtraction: a running noise estimate per channel (state kept across calls) and the
channels less it (signal/src/filter_bank_spectral_subtraction.cc). Two IR ops, one per output:

- ``signal_noise_estimate`` (channels, the estimate when the call began) -> the next estimate: ((x << sb) s +
  e (1 - s)) >> ssb in uint64 stored in uint32, with the channel's smoothing (odd channels the alternate one);
  clamped to x << sb when ``clamping``;
- ``signal_spectral_subtraction`` (channels, next estimate) -> max(((x << sb) - min(e, x << sb)) >> sb,
  (x * min_signal_remaining) >> ssb).

x << sb wraps in uint32 as in C. The estimate starts at 0 (TFLite Micro's Prepare and Reset)."""

from __future__ import annotations

import numpy as np

from tinycc_ml.ir.ops.frontends import custom_int, tflite_custom
from tinycc_ml.ir.ops.registry import OpDef, need, register_op
from tinycc_ml.ir.ops.signal.common import INTEGER_ONLY, U32, declared_result, need_type, with_rows
from tinycc_ml.ir.types import TensorType

ESTIMATE_ATTRS = {"smoothing": "int", "one_minus_smoothing": "int", "alternate_smoothing": "int",
                  "alternate_one_minus_smoothing": "int", "smoothing_bits": "int", "spectral_subtraction_bits": "int",
                  "clamping": "int"}
SUBTRACTION_ATTRS = {"smoothing_bits": "int", "spectral_subtraction_bits": "int", "min_signal_remaining": "int"}
MASK32 = 0xFFFFFFFF


def _infer_pair(ts, attrs, declared):
    x, e = ts
    need_type(x, U32, "the channels", rank=1)
    need_type(e, U32, "the noise estimate", rank=1)
    need(x.shape == e.shape, f"{x.size} channels and a noise estimate of {e.size}")
    need(0 <= int(attrs["smoothing_bits"]) <= 31 and 0 <= int(attrs["spectral_subtraction_bits"]) <= 63,
         "smoothing_bits must be in [0, 31] and spectral_subtraction_bits in [0, 63]")
    return declared_result(declared, x.shape, U32)


def smoothing(attrs: dict, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Each channel's (smoothing, 1 - smoothing): even channels the first pair, odd ones the alternate."""
    odd = np.arange(n) % 2 == 1
    s = np.where(odd, int(attrs["alternate_smoothing"]), int(attrs["smoothing"]))
    return s.astype(np.uint64), np.where(odd, int(attrs["alternate_one_minus_smoothing"]),
                                         int(attrs["one_minus_smoothing"])).astype(np.uint64)


def next_estimate(x, e, attrs: dict) -> np.ndarray:
    x, e = np.asarray(x, np.int64), np.asarray(e, np.int64)
    up = (x << int(attrs["smoothing_bits"])) & MASK32
    s, one_minus = smoothing(attrs, x.shape[-1])
    with np.errstate(over="ignore"):
        total = up.astype(np.uint64) * s + e.astype(np.uint64) * one_minus
    estimate = (total >> np.uint64(int(attrs["spectral_subtraction_bits"]))).astype(np.int64) & MASK32
    return np.minimum(estimate, up) if int(attrs["clamping"]) else estimate


def subtract(x, e, attrs: dict) -> np.ndarray:
    x, e = np.asarray(x, np.int64), np.asarray(e, np.int64)
    bits = int(attrs["smoothing_bits"])
    up = (x << bits) & MASK32
    floor = ((x.astype(np.uint64) * np.uint64(int(attrs["min_signal_remaining"])))
             >> np.uint64(int(attrs["spectral_subtraction_bits"]))).astype(np.int64) & MASK32
    return np.maximum((up - np.minimum(e, up)) >> bits, floor)


def _c_estimate(em, node) -> list[str]:
    x, e = node.inputs
    a = node.attrs
    sb, ssb = int(a["smoothing_bits"]), int(a["spectral_subtraction_bits"])
    lines = [f"for (long i = 0; i < {node.type.size}; ++i) {{",
             f"    const uint32_t up = (uint32_t){em.at(x, 'i')} << {sb};",
             f"    const uint64_t s = (i & 1) ? UINT64_C({int(a['alternate_smoothing'])}) : "
             f"UINT64_C({int(a['smoothing'])});",
             f"    const uint64_t rest = (i & 1) ? UINT64_C({int(a['alternate_one_minus_smoothing'])}) : "
             f"UINT64_C({int(a['one_minus_smoothing'])});",
             f"    uint32_t estimate = (uint32_t)(((uint64_t)up * s + (uint64_t){em.at(e, 'i')} * rest) >> {ssb});"]
    if int(a["clamping"]):
        lines.append("    if (estimate > up) estimate = up;")
    return [*lines, f"    {em.var(node.name)}[i] = estimate;", "}"]


def _c_subtract(em, node) -> list[str]:
    x, e = node.inputs
    a = node.attrs
    sb, ssb = int(a["smoothing_bits"]), int(a["spectral_subtraction_bits"])
    return [f"for (long i = 0; i < {node.type.size}; ++i) {{",
            f"    const uint32_t up = (uint32_t){em.at(x, 'i')} << {sb};",
            f"    const uint32_t estimate = {em.at(e, 'i')} < up ? {em.at(e, 'i')} : up;",
            f"    const uint32_t floor = (uint32_t)(((uint64_t){em.at(x, 'i')} * "
            f"UINT64_C({int(a['min_signal_remaining'])})) >> {ssb});",
            f"    const uint32_t subtracted = (up - estimate) >> {sb};",
            f"    {em.var(node.name)}[i] = subtracted > floor ? subtracted : floor;", "}"]


register_op(OpDef(
    "signal_noise_estimate", 2, _infer_pair,
    lambda xs, attrs: next_estimate(xs[0], xs[1], attrs).astype(np.float64), ESTIMATE_ATTRS,
    "TFLite Micro's SignalFilterBankSpectralSubtraction, its noise estimate for the next call",
    fixed=lambda call: next_estimate(*with_rows(call.ins, call.in_types), call.attrs), c={"fixed": _c_estimate},
    unsupported=INTEGER_ONLY))
register_op(OpDef(
    "signal_spectral_subtraction", 2, _infer_pair,
    lambda xs, attrs: subtract(xs[0], xs[1], attrs).astype(np.float64), SUBTRACTION_ATTRS,
    "TFLite Micro's SignalFilterBankSpectralSubtraction, its output: the channels less the noise estimate, floored",
    fixed=lambda call: subtract(*with_rows(call.ins, call.in_types), call.attrs), c={"fixed": _c_subtract},
    unsupported=INTEGER_ONLY))


@tflite_custom("SignalFilterBankSpectralSubtraction", inputs=(1, 1), outputs=(2, 2))
def lower(low, options, ins, outs) -> None:
    op = "SignalFilterBankSpectralSubtraction"
    x = low.value(ins[0])
    channels = low.graph.type(x).size
    need(custom_int(options, "num_channels", op, 1, 1 << 15) == channels,
         f"{op}: num_channels {options.get('num_channels')} for {channels} channels")
    value = (1 << 32) - 1
    attrs = {key: custom_int(options, key, op, 0, value) for key in
             ("smoothing", "one_minus_smoothing", "alternate_smoothing", "alternate_one_minus_smoothing",
              "min_signal_remaining")}
    attrs["smoothing_bits"] = custom_int(options, "smoothing_bits", op, 0, 31)
    attrs["spectral_subtraction_bits"] = custom_int(options, "spectral_subtraction_bits", op, 0, 63)
    clamping = options.get("clamping", False)
    need(isinstance(clamping, bool), f"{op}: option 'clamping' is {clamping!r}; a boolean is needed")
    state = low.graph.add("state", [], {"init": np.zeros(channels, np.uint32)}, type=TensorType((channels,), U32),
                          name=f"{low.name_of(low.tensors[outs[1]])}_state")
    low.add("signal_noise_estimate", [x, state], {**{k: attrs[k] for k in ESTIMATE_ATTRS if k != "clamping"},
                                                  "clamping": int(clamping)}, low.tensors[outs[1]])
    low.graph.set_next_state(state, low.values[outs[1]])
    low.add("signal_spectral_subtraction", [x, low.values[outs[1]]], {k: attrs[k] for k in SUBTRACTION_ATTRS},
            low.tensors[outs[0]])
