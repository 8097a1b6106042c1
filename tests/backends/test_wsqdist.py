"""GaussianNB's weighted squared distances (the wsqdist op): its C on the host and its kernels on the AVR,
Cortex-M0 and M4 equal the fixed-point interpreter bit for bit (random models, hard features, rows far out
whose terms saturate), and each kernel's cost model is within 15% of the simulator's measurement."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tinycc_ml
from tests.conftest import require_target
from tinycc_ml.ir.fixed import quantise, run_fixed
from tinycc_ml.ir.graph import Graph
from tinycc_ml.ir.types import F32, TensorType
from tinycc_ml.models.base import Model
from tinycc_ml.models.naive_bayes import GaussianNBModel

TARGETS = ["host", "avr", "cortex-m0", "cortex-m4"]
COST_TOLERANCE = 0.15
KERNELS = {"avr": "avr-wsqdist-asm", "cortex-m0": "m0-wsqdist-c", "cortex-m4": "m4-wsqdist-c"}


def random_nb(rng, classes: int, dim: int, hard: bool) -> tuple[GaussianNBModel, np.ndarray]:
    theta = rng.normal(0, 3, (classes, dim))
    var = rng.uniform(0.05, 4.0, (classes, dim))
    if hard:  # pixels constant within a class: var_smoothing's floor, far below the others (module doc)
        flat = rng.random((classes, dim)) < 0.3
        var[flat], theta[flat] = 4e-8, 0.0
    prior = rng.dirichlet(np.ones(classes))
    X = theta[rng.integers(0, classes, 200)] + rng.normal(0, 1.5, (200, dim))
    return GaussianNBModel(theta, var, np.log(prior)), X


def wsqdist_nodes(graph) -> list[str]:
    return [n for n in graph.order() if graph.op(n) == "wsqdist"]


def any_product_shift(monkeypatch):
    """The AVR without its preference for byte product shifts: the kernel's bit-shift variants run too."""
    from dataclasses import replace

    from tinycc_ml.avr.backend import AvrBackend

    plain = AvrBackend.target_attributes
    monkeypatch.setattr(AvrBackend, "target_attributes", lambda self: replace(plain(self), byte_shift_bits=0))


