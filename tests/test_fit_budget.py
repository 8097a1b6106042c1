"""fit keeps its time budget on wide and long data (issue 38, item 2): every family screened on a row subset
before any family's second size, the better half climbing first, a build too big for the chip refused before
any scale search, the scale search's work bounded, and what was not measured said with its reason."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.datasets import load_iris, make_classification

import tinycc_ml
import tinycc_ml.search.fit as fit_module
from tests.conftest import require_target
from tests.fake_clock import ManualClock, SpentClock
from tinycc_ml.codegen.backend import get_backend
from tinycc_ml.errors import FitError, InfeasibleError
from tinycc_ml.passes import fixed_pipeline
from tinycc_ml.search.measure import Measurement

# validation accuracy each family's fake measurement reports (the better half: linear, random-forest)
FAKE_ACCURACY = {"linear": 0.9, "random-forest": 0.8, "nearest-prototype": 0.6, "naive-bayes": 0.5}


@pytest.fixture(scope="module")
def long_data():
    """Enough rows that the search screens (at least 2 x SCREEN_MIN_ROWS training rows after validation)."""
    X, y = make_classification(n_samples=2600, n_features=6, n_informative=4, n_classes=3, random_state=0)
    return X, y


def _fake_runner(started: list):
    """run_candidate trained for real (the final check compiles the choice) but measured by a table: the order
    tasks start in is what these tests look at."""
    def run(task):
        started.append((task.family, task.screen))
        rows = task.data.screen_index if task.screen else slice(None)
        estimator = fit_module.FAMILIES[task.family].estimator(task.settings).fit(task.data.X_fit[rows],
                                                                                  task.data.y_fit[rows])
        model = fit_module.as_model(estimator)
        accuracy = FAKE_ACCURACY[task.family] + (0.0 if task.screen else 0.05)
        measurements = [Measurement(accuracy=accuracy, flash_bytes=100, ram_bytes=10, static_ram_bytes=10,
                                    const_bytes=50) for _ in task.precisions]
        return fit_module._Outcome("measured", "", estimator, model, 0.01, 0.02, measurements)

    return run


def test_every_family_is_screened_on_a_row_subset_before_any_second_size(long_data, monkeypatch):
    require_target("host")
    started: list = []
    monkeypatch.setattr(fit_module, "run_candidate", _fake_runner(started))
    res = tinycc_ml.fit(*long_data, target="host", precision="float", sizes_per_family=2, time_budget=None,
                        families="nearest-prototype,linear,naive-bayes,random-forest")
    families = {f for f, _ in started}
    assert len(families) == 4
    screening = [screen for _, screen in started]
    first_full = screening.index(False)
    assert all(screening[:first_full]) and not any(screening[first_full:])  # every screen before any full size
    assert first_full == 4  # one screening size per family
    n_fit = res.search["train_rows"]
    screened = [c for c in res.candidates if c.screen_rows is not None]
    assert {c.family for c in screened} == families
    assert all(c.screen_rows == max(fit_module.SCREEN_MIN_ROWS, n_fit // 4) < n_fit for c in screened)
    assert n_fit // 4 < fit_module.SCREEN_MIN_ROWS <= fit_module.SCREEN_MAX_ROWS
    # a fixed-size family (linear, naive Bayes) is measured again on every row
    assert [c.screen_rows for c in res.candidates if c.family == "linear"] == [1000, None]
    assert "(1,000 rows)" in screened[0].label
    assert res.as_json()["search"]["screen_rows"] == 1000


def test_the_families_that_screened_better_climb_first(long_data, monkeypatch):
    require_target("host")
    started: list = []
    monkeypatch.setattr(fit_module, "run_candidate", _fake_runner(started))
    tinycc_ml.fit(*long_data, target="host", precision="float", sizes_per_family=2, time_budget=None,
                  families="nearest-prototype,linear,naive-bayes,random-forest")
    after = [f for f, screen in started if not screen]
    better = {"linear", "random-forest"}
    last_better = max(i for i, f in enumerate(after) if f in better)
    first_worse = min(i for i, f in enumerate(after) if f not in better)
    assert last_better < first_worse, after


def test_fit_with_screening_is_deterministic(long_data):
    require_target("host")
    kwargs = {"target": "host", "precision": "float", "sizes_per_family": 2, "time_budget": None,
              "families": "nearest-prototype,linear"}
    a, b = tinycc_ml.fit(*long_data, **kwargs), tinycc_ml.fit(*long_data, **kwargs)
    key = [(c.label, c.status, c.val_accuracy, c.flash_bytes) for c in a.candidates]
    assert key == [(c.label, c.status, c.val_accuracy, c.flash_bytes) for c in b.candidates]
    assert a.chosen.label == b.chosen.label and any(c.screen_rows for c in a.candidates)


def _wide_gaussian_nb():
    from sklearn.naive_bayes import GaussianNB

    rng = np.random.default_rng(0)
    X = rng.integers(0, 256, size=(60, 784)).astype(float)
    y = np.arange(60) % 10
    return GaussianNB().fit(X, y), X


@pytest.mark.parametrize("limits, message", [
    ({}, r"does not fit the ATmega328P: needs \d+ bytes of flash"),  # its 47 KB of constants
    ({"max_ram": 1024}, r"does not fit .* bytes of static RAM .*\(has 1024\)"),  # the user's chip: 1 KB of RAM
])
def test_a_build_too_big_for_the_chip_is_refused_before_any_scale_search(monkeypatch, limits, message):
    """The issue's GaussianNB: 784 features x 10 classes, int16 on the ATmega328P (6 KB of intermediates then;
    1.7 KB of RAM on the wsqdist op since, 47 KB of constants), and on a chip of the user's whose RAM it exceeds."""
    require_target("avr")
    searches = []
    real = fixed_pipeline.search_scales
    monkeypatch.setattr(fixed_pipeline, "search_scales", lambda *a, **k: searches.append(1) or real(*a, **k))
    model, X = _wide_gaussian_nb()
    with pytest.raises(FitError, match=message):
        tinycc_ml.compile(model, target="avr", precision="int16", calibration=X, **limits)
    assert searches == []


