"""Layers written over their own input (plan_memory through each op's ``OpDef.alias``): the window rule checked
against a simulation of any order an implementation may take, random chains of TFLite layers placed over their
operands equal to tflite-micro on every byte on the host (the microcontrollers' kernels: test_network_mcu.py), the
arenas against TFLite Micro's own plan."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import tinycc_ml
from tests.conftest import require_target
from tests.tflite_builder import NetBuilder, tflm_outputs
from tests.tflite_models import ds_cnn_1d
from tinycc_ml.ir.ops.windows import WINDOW_BLOCK, raster_lead
from tinycc_ml.passes.plan_memory import lifetimes


def out_size(n: int, k: int, s: int, d: int, pad: int) -> int:
    return (n + pad - (k - 1) * d - 1) // s + 1


@settings(max_examples=300, deadline=None)
@given(h=st.integers(1, 6), w=st.integers(1, 6), c=st.integers(1, 3), oc=st.integers(1, 4),
       k=st.tuples(st.integers(1, 3), st.integers(1, 3)), s=st.tuples(st.integers(1, 3), st.integers(1, 3)),
       d=st.tuples(st.integers(1, 2), st.integers(1, 2)), pad=st.tuples(st.integers(0, 2), st.integers(0, 2)),
       batch=st.integers(1, 2), phase=st.integers(0, WINDOW_BLOCK - 1))
def test_the_window_lead_keeps_every_read_before_its_element_is_written(h, w, c, oc, k, s, d, pad, batch, phase):
    """Output at the lead: positions in raster order in blocks of up to WINDOW_BLOCK (any phase), each block's
    writes done before its reads (the worst interleaving), every tap inside the input read after no write over it."""
    oh, ow = out_size(h, k[0], s[0], d[0], 2 * pad[0]), out_size(w, k[1], s[1], d[1], 2 * pad[1])
    assume(oh >= 1 and ow >= 1 and pad[0] < (k[0] - 1) * d[0] + 1 and pad[1] < (k[1] - 1) * d[1] + 1)
    lead = raster_lead((batch, h, w, c), (batch, oh, ow, oc), s, pad)
    assert lead <= -oc  # at least the first position's own elements
    positions = [(b, y, x) for b in range(batch) for y in range(oh) for x in range(ow)]
    starts = sorted({0, *range(phase, len(positions), WINDOW_BLOCK)})
    written = np.zeros(batch * h * w * c + 1, dtype=bool)  # input elements a write reached
    for first, end in zip(starts, starts[1:] + [len(positions)]):
        for q in range(first, end):
            lo = lead + q * oc
            written[max(lo, 0):max(lo + oc, 0)] = True
        for b, y, x in positions[first:end]:
            for ky in range(k[0]):
                for kx in range(k[1]):
                    iy, ix = y * s[0] - pad[0] + ky * d[0], x * s[1] - pad[1] + kx * d[1]
                    if 0 <= iy < h and 0 <= ix < w:
                        at = ((b * h + iy) * w + ix) * c
                        assert not written[at:at + c].any(), (b, y, x, ky, kx)


def overlapping(result) -> list[str]:
    """The values placed over an operand (their slots meet)."""
    g, plan = result.graph, result.graph.analyses.memory_plan
    life = lifetimes(g, g.analyses.fused)
    return [n for (n, o) in life.leads
            if plan[n].offset < plan[o].offset + plan[o].length and plan[o].offset < plan[n].offset + plan[n].length]


@pytest.fixture(scope="module", autouse=True)
def host():
    require_target("host")


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 10_000), stride=st.tuples(st.integers(1, 2), st.integers(1, 2)),
       padding=st.sampled_from(["same", "valid"]), kernel=st.tuples(st.integers(1, 3), st.integers(1, 3)),
       multiplier=st.integers(1, 2), pool=st.sampled_from(["max", "average"]))
def test_layers_written_over_their_input_equal_tflite_micro(tmp_path_factory, seed, stride, padding, kernel,
                                                            multiplier, pool):
    n = NetBuilder(seed)
    x = n.input((9, 8, 3))
    y = n.conv(x, 8, (3, 3), activation="relu")
    z = n.depthwise(y, multiplier, kernel, stride, padding=padding, activation="relu6")
    z = n.conv(z, 8, (1, 1), activation="relu")
    z = n.conv(z, 8, kernel, padding=padding)
    assume(min(n.shapes[z]) >= 1)
    if n.shapes[z] == n.shapes[y]:
        z = n.add(z, y, activation="relu")  # the residual: written over one of its operands
    z = (n.max_pool if pool == "max" else n.average_pool)(z, (2, 2), (1, 2), "same")
    data = n.finish(n.softmax(n.fc(n.flatten(z), 5)))
    path = tmp_path_factory.mktemp("net") / "net.tflite"
    path.write_bytes(data)
    result = tinycc_ml.compile(path, target="host", name="net")
    assert overlapping(result)
    X = np.random.default_rng(seed).integers(-128, 128, size=(5, result.output.input_dim))
    X[0], X[1] = -128, 127
    np.testing.assert_array_equal(result.load().run_raw(X.astype(np.int8))[0], tflm_outputs(data, X))


def test_a_1d_ds_cnn_takes_under_three_quarters_of_tflite_micros_plan(tmp_path):
    """The depthwise and pointwise layers each written over their input a few positions behind: 4,416 bytes against
    TFLite Micro's 6,272 (its head: the two largest tensors live at once), every byte equal."""
    path = tmp_path / "ds.tflite"
    path.write_bytes(ds_cnn_1d())
    result = tinycc_ml.compile(path, target="host", name="net")
    assert result.report["arena_bytes"] == 4416 <= 0.75 * 6272
    assert {result.graph.op(n) for n in overlapping(result)} == {"conv2d", "depthwise_conv2d"}
    X = np.random.default_rng(3).integers(-128, 128, size=(6, result.output.input_dim))
    np.testing.assert_array_equal(result.load().run_raw(X.astype(np.int8))[0], tflm_outputs(path.read_bytes(), X))
