"""Fixed-point compilation end to end: host C agrees bit for bit with the fixed-point
interpreter, the result tracks the float model, and bad calibration data is refused."""

import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.datasets import load_digits

import tinycc_ml
from tinycc_ml.errors import CompileError, DataError
from tinycc_ml.ir.fixed import quantise, run_fixed
from tinycc_ml.models.protonn import ProtoNNModel, init_protonn


@st.composite
def protonn_models(draw):
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    D, d, m, L = draw(st.integers(2, 24)), draw(st.integers(1, 8)), draw(st.integers(1, 12)), draw(st.integers(2, 5))
    W = rng.normal(size=(d, D)) * draw(st.sampled_from([0.05, 1.0, 20.0]))
    W[rng.random(W.shape) < draw(st.sampled_from([0.0, 0.6, 0.9]))] = 0.0
    X = rng.normal(size=(40, D)) * draw(st.sampled_from([0.1, 1.0, 50.0])) + draw(st.sampled_from([0.0, 3.0]))
    B = (X[rng.integers(0, 40, m)] @ W.T).T + rng.normal(size=(d, m)) * 0.1
    Z = rng.normal(size=(L, m))
    dist = np.sqrt(((X @ W.T)[:, :, None] - B[None]) ** 2).sum(axis=1)
    gamma = draw(st.sampled_from([0.5, 2.5])) / max(np.median(dist), 1e-3)
    std = rng.uniform(0.5, 2.0, D) if draw(st.booleans()) else None
    mean = rng.normal(size=D) if std is not None else None
    return ProtoNNModel(W, B, Z, gamma, mean, std), X


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(protonn_models(), st.sampled_from(["int16", "int8"]))
def test_host_c_is_bit_exact_with_the_fixed_interpreter(case, precision):
    model, X = case
    result = tinycc_ml.compile(model, precision=precision, calibration=X, search=False)
    predictor = result.load()
    rng = np.random.default_rng(1)
    # calibration rows, rows beyond the calibrated range (they must saturate, not wrap), and noise
    rows = np.concatenate([X, X * 3.0, rng.normal(size=X.shape) * np.abs(X).max() * 2])
    Xq = quantise(rows, result.output.input_scale, 16)
    expected = run_fixed(result.graph, Xq)
    scores, predictions = predictor.run_raw(Xq)
    np.testing.assert_array_equal(scores, expected["scores"])
    np.testing.assert_array_equal(predictions, expected["prediction"])


def test_generated_integer_code_has_no_float_and_no_int64():
    X, y = load_digits(return_X_y=True)
    model = init_protonn(X[:600], y[:600], projection_dim=8, prototypes_per_class=2)
    result = tinycc_ml.compile(model, precision="int16", calibration=X[:600])
    from tinycc_ml.codegen.float_input import FLOAT_SECTION

    inference, float_input = result.files["protonn.c"].split(FLOAT_SECTION)  # the float input comes last
    source = re.sub(r"/\*.*?\*/", "", inference, flags=re.S)
    assert not re.search(r"\b(float|double|int64_t|long long)\b", source)
    assert "protonn_predict_float" in float_input and "int64_t" not in float_input
    assert "saturate" in result.files["protonn.h"]


@pytest.fixture(scope="module")
def digits_case():
    X, y = load_digits(return_X_y=True)
    model = init_protonn(X[:1200], y[:1200], projection_dim=12, prototypes_per_class=4)
    return model, X, y


@pytest.mark.parametrize("precision,max_loss", [("int16", 0.3), ("int8", 1.5)])
def test_fixed_point_accuracy_tracks_float(digits_case, precision, max_loss):
    model, X, y = digits_case
    result = tinycc_ml.compile(model, precision=precision, calibration=X[:1200])
    predictor = result.load()
    float_acc = np.mean(model.predict(X[1200:]) == y[1200:])
    fixed_acc = np.mean(predictor.predict(X[1200:]) == y[1200:])
    assert 100 * (float_acc - fixed_acc) <= max_loss
    report = result.report
    assert report["agreement_with_float"] > 0.97
    assert set(v["overflow_safety"] for v in report["values"].values()) <= {"proven", "calibration", "input"}
    assert "proven" in {v["overflow_safety"] for v in report["values"].values()}
    (table,) = report["exp_tables"]
    assert table["table_bytes"] > 0 and table["max_abs_error"] <= 2.0**-10


def test_search_never_does_worse_than_the_plain_choice(digits_case):
    model, X, _ = digits_case
    plain = tinycc_ml.compile(model, precision="int16", calibration=X[:400], search=False)
    searched = tinycc_ml.compile(model, precision="int16", calibration=X[:400])
    assert searched.report["held_out_disagreements"] <= plain.report["held_out_disagreements"]


@pytest.mark.parametrize("make_bad,message", [
    (lambda X: X[:, :10], "shape"),
    (lambda X: np.where(np.arange(X.shape[1]) == 3, np.nan, X), "NaN"),
    (lambda X: np.where(np.arange(X.shape[1]) == 3, np.inf, X), "Inf"),
    (lambda X: X[:3], "rows"),
    (lambda X: X.astype(str), "dtype"),
])
def test_bad_calibration_data_is_refused(digits_case, make_bad, message):
    model, X, _ = digits_case
    with pytest.raises(DataError, match=message):
        tinycc_ml.compile(model, precision="int16", calibration=make_bad(X[:100]))


def test_integer_precision_without_calibration_is_refused(digits_case):
    with pytest.raises(CompileError, match="calibration"):
        tinycc_ml.compile(digits_case[0], precision="int16")


@pytest.mark.parametrize("precision", ["int16", "int8"])
def test_the_searchs_trial_builds_leave_the_analysed_graph_as_it_was(precision):
    """The scale search builds each trial from the analysed float graph itself, not a copy (choose_scales, the
    first pass, only reads it): the graph and its analyses stay as they were, trial after trial."""
    import warnings
    from dataclasses import replace

    from sklearn.neural_network import MLPClassifier

    from tinycc_ml.ir.text import print_graph
    from tinycc_ml.passes.fixed_pipeline import FIXED_PASSES, analyse_ranges, prepare_input
    from tinycc_ml.passes.manager import PassContext, PassOptions, run_passes

    X, y = load_digits(return_X_y=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # not converged: the model is what is compiled
        model = MLPClassifier((12,), max_iter=20, random_state=0).fit(X, y)
    graph = tinycc_ml.api.as_model(model).lower_for(precision)
    ctx = PassContext(options=PassOptions(precision=precision, fold_mean=True))
    graph = analyse_ranges(prepare_input(graph, X, ctx), ctx)
    before = print_graph(graph) + "\n".join(graph.analyses.describe())
    for name in graph.order():
        for delta in (-2, 1):
            trial = PassContext(options=replace(ctx.options, scale_adjust={name: delta}), debug=False)
            run_passes(graph, FIXED_PASSES[:3], trial)
    assert print_graph(graph) + "\n".join(graph.analyses.describe()) == before
