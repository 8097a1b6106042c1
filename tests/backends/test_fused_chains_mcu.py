"""Fused element-wise chains on the microcontrollers: a layer's bias and clamp computed in the mat-vec's store
(16-bit arithmetic on the AVR, whose int is 16 bits), the chain's last value stored offset-binary with its
sum for the next mat-vec kernel, on rows far beyond the calibration (so that the steps saturate): bit-exact
with the fixed-point interpreter (the Cortex-M0's input clamp, whose lower bound is below 0, binds on both
sides too)."""

from __future__ import annotations

import numpy as np
import pytest

import tinycc_ml
from tests.backends.test_fixed_ops import GraphModel
from tinycc_ml.ir.fixed import quantise, run_fixed
from tinycc_ml.ir.graph import Graph
from tinycc_ml.ir.types import F32, TensorType


def two_layers(rng) -> Graph:
    """x -> W1 x -> b1 - . -> relu -> * 0.75 -> W2 . -> + b2 -> clip -> * 1.5 -> W3 . -> + b3: an add and a
    sub (the chain's value as either operand), clips at 0 and two-sided, each chain a mat-vec's store."""
    g = Graph("g")
    x = g.add("input", attrs={"name": "x"}, type=TensorType((6,), F32), name="x")
    h = g.add("matvec", [g.add("const", attrs={"value": rng.normal(size=(7, 6)).astype(np.float32)}), x], name="h")
    b1 = g.add("const", attrs={"value": (-1 - 0.5 * np.abs(rng.normal(size=7))).astype(np.float32)}, name="b1")
    z = g.add("sub", [b1, h], name="z")  # the chain's value as the second operand
    a = g.add("scale", [g.add("clip", [z], {"lo": 0.0, "hi": 3.0e38}, name="relu")], {"factor": 0.75}, name="a")
    h2 = g.add("matvec", [g.add("const", attrs={"value": rng.normal(size=(5, 7)).astype(np.float32)}), a],
               name="h2")
    z2 = g.add("add", [h2, g.add("const", attrs={"value": (rng.normal(size=5) * 3).astype(np.float32)})], name="z2")
    a2 = g.add("scale", [g.add("clip", [z2], {"lo": -0.7, "hi": 1.3}, name="clamp")], {"factor": 1.5}, name="a2")
    h3 = g.add("matvec", [g.add("const", attrs={"value": rng.normal(size=(3, 5)).astype(np.float32)}), a2], name="h3")
    scores = g.add("add", [h3, g.add("const", attrs={"value": rng.normal(size=3).astype(np.float32)})],
                   name="scores")
    g.set_output("scores", scores)
    g.set_output("prediction", g.add("argmax", [scores], name="prediction"))
    return g


@pytest.mark.parametrize("sim_target", ["avr", "cortex-m0"], indirect=True)
def test_fused_chains_feeding_kernels_are_bit_exact_where_they_saturate(sim_target, tmp_path):
    from tinycc_ml.codegen.backend import get_backend

    rng = np.random.default_rng(5)
    g = two_layers(rng)
    # features of different spreads: the input clamp (one range for all) lets the wide ones through
    X = rng.normal(size=(64, 6)) * np.array([0.05, 0.1, 1.0, 0.3, 0.02, 0.5])
    rows = np.concatenate([X[:16], X[:16] * 40, -X[16:32] * 40, rng.normal(size=(16, 6)) * 3])
    result = tinycc_ml.compile(GraphModel(g), target=sim_target, precision="int16", calibration=X, search=False,
                               out_dir=tmp_path, name="ch")
    fused = result.graph.analyses.fused
    assert any(len(chain) >= 2 for chain in fused.values()), fused  # a bias and a clamp in a mat-vec's store
    source = (tmp_path / "ch.c").read_text()
    assert "^ 0x8000u);" in source  # a chain's last value stored offset-binary for the next kernel
    Xq = quantise(rows, result.output.input_scale, 16)
    clamp = result.graph.node("x_clamped")  # the input clamp binds on both sides too
    assert (Xq < clamp.attrs["lo"]).any() and (Xq > clamp.attrs["hi"]).any() and clamp.attrs["lo"] < 0
    expected = run_fixed(result.graph, Xq)
    run = get_backend(sim_target).simulate(tmp_path, result.output, rows)
    np.testing.assert_array_equal(np.asarray(run.scores, dtype=np.int64), expected["scores"])
    np.testing.assert_array_equal(run.predictions, expected["prediction"])
    inner = result.graph.copy()  # the chains' steps saturate on the far rows
    steps = [n for chain in fused.values() for n in chain]
    for n in steps:
        inner.set_output(n, n)
    values = run_fixed(inner, Xq)
    assert any(np.any(values[n] == 32767) or np.any(values[n] == -32768) for n in steps)
    assert len(np.unique(expected["scores"], axis=0)) > 8



@pytest.mark.parametrize("sim_target", ["avr", "cortex-m0"], indirect=True)
def test_folded_kernel_epilogues_are_bit_exact_where_they_saturate(sim_target, tmp_path):
    """MLPs' bias, relu and offset-binary store in the mat-vec kernels' epilogues (backends/folded_epilogue.py;
    also a layer's plain add, a signed saturation, and the scores' bias), int16 and int8, two networks whose
    scales take the kernels' different shifts, on rows far beyond the calibration (the layers saturate):
    bit-exact with the interpreter, batch and streaming."""
    import re
    import warnings

    from sklearn.datasets import load_digits
    from sklearn.neural_network import MLPClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from tests.backends.test_mcu import check_exact

    X, y = load_digits(return_X_y=True)
    rows = np.concatenate([X[400:416], X[416:432] * 4, -X[432:448] * 3, np.full((2, 64), 40.0)])
    folded = set()
    for hidden in ((12, 10), (8, 8)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est = make_pipeline(StandardScaler(), MLPClassifier(hidden, max_iter=60, random_state=0))
            est.fit(X[:400], y[:400])
        for precision in ("int16", "int8"):
            out = tmp_path / f"{len(hidden)}{precision}"
            result = tinycc_ml.compile(est, target=sim_target, precision=precision, calibration=X[:400],
                                       out_dir=out, name="fe")
            folded |= set(re.findall(r"\bfe_mac\w*(e\d+n\d+r?o?)\(", (out / "fe.c").read_text()))
            check_exact(result, out, rows, target=sim_target)
            if hidden == (12, 10):  # the streaming entry points: feed() in C, the tail's folded kernels
                check_exact(result, out, rows, target=sim_target, stream=True)
            Xq = quantise(rows, result.output.input_scale, 16)
            inner = result.graph.copy()
            steps = [n for head, chain in result.graph.analyses.fused.items() for n in (head, *chain)]
            for n in steps:
                inner.set_output(n, n)
            values = run_fixed(inner, Xq)
            assert any(np.any(np.abs(values[n]) >= 32767) for n in steps)  # the layers saturate
    assert any(name.endswith("ro") for name in folded), folded  # a relu layer stored offset-binary, summed
    assert any(re.fullmatch(r"e\d+n\d+", name) for name in folded), folded  # a signed saturation, stored as is
