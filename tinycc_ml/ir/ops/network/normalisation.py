"""LAYER_NORM over the last axis, at float only.

LAYER_NORM: (x - mean) / sqrt(var + epsilon) gamma + beta, the mean and the (biased) variance in float32 (ONNX's
LayerNormalization with stash_type 1, nn.LayerNorm over the last axis). It has no form in the project's fixed point
or TFLite's int8 here: a reciprocal square root of a calibrated variance has no proven error bound, so a
fixed-point operand is refused by name.
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.ir.ops.convolution import NO_ACCUMULATOR, NO_RANGES
from tinycc_ml.ir.ops.network.broadcast import last_axis_rows
from tinycc_ml.ir.ops.registry import OpDef, need, register_op
from tinycc_ml.ir.ops.windows import network_result

FLOAT_ONLY = "float only: no proven error bound in fixed point (the op is refused by its type rule)"
REFUSAL = ("{op} has no fixed-point form (no proven error bound for its {what}): compile the network at float"
           "{hint}")


def _infer(op: str, what: str, hint: str = ""):
    def infer(ts, attrs, declared):
        x = ts[0]
        need(x.dtype.is_float and all(t.dtype.is_float for t in ts), REFUSAL.format(op=op, what=what, hint=hint))
        if op == "layer_norm":
            depth = x.shape[-1] if x.rank else 1
            need(all(t.shape in ((depth,), (1,) * (t.rank - 1) + (depth,)) for t in ts[1:]),
                 f"gamma and beta must hold {depth} values (the last axis), got {[list(t.shape) for t in ts[1:]]}")
            need(float(attrs["epsilon"]) > 0, f"epsilon must be positive, got {attrs['epsilon']}")
        return network_result(x, declared, x.shape, x.layout)
    return infer


def _layer_norm(xs, attrs):
    x = np.asarray(xs[0], dtype=np.float64)
    centred = x - np.mean(x, axis=-1, keepdims=True)
    variance = np.mean(centred * centred, axis=-1, keepdims=True)
    gamma, beta = (np.asarray(v, dtype=np.float64).reshape(-1) for v in xs[1:])
    return centred / np.sqrt(variance + float(attrs["epsilon"])) * gamma + beta


def _c_layer_norm(em, node) -> list[str]:
    gamma, beta = em.at(node.inputs[1], "i"), em.at(node.inputs[2], "i")
    epsilon = f"{float(node.attrs['epsilon']):.9g}f"
    return last_axis_rows(em, node, "float", ["float mean = 0.0f, variance = 0.0f, inverse;",
                            "for (int i = 0; i < {depth}; ++i)",
                            "    mean += in[i];",
                            "mean /= {depth};",
                            "for (int i = 0; i < {depth}; ++i)",
                            "    variance += (in[i] - mean) * (in[i] - mean);",
                            f"inverse = 1.0f / sqrtf(variance / {{depth}} + {epsilon});",
                            "for (int i = 0; i < {depth}; ++i)",
                            f"    out[i] = (in[i] - mean) * inverse * {gamma} + {beta};"])


register_op(OpDef(
    "layer_norm", 3, _infer("layer_norm", "reciprocal square root of a variance"), _layer_norm, {"epsilon": "float"},
    "Layer normalisation over the last axis, at float: (x - mean) / sqrt(var + epsilon) gamma + beta (gamma, beta: "
    "constants of the last axis' length)",
    evaluate_rows=lambda ins, batched, attrs, n, rank: _layer_norm(ins, attrs) if batched[0] and not any(batched[1:])
    else None,
    c={"float": _c_layer_norm},
    unsupported={"fixed": FLOAT_ONLY, "c_fixed": FLOAT_ONLY, "interval": NO_RANGES, "acc_bound": NO_ACCUMULATOR}))