@pytest.mark.parametrize("target", TARGETS + ["avr any shift"])
@settings(max_examples=6, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(classes=st.integers(2, 6), dim=st.integers(1, 70), hard=st.booleans(), seed=st.integers(0, 10**6))
def test_wsqdist_code_equals_the_interpreter(monkeypatch, target, classes, dim, hard, seed):
    if target == "avr any shift":
        target = "avr"
        any_product_shift(monkeypatch)
    check(target, classes, dim, hard, seed)


def test_the_avr_kernels_saturating_and_shift_variants_run():
    """A model (seed 0, 40 features, hard ones) whose soft terms can leave int16 at x's ends (the kernel's
    saturation, "c") and whose hard weights are powers of two (x shifted per term, "s")."""
    import re

    names = set(re.findall(r"wsqdist_k\d+_\d+s?c?\b", check("avr", 3, 40, True, 0)))
    assert any(n.endswith("c") for n in names) and any(n.endswith("s") for n in names), names


def check(target, classes, dim, hard, seed) -> str:
    """The compiled model's scores equal the interpreter's on its rows and far ones; its C."""
    require_target(target)
    rng = np.random.default_rng(seed)
    model, X = random_nb(rng, classes, dim, hard)
    rows = np.concatenate([X[:6], X[6:12] * rng.uniform(-4, 4, (6, dim))])  # far rows: saturated terms
    with tempfile.TemporaryDirectory() as d:
        res = tinycc_ml.compile(model, target=target, precision="int16", calibration=X, out_dir=d, name="m")
        assert wsqdist_nodes(res.graph)
        o = res.output
        x = quantise(rows, o.input_scale, 16)
        want = run_fixed(res.graph, x)
        c_text = (Path(d) / "m.c").read_text()
        if target == "host":
            assert np.array_equal(res.load().scores(rows), want["scores"])
            return c_text
        from tinycc_ml.runtime.simulate import run_on_target
        chosen = {r["node"]: r["kernel"] for r in o.kernels if "node" in r}
        assert all(chosen.get(n) == KERNELS[target] for n in wsqdist_nodes(res.graph)), chosen
        run = run_on_target(target, [Path(d) / "m.c"], Path(d) / "m.h", "m", x, o.n_scores, o.input_ctype,
                            o.score_ctype)
        assert np.array_equal(run.scores, want["scores"])
        assert np.array_equal(run.predictions, want["prediction"])
        return c_text


@pytest.mark.parametrize("target", ["avr", "cortex-m0", "cortex-m4"])
@pytest.mark.parametrize("data", ["digits", "breast_cancer"])
def test_wsqdist_cost_model_within_15_percent(target, data):
    """The kernel the cost model chose for each wsqdist, predicted against the simulator's per-function profile."""
    require_target(target)
    from sklearn.datasets import load_breast_cancer, load_digits
    from sklearn.naive_bayes import GaussianNB

    from tinycc_ml.codegen.backend import get_backend
    from tinycc_ml.runtime.profile import measure_kernels

    X, y = {"digits": load_digits, "breast_cancer": load_breast_cancer}[data](return_X_y=True)
    est = GaussianNB().fit(X[::2], y[::2])
    with tempfile.TemporaryDirectory() as d:
        res = tinycc_ml.compile(est, target=target, precision="int16", calibration=X[::2], out_dir=d, name="m")
        prof = measure_kernels(get_backend(target), Path(d), res.output, X[1::2][:4])
    assert "per_node" in prof, prof
    unit = prof["unit"]
    rows = [r for r in prof["per_node"] if res.graph.op(r["node"]) == "wsqdist"]
    assert len(rows) == len(wsqdist_nodes(res.graph))
    for r in rows:
        assert r.get(f"predicted_{unit}"), r
        assert abs(r[f"predicted_{unit}"] - r[f"measured_{unit}"]) <= COST_TOLERANCE * r[f"measured_{unit}"], r


class WeightedNearest(Model):
    """Scores -sum_j (W_cj x_j - T_cj)^2: a float graph with a wsqdist (GaussianNB's float builds keep their
    mat-vecs), for the op's float C."""

    family = "weighted_nearest_test"

    def __init__(self, W, T):
        self.W, self.T = W, T

    input_dim = property(lambda self: self.W.shape[1])
    n_outputs = property(lambda self: self.W.shape[0])

    def arrays(self):
        return {"W": self.W, "T": self.T}

    def scores(self, X):
        return -np.sum((self._check_input(X)[:, None, :] * self.W[None] - self.T[None]) ** 2, axis=2)

    def lower(self):
        g = Graph("wn")
        x = g.add("input", attrs={"name": "x"}, type=TensorType((self.input_dim,), F32), name="x")
        d = g.add("wsqdist", [x, g.add("const", attrs={"value": self.W.astype(np.float32)}, name="W"),
                              g.add("const", attrs={"value": self.T.astype(np.float32)}, name="T")], name="d")
        s = g.add("scale", [d], {"factor": -1.0}, name="s")
        g.set_output("scores", s)
        g.set_output("prediction", g.add("argmax", [s], name="pred"))
        return g


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(classes=st.integers(1, 5), dim=st.integers(1, 40), seed=st.integers(0, 10**6))
def test_wsqdist_float_code_equals_the_float_semantics(classes, dim, seed):
    require_target("host")
    rng = np.random.default_rng(seed)
    W = rng.normal(0, 2, (classes, dim)) * (rng.random((classes, dim)) < 0.7)  # zero terms: not stored
    T = rng.normal(0, 2, (classes, dim)) * (W != 0)
    model = WeightedNearest(W, T)
    X = rng.normal(0, 3, (20, dim))
    got = tinycc_ml.compile(model, name="m").load().scores(X)
    want = -np.sum((X.astype(np.float32)[:, None, :] * W.astype(np.float32)[None] - T.astype(np.float32)[None]) ** 2,
                   axis=2)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
