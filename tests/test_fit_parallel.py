"""fit on worker processes and on a Dask cluster: the same choice as one process, a whole-run time budget,
the one-standard-error rule, --jobs refused clearly, a dying worker recorded as a failed task. The
blocks of docs/guide/fit.md of fit on several cores and on a Dask cluster are checked here (tests/test_readme_blocks.py
skips them)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from sklearn.datasets import load_iris

import tinycc_ml
import tinycc_ml.search.fit as fit_module
from tests.conftest import require_target
from tests.fake_clock import SpentClock
from tests.worker_helpers import square_or_die
from tinycc_ml.errors import DataError
from tinycc_ml.search.pareto import Candidate, rank, standard_error, why
from tinycc_ml.search.workers import WorkerDied, Workers, connect

SMALL = {"families": "linear,nearest-prototype,naive-bayes", "sizes_per_family": 2, "time_budget": None,
         "max_flash": 600, "target": "host"}


@pytest.fixture(scope="module")
def iris():
    return load_iris(return_X_y=True)


@pytest.fixture(scope="module")
def one_job(iris):
    require_target("host")
    return tinycc_ml.fit(*iris, n_jobs=1, **SMALL)


def _comparable(res) -> dict:
    data = json.loads(json.dumps(res.as_json()))
    data.pop("seconds")
    for key in ("n_jobs", "n_jobs_asked", "scheduler"):
        data["search"].pop(key)
    for c in data["candidates"]:
        c.pop("train_seconds")
    return data


def test_two_worker_processes_choose_the_same_as_one(one_job, iris):
    two = tinycc_ml.fit(*iris, n_jobs=2, **SMALL)
    assert two.search["n_jobs"] == 2 and "on 2 worker processes" in two.report()
    assert _comparable(two) == _comparable(one_job)  # same candidates, ids, figures, front and choice
    assert two.files["model.c"] == one_job.files["model.c"]


def test_on_a_two_worker_dask_cluster_the_choice_is_the_same(one_job, iris):
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) \
            as cluster, distributed.Client(cluster) as client:
        res = tinycc_ml.fit(*iris, scheduler=client, **SMALL)
    assert _comparable(res) == _comparable(one_job)


def test_a_dask_worker_without_the_toolchain_is_named(monkeypatch):
    distributed = pytest.importorskip("distributed")
    from tinycc_ml.errors import ToolchainError
    from tinycc_ml.search import workers

    monkeypatch.setattr(workers, "tools_missing", lambda target: "simavr: not found")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) \
            as cluster, distributed.Client(cluster) as client:
        with pytest.raises(ToolchainError, match="1 Dask worker.*simavr: not found"):
            workers.check_cluster(client, "avr")


def test_an_unreachable_scheduler_is_one_clear_error():
    pytest.importorskip("distributed")
    with pytest.raises(DataError, match="scheduler tcp://127.0.0.1:9: cannot connect"):
        connect("tcp://127.0.0.1:9", timeout=1)


@pytest.mark.parametrize("address", ["tcp://host:notaport", "::::", "tcp://[::1", "foo://bar:1", ""])
def test_a_malformed_scheduler_address_is_one_clear_error(address):
    """Issue 36, item 10: distributed's ValueError on the address was a traceback."""
    pytest.importorskip("distributed")
    with pytest.raises(DataError, match=r"not a scheduler address such as tcp://host:8786"):
        connect(address, timeout=1)


@pytest.mark.parametrize("n_jobs", [1, 2])
def test_the_time_budget_bounds_the_whole_run_and_names_what_it_skipped(iris, tmp_path, monkeypatch, n_jobs):
    """With the budget spent from the start, fit measures the one candidate it needs for a result, skips and
    names every other size and the retraining, and still writes a verified model. (How closely the real run
    keeps its budget is measured by benchmarks/fit_budget.py, not asserted here.)"""
    require_target("host")
    budget = 10.0
    monkeypatch.setattr(fit_module, "clock", SpentClock(100 * budget))
    res = tinycc_ml.fit(*iris, target="host", time_budget=budget, sizes_per_family=4, out_dir=tmp_path / "out",
                        families="nearest-prototype,snc,linear,naive-bayes", n_jobs=n_jobs)
    measured = {(c.family, json.dumps(c.settings, sort_keys=True)) for c in res.candidates if c.status == "measured"}
    assert 1 <= len(measured) <= n_jobs  # the first to finish, and any already running beside it
    skipped = [c for c in res.candidates if c.status == "skipped"]
    assert len(skipped) >= 4 * 4 - 4 * n_jobs and all(c.note.startswith("time budget reached") for c in skipped)
    report = res.report()
    assert not res.complete and "not trained for lack of time: nearest-prototype (" in report
    assert not res.verification["refit"]
    assert saved_words(report).startswith("final model: not retrained on all 150 rows (the time budget left 0 s, "
                                          "retraining")
    saved = json.loads((tmp_path / "out" / "pareto.json").read_text())
    assert saved["search"]["skipped"] and (tmp_path / "out" / "model.c").is_file()


