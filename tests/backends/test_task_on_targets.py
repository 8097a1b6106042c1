"""The task entry points on every target: ``<prefix>_predict_value`` of both regressors trained on
scikit-learn's diabetes data and ``<prefix>_predict_labels`` of a multilabel ProtoNN (top-k and
threshold rules), compiled at int16 and int8 and run on the host (cffi), the simulated ATmega328P
(simavr) and Cortex-M0 (QEMU, and unicorn once): bit-exact with the fixed-point interpreter."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_diabetes, make_multilabel_classification
from threadpoolctl import threadpool_limits

import tinycc_ml
from tests.conftest import require_target
from tinycc_ml.ir.fixed import quantise, run_fixed
from tinycc_ml.models.base import multilabel_indicator
from tinycc_ml.models.protonn_trainer import ProtoNNClassifier
from tinycc_ml.models.regressors import BonsaiRegressor, ProtoNNRegressor
from tinycc_ml.runtime.simulate import SCORE_DTYPES, run_on_target

N_ROWS = 60
MODELS = {
    "protonn_reg": lambda: ProtoNNRegressor(budget_bytes=2048, n_iter=20, random_state=0),
    "bonsai_reg": lambda: BonsaiRegressor(budget_bytes=2048, epochs=10, random_state=0),
    "protonn_top3": lambda: ProtoNNClassifier(budget_bytes=4096, n_iter=10, multilabel_rule="top_k",
                                              multilabel_k=3, random_state=0),
    "protonn_thr": lambda: ProtoNNClassifier(budget_bytes=4096, n_iter=10, multilabel_threshold=0.4,
                                             random_state=0),
}


@pytest.fixture(scope="module")
def datasets():
    X, y = load_diabetes(return_X_y=True)
    Xm, Y = make_multilabel_classification(n_samples=400, n_features=20, n_classes=8, n_labels=3, random_state=0)
    return {"regression": (X[:340], y[:340], X[340:340 + N_ROWS]), "multilabel": (Xm[:300], Y[:300], Xm[300:])}


@pytest.fixture(scope="module", params=sorted(MODELS))
def model(request, datasets):
    kind = "regression" if request.param.endswith("_reg") else "multilabel"
    X, y, rows = datasets[kind]
    with threadpool_limits(limits=1):
        est = MODELS[request.param]().fit(X, y)
    model = est.to_model()
    assert model.task["kind"] == kind
    return request.param, model, X, rows


def expected(result, rows):
    """What the entry point must give: the fixed-point interpreter's scores, read by the task's rule."""
    o = result.output
    Xq = quantise(rows, o.input_scale, 16).astype(np.int16)
    scores = run_fixed(result.graph, Xq)["scores"]
    if o.task["kind"] == "regression":
        return Xq, scores[:, 0]
    scale = result.graph.type(result.graph.output("scores")).dtype.scale
    return Xq, multilabel_indicator(scores * 2.0**-scale, o.task)


def run_task(result, out, Xq, target, method="auto"):
    o = result.output
    return run_on_target(target, [str(out / f"{o.prefix}.c")], str(out / f"{o.prefix}.h"), o.prefix, Xq,
                         o.n_scores, o.input_ctype, o.score_ctype, extra_cflags=("-Werror",), method=method,
                         task=o.task["kind"])


def check(result, run, want):
    if result.output.task["kind"] == "regression":
        assert run.labels is None and run.values.dtype == SCORE_DTYPES[result.output.score_ctype]
        np.testing.assert_array_equal(run.values, want)
        np.testing.assert_array_equal(run.values, run.scores[:, 0])  # the value is the single score
    else:
        assert run.values is None and run.labels.dtype == np.uint8
        np.testing.assert_array_equal(run.labels, want)
        assert 0 < want.sum() < want.size  # the rule picks some labels, not all
        if result.output.task["rule"] == "top_k":
            assert np.all(run.labels.sum(axis=1) == result.output.task["k"])


@pytest.mark.parametrize("precision", ["int16", "int8"])
@pytest.mark.parametrize("target", ["host", "avr", "cortex-m0"])
def test_task_entry_point_bit_exact(model, target, precision, tmp_path):
    require_target(target)
    name, m, X, rows = model
    out = tmp_path / name
    result = tinycc_ml.compile(m, target=target, precision=precision, calibration=X, out_dir=out, name=name)
    Xq, want = expected(result, rows)
    if target == "host":
        predictor = result.load()
        got = predictor.values_raw(rows) if m.task["kind"] == "regression" else predictor.labels(rows)
        np.testing.assert_array_equal(got, want)
        run = get_backend_run(result, out, rows)
    else:
        run = run_task(result, out, Xq, target)
        assert run.stack_bytes > 0
    check(result, run, want)


def get_backend_run(result, out, rows):
    from tinycc_ml.codegen.backend import get_backend

    return get_backend(result.target).simulate(out, result.output, rows)


def test_unicorn_runs_the_task_entry_points(model, tmp_path):
    require_target("cortex-m0", "unicorn")
    name, m, X, rows = model
    out = tmp_path / name
    result = tinycc_ml.compile(m, target="cortex-m0", precision="int16", calibration=X, out_dir=out, name=name)
    Xq, want = expected(result, rows[:12])
    check(result, run_task(result, out, Xq, "cortex-m0", method="unicorn"), want)


@pytest.mark.parametrize("target", ["host", "avr", "cortex-m0"])
def test_float_regression_value_on_targets(datasets, target, tmp_path):
    """Float builds: the value the C returns is the float model's, to float32 rounding."""
    require_target(target)
    X, y, rows = datasets["regression"]
    with threadpool_limits(limits=1):
        model = ProtoNNRegressor(budget_bytes=2048, n_iter=10, random_state=0).fit(X, y).to_model()
    result = tinycc_ml.compile(model, target=target, precision="float", out_dir=tmp_path, name="fv")
    run = get_backend_run(result, tmp_path, rows[:20])
    assert run.values.dtype == np.float32
    np.testing.assert_allclose(run.values, model.predict(rows[:20]), rtol=1e-4, atol=1e-3)