def test_the_scale_search_of_a_wide_graph_is_capped(monkeypatch):
    require_target("host")
    from sklearn.datasets import load_iris
    from sklearn.linear_model import LogisticRegression

    X, y = load_iris(return_X_y=True)
    model = LogisticRegression(max_iter=500).fit(X, y)
    scores = []
    real = fixed_pipeline._score
    monkeypatch.setattr(fixed_pipeline, "_score", lambda *a, **k: scores.append(1) or real(*a, **k))
    monkeypatch.setenv("TINYCC_ML_CACHE", "off")
    tinycc_ml.compile(model, target="host", precision="int8", calibration=X)
    free = len(scores)
    scores.clear()
    monkeypatch.setattr(fixed_pipeline, "SEARCH_TOTAL_WORK", 1)  # as if the graph were too wide to search long
    monkeypatch.setattr(fixed_pipeline, "MIN_SEARCH_TRIALS", 4)
    tinycc_ml.compile(model, target="host", precision="int8", calibration=X)
    assert free > 4 + 1 == len(scores)  # the unadjusted build, then 4 trials
    # the cap follows the work: a wider graph, or more rows, gets fewer trials
    graph = tinycc_ml.api.as_model(model).lower()
    assert fixed_pipeline.max_search_trials(graph, 100) >= fixed_pipeline.max_search_trials(graph, 10**6)
    assert fixed_pipeline.max_search_trials(graph, 10**9) == 4


def test_wide_data_with_a_spent_budget_ends_and_says_what_it_skipped(tmp_path, monkeypatch):
    """784 features, the budget spent as soon as the run starts (an injected clock): the run ends with the
    candidates it had to measure and names every skipped one with its reason."""
    require_target("host")
    X, y = make_classification(n_samples=600, n_features=784, n_informative=30, n_classes=4, random_state=0)
    monkeypatch.setattr(fit_module, "clock", SpentClock(1000.0))
    res = tinycc_ml.fit(X, y, target="host", max_flash=32 * 1024, time_budget=15.0, n_jobs=2,
                        out_dir=tmp_path / "out")
    assert not res.complete
    text = (tmp_path / "out" / "pareto.txt").read_text()
    assert "not measured: skipped: the time budget" in text
    skipped = [c for c in res.candidates if c.status == "skipped"]
    assert skipped and all(c.note.startswith("time budget reached") for c in skipped)
    assert "skipped: time budget reached" in text  # each skipped candidate's row says why


