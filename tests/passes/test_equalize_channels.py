"""passes/equalize_channels.py: power-of-two cross-layer channel equalisation before a float network's int8
power-of-two scales. The float network computes the same values bit for bit; each rescaled pair's per-channel
weight ranges draw together; only ReLU-joined (or unactivated) single-reader pairs are touched; an int8 pow2 build
keeps it only where the held-out calibration rows agree with float at least as often."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from sklearn.datasets import load_digits

import tinycc_ml
from tinycc_ml.ir.interp import run_float
from tinycc_ml.models import network_fixed
from tinycc_ml.models.network_fixed import fixed_agreement
from tinycc_ml.passes.equalize_channels import _pairs
from tinycc_ml.passes.manager import PassContext, run_passes

ZOO = Path(__file__).resolve().parents[1] / "data" / "pytorch_zoo"


def digits(rows: int) -> np.ndarray:
    return load_digits().data[:rows] / 16.0


def float_graph(name: str):
    return tinycc_ml.load_model(ZOO / f"{name}.onnx").lower_for("float")


def weakest_channel_bits(graph) -> dict[str, float]:
    """Per layer: the bits its weakest output channel's largest weight lies below the tensor's largest (what one
    power-of-two scale per tensor costs that channel)."""
    out = {}
    for name in graph.order():
        if graph.op(name) in ("conv2d", "grouped_conv2d", "fully_connected"):
            w = np.abs(np.asarray(graph.node(graph.node(name).inputs[1]).attrs["value"], dtype=np.float64))
            ranges = w.reshape(w.shape[0], -1).max(axis=1)
            out[name] = float(np.log2(w.max() / ranges[ranges > 0]).max())
    return out


def test_the_float_network_computes_the_same_bits_and_the_weakest_channels_keep_more_bits():
    graph = float_graph("cnn_grouped")
    out = run_passes(graph.copy(), ["equalize_channels"], PassContext())
    assert not out.structurally_equal(graph)
    rows = digits(64)
    before, after = run_float(graph, rows), run_float(out, rows)
    np.testing.assert_array_equal(np.asarray(after["scores"]).view(np.uint64),
                                  np.asarray(before["scores"]).view(np.uint64))
    lost_before, lost_after = weakest_channel_bits(graph), weakest_channel_bits(out)
    assert all(lost_after[n] <= lost_before[n] + 1e-9 for n in lost_before)
    assert sum(lost_after.values()) < sum(lost_before.values()) - 0.5  # the grouped layer's 3.35 bits -> 2.79


def test_only_relu_joined_single_reader_pairs_are_rescaled():
    graph = float_graph("cnn_grouped")
    pairs = _pairs(graph)
    assert pairs and all(graph.op(a) in ("conv2d", "grouped_conv2d") for a, _ in pairs)
    first, _ = pairs[0]
    graph.node(first).attrs["activation"] = "relu6"  # relu6(x / 2^k) != relu6(x) / 2^k
    assert first not in [a for a, _ in _pairs(graph)]


def test_an_int8_pow2_build_keeps_it_only_where_the_held_out_rows_agree_at_least_as_often(monkeypatch):
    model = tinycc_ml.load_model(ZOO / "cnn_grouped.onnx")
    rows = digits(256)
    graph = model.lower_for("int8")
    with_it = network_fixed.lower_network_to_fixed(graph.copy(), "int8", rows, PassContext())
    monkeypatch.setattr(network_fixed, "equalised_if_better", lambda g, ctx: g)
    without = network_fixed.lower_network_to_fixed(graph.copy(), "int8", rows, PassContext())
    held = rows[np.random.default_rng(0).permutation(len(rows))[:64]]
    assert fixed_agreement(graph, with_it, held)["agreement_with_float"] >= \
        fixed_agreement(graph, without, held)["agreement_with_float"]
