"""The text form round-trips the graphs the compiler really produces: float and fixed point,
with tree walks, lookup tables, per-element clamps, sparse and 3-d constants."""

import numpy as np
import pytest

import tinycc_ml
from tinycc_ml.ir.text import parse_graph, print_graph
from tinycc_ml.ir.verify import verify
from tinycc_ml.models.bonsai import BonsaiModel
from tinycc_ml.models.protonn import ProtoNNModel


def models():
    rng = np.random.default_rng(0)
    W = rng.normal(size=(3, 9)) * (rng.random((3, 9)) < 0.3)
    protonn = ProtoNNModel(W, rng.normal(size=(3, 5)), rng.normal(size=(2, 5)), 0.8, rng.normal(size=9),
                           rng.uniform(0.5, 2, 9))
    bonsai = BonsaiModel(rng.normal(size=(3, 9)), rng.normal(size=(7 * 2, 3)), rng.normal(size=(7 * 2, 3)),
                         rng.normal(size=(3, 3)), 1.0, 2, z_bias=rng.normal(size=3))
    return [protonn, bonsai]


@pytest.mark.parametrize("model", models(), ids=["protonn", "bonsai"])
@pytest.mark.parametrize("precision", ["float", "int16", "int8"])
def test_compiled_graphs_round_trip(model, precision):
    X = np.random.default_rng(1).normal(size=(64, 9)) * np.linspace(0.1, 30, 9)
    graph = tinycc_ml.compile(model, precision=precision, calibration=None if precision == "float" else X).graph
    text = print_graph(graph)
    again = parse_graph(text)
    verify(again)
    assert again.structurally_equal(graph)
    assert print_graph(again) == text