def test_the_final_retraining_is_budgeted_from_the_start(long_data):
    """Once anything is measured, the search stops FINAL_SHARE of the budget before its end, however cheap the
    choice so far looks; more when the choice will need more."""
    from tinycc_ml.codegen.backend import get_backend
    from tinycc_ml.search.limits import Limits
    from tinycc_ml.search.pareto import Candidate

    X, y = long_data
    backend = get_backend("host")
    classes, index = np.unique(y, return_inverse=True)
    search = fit_module._Search(X, y, index, classes, backend, Limits.make("host", backend), ("float",), ("linear",),
                                100.0, 0, 2, 0.2, 8, "m")
    assert search.search_deadline() is None  # nothing measured yet: the search goes on until something is
    c = Candidate(0, "linear", {"C": 1.0}, "float", val_accuracy=0.9, val_se=0.01, flash_bytes=100, ram_bytes=10,
                  train_seconds=0.01)
    search.candidates.append(c)
    assert search.search_deadline() == pytest.approx(search.start + 100.0 - fit_module.FINAL_SHARE * 100.0)
    c.train_seconds = 20.0  # retraining on all rows now needs more than the share
    expected = 1.25 * 20.0 * search.n_all / len(search.X_fit) + fit_module.OUTPUT_SECONDS
    assert search.search_deadline() == pytest.approx(search.start + 100.0 - expected)


def test_the_final_check_simulates_only_the_rows_the_budget_affords(monkeypatch):
    """Long test data and a simulator that takes 1 s a row (an injected clock): the final check runs the
    search's own rows, then growing batches while the rate just measured says they end in time, and the run
    ends within its budget; the accuracy covers every test row, computed as the search computes it (the
    fixed-point interpreter, bit-exact with the build)."""
    require_target("avr")
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    clock = ManualClock()
    monkeypatch.setattr(fit_module, "clock", clock)
    backend = type(get_backend("avr"))
    real_simulate = backend.simulate
    batches = []

    def slow_simulate(self, out_dir, output, rows):
        batches.append(len(rows))
        clock.advance(1.0 * len(rows))
        return real_simulate(self, out_dir, output, rows)

    monkeypatch.setattr(backend, "simulate", slow_simulate)
    started = clock.now
    res = tinycc_ml.fit(X[:600], y[:600], target="avr", families="linear", precision="int8", time_budget=120.0,
                        X_test=X[600:], y_test=y[600:], refit=False, sim_rows=8)
    v = res.verification
    final = batches  # the search measured on a worker process (it has a budget): these are the final check's
    assert final[0] == 8 and len(final) > 2 and final[1] <= fit_module.FINAL_BATCH_GROWTH * 8
    assert v["simulated_rows"] == sum(final) < v["rows"] == len(X) - 600
    assert clock.now - started <= 120.0  # the budget holds on the injected clock (only the test moves it)
    compiled = fit_module.compiled_predictions(res.compiled, res.model, X[600:], "avr")
    assert v["accuracy"] == pytest.approx(np.mean(res.model.classes[compiled] == y[600:]))
    assert f"{sum(final)} of them in simavr" in res.report()


@settings(max_examples=200, deadline=None)
@given(rows=st.integers(1, 5000), done=st.integers(0, 5000), last_batch=st.integers(1, 500),
       last_seconds=st.floats(0.0, 100.0), now=st.floats(0.0, 150.0), pace=st.floats(1.0, 8.0))
def test_a_final_check_batch_ends_in_the_time_left_at_the_rate_just_measured(rows, done, last_batch, last_seconds,
                                                                            now, pace):
    """Arithmetic on an injected clock's reading (``now``) and a measured rate: no clock of this machine is read."""
    done = min(done, rows)
    search = object.__new__(fit_module._Search)
    search.time_budget, search.start = 100.0, 0.0
    search.task_times = [(pace, 1.0)]
    clock = ManualClock()
    clock.now = now
    original = fit_module.clock
    fit_module.clock = clock
    try:
        batch = search.next_batch(done, rows, last_batch, last_seconds)
    finally:
        fit_module.clock = original
    assert 0 <= batch <= min(rows - done, fit_module.FINAL_BATCH_GROWTH * last_batch)
    rate = max(last_seconds, 1e-9) / last_batch
    projected_end = now + 1.25 * rate * batch + fit_module.OUTPUT_SECONDS * pace  # on the injected clock
    assert projected_end <= search.time_budget + 1e-6 or batch == 0