def test_an_unspent_budget_skips_nothing(iris, monkeypatch):
    """The same run with time to spare (the clock never moves): every size measured, the winner retrained. The
    workers still predict a task's seconds from the real seconds the tasks before took (a loaded machine makes them
    long): the budget is far above any such prediction."""
    require_target("host")
    frozen = time.perf_counter()
    monkeypatch.setattr(fit_module, "clock", lambda: frozen)
    res = tinycc_ml.fit(*iris, target="host", time_budget=3600.0, sizes_per_family=2,
                        families="nearest-prototype,linear")
    assert res.complete and not any(c.status == "skipped" for c in res.candidates)
    assert res.verification["refit"] and "not trained for lack of time" not in res.report()
    assert "final model: retrained on all 150 training rows" in res.report().splitlines()


def saved_words(report: str) -> str:
    """The report's line about the final retraining."""
    return next(line for line in report.splitlines() if line.startswith("final model:"))


def _c(i, acc, flash, n=100, **kw):
    return Candidate(i, "linear", {"C": 1.0}, "int16", val_accuracy=acc, val_se=standard_error(acc, n),
                     flash_bytes=flash, ram_bytes=10, **kw)


def test_within_one_standard_error_the_smaller_build_wins():
    best, close, far = _c(0, 0.95, 4000), _c(1, 0.93, 1000), _c(2, 0.80, 100)
    assert standard_error(0.95, 100) > 0.02
    ranked = rank([best, close, far])
    assert ranked == [close, best, far]
    text = why(close, ranked, [best, close, far])
    assert "within one standard error" in text and "one-standard-error rule" in text
    # beyond one standard error accuracy wins
    assert rank([best, _c(1, 0.90, 1000)])[0] is best
    # a perfect score on few rows still has a spread
    assert standard_error(1.0, 30) > 0.02


def test_the_standard_error_is_in_the_json_and_the_table(one_job):
    for c in one_job.as_json()["candidates"]:
        if c["status"] == "measured":
            assert c["val_accuracy_se"] == pytest.approx(standard_error(c["val_accuracy"], 30), abs=1e-6)
    assert "± SE" in one_job.files["pareto.txt"] and one_job.search["rule"].startswith("one-standard-error")


@pytest.mark.parametrize("jobs", ["0", "-2", "two", "1.5"])
def test_cli_bad_jobs_exit_2_with_one_line(jobs, tmp_path):
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    proc = subprocess.run([sys.executable, "-m", "tinycc_ml", "fit", str(tmp_path / "none.npz"), "-o",
                           str(tmp_path / "out"), f"--jobs={jobs}"], capture_output=True, text=True, env=env)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "positive whole number" in proc.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("n_jobs", [0, -2, 1.5, True, "2"])
def test_bad_n_jobs_is_refused(n_jobs, iris):
    with pytest.raises(DataError, match="n_jobs is"):
        tinycc_ml.fit(*iris, n_jobs=n_jobs, **SMALL)


def test_a_worker_that_dies_fails_its_task_only():
    with Workers(2) as workers:
        for x in range(5):
            workers.submit(x, square_or_die, x)
        out = {}
        while workers.busy:
            out.update(workers.finished())
    assert {k: v for k, v in out.items() if k != 3} == {0: 0, 1: 1, 2: 4, 4: 16}
    assert isinstance(out[3], WorkerDied) and "died" in out[3].why


def test_fuzz_script_runs_on_two_workers_and_reports_cases_per_second():
    # the cases do not depend on --jobs by construction (case K has its own seed); checked by hand on 60 cases
    proc = subprocess.run([sys.executable, "scripts/fuzz.py", "--cases", "2", "--target", "ir", "--seed", "3",
                           "--jobs", "2"], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    head, row = proc.stdout.strip().splitlines()[-2:]
    assert "cases/s" in head and "2 worker processes" in proc.stdout
    cells = dict(zip(["fuzzer", "cases", "rows", "successes", "clean", "crashes"], row.split()))  # header: names
    assert head.split()[:5] == ["fuzzer", "cases", "rows", "successes", "clean"]
    assert (cells["fuzzer"], cells["cases"], cells["crashes"]) == ("ir", "2", "0")
    assert int(cells["successes"]) + int(cells["clean"]) == 2


def test_tasks_running_at_the_budget_are_stopped_and_workers_start_again(capfd):
    with Workers(2) as workers:
        for i in range(3):
            workers.submit(i, time.sleep, 30)
        assert workers.finished(0.5) == []  # none finished: the caller decides to stop
        assert sorted(workers.stop()) == [0, 1, 2] and not workers.busy
        assert workers.finished(0.5) == []  # the stopped tasks' results never arrive
    with Workers(2) as workers:
        workers.submit("again", abs, -3)
        assert workers.finished() == [("again", 3)]
    assert "Traceback" not in capfd.readouterr().err


def test_overlapping_candidates_leave_the_build_loggers_as_found():
    """Candidates overlapping in threads (a Dask cluster in this process) each quiet the build loggers; the
    levels found before are restored after the last one (a saved-and-restored race left them at WARNING)."""
    import logging
    import threading

    from tinycc_ml.search.fit import BUILD_LOGGERS, _quiet_builds

    before = {name: logging.getLogger(name).level for name in BUILD_LOGGERS}
    inside = threading.Barrier(4)

    def candidate():
        with _quiet_builds():
            inside.wait(timeout=10)  # all four inside at once
            assert logging.getLogger("tinycc_ml.progress").getEffectiveLevel() >= logging.WARNING

    threads = [threading.Thread(target=candidate) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert {name: logging.getLogger(name).level for name in BUILD_LOGGERS} == before