def test_a_slower_machine_moves_the_search_deadline_earlier(long_data):
    """The pace (wall per CPU second of the last tasks) scales what the end of the run is expected to take:
    work measured at full pace takes four times as long on a machine four times over-subscribed, and the
    search stops that much earlier; work measured at that pace is not scaled twice."""
    from tinycc_ml.codegen.backend import get_backend as backend_of
    from tinycc_ml.search.limits import Limits
    from tinycc_ml.search.pareto import Candidate

    X, y = long_data
    backend = backend_of("host")
    classes, index = np.unique(y, return_inverse=True)
    search = fit_module._Search(X, y, index, classes, backend, Limits.make("host", backend), ("float",), ("linear",),
                                100.0, 0, 2, 0.2, 8, "m")
    c = Candidate(0, "linear", {"C": 1.0}, "float", val_accuracy=0.9, val_se=0.01, flash_bytes=100, ram_bytes=10,
                  train_seconds=4.0, status="measured")
    search.candidates.append(c)
    search.seconds[0], search.candidate_pace[0] = 2.0, 1.0
    search.task_times = [(3.0, 3.0)]
    # the predictions are arithmetic on recorded (wall, CPU) pairs: no clock is read
    retrain = 4.0 * search.n_all / len(search.X_fit)
    predicted_at_full_pace = 1.25 * (retrain + 2.0) + fit_module.OUTPUT_SECONDS
    predicted = search.final_seconds(c, True)
    assert predicted == pytest.approx(predicted_at_full_pace)
    search.task_times += [(8.0, 2.0), (4.0, 1.0), (12.0, 3.0)]  # the last three tasks ran at a quarter speed
    pace, reserve = search.pace(), search.output_seconds()
    assert pace == pytest.approx(4.0) and reserve == pytest.approx(4 * 3.0)
    predicted_slow = 1.25 * 4 * (retrain + 2.0) + 4 * fit_module.OUTPUT_SECONDS
    predicted = search.final_seconds(c, True)
    assert predicted == pytest.approx(predicted_slow)
    assert search.search_deadline() == pytest.approx(search.start + 100.0 - predicted_slow)
    search.candidate_pace[0] = 4.0  # measured at that pace already
    predicted_unscaled = 1.25 * (retrain + 2.0) + 4 * fit_module.OUTPUT_SECONDS  # from the recorded figures above
    assert search.final_seconds(c, True) == pytest.approx(predicted_unscaled)


def test_a_task_reports_its_cpu_time(monkeypatch):
    """run_candidate's CPU seconds (its thread and the tools it ran) are what the pace is read from: the difference
    of its CPU clock across the task (a fake one here, read twice: 0.5 s apart)."""
    require_target("host")
    fake_cpu_clock = [10.0, 10.5]  # the two readings the task takes, injected: no real clock is read
    readings = iter(fake_cpu_clock)
    monkeypatch.setattr(fit_module, "cpu_seconds", lambda: next(readings))
    X, y = load_iris(return_X_y=True)
    data = fit_module._Data(X[:100], y[:100], X[:100], X[100:], y[100:], X[100:108], "host", "m")
    settings = fit_module.FAMILIES["linear"].settings(1, 0, 4, 3)
    outcome = fit_module.run_candidate(fit_module._Task("linear", settings, ("float",), data))
    assert outcome.status == "measured"
    assert outcome.cpu_seconds == pytest.approx(fake_cpu_clock[1] - fake_cpu_clock[0])


def test_a_one_product_per_row_matvec_is_the_dense_sum_bit_for_bit():
    """The float interpreter's quick form for a diagonal or selection matrix (a wide GaussianNB's scalings)."""
    from tinycc_ml.ir.ops.linalg import _float_matvec_rows

    rng = np.random.default_rng(0)
    A = np.diag(rng.normal(size=100))
    A[3, 3] = 0.0  # a row without a product
    A[[5, 7]] = A[[7, 5]]  # a selection, not only a diagonal
    X = rng.normal(size=(50, 100)) * 10.0 ** rng.integers(-30, 30, size=(50, 100))
    X[0, 4] = -0.0
    quick = _float_matvec_rows([A, X], [False, True], {}, len(X), 1)
    assert np.array_equal(quick, X @ A.T) and not np.signbit(quick[quick == 0]).any()
    A[0, 1] = 1.0  # two products in a row: the dense sum
    assert np.array_equal(_float_matvec_rows([A, X], [False, True], {}, len(X), 1), X @ A.T)


def test_after_a_failed_final_check_the_next_runs_only_if_the_budget_holds_it(monkeypatch):
    """The final check of the choice always runs; when it fails, the next best is checked only if the time
    left holds it: with the budget spent, one check, then an error that says the time ran out."""
    require_target("host")
    calls = []

    def failing_check(search, candidate, estimator, model, *args):
        calls.append(candidate.label)
        return None, estimator, model, None

    monkeypatch.setattr(fit_module, "clock", SpentClock(1000.0))
    monkeypatch.setattr(fit_module, "_verify", failing_check)
    with pytest.raises(InfeasibleError, match="the time budget ran out before the next best could be checked"):
        tinycc_ml.fit(*load_iris(return_X_y=True), target="host", time_budget=10.0, families="linear,naive-bayes",
                      sizes_per_family=1)
    assert len(calls) == 1
