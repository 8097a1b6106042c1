"""``tinycc_ml.fit``: the most accurate model that fits a chip, measured on the target.

    result = tinycc_ml.fit(X, y, target="avr", max_flash=16 * 1024, max_ms=50, out_dir="build")
    result.model, result.compiled, result.chosen, result.candidates, result.front

The search trains every family (``candidates.FAMILIES``) along a ladder of sizes derived from the
limits, compiles each trained model at each precision, and measures it (``measure.py``): validation
accuracy of the compiled code on a stratified split of the training rows, flash and RAM of the real
build, cycles (AVR, exact) or instructions (Cortex-M0, exact; ms through a stated cycles-per-
instruction) in the simulator. The choice follows the one-standard-error rule (``pareto.rank``): the
smallest feasible build within one standard error of the best validation accuracy; it is retrained on
all training rows (``refit``) and verified in the simulator on the test rows (or the validation rows),
where it must meet every limit again, else the next one is taken.

Each task (one family at one size: train, then compile and measure at each precision) runs in this
process or on workers (``n_jobs``, ``scheduler``: ``workers.py``); with a time budget, one job runs on a
worker process too, so that it can be stopped. A family's next size is planned from its own
measurements, so families are independent chains; candidate ids are renumbered to a fixed round-robin
order, so the result does not depend on the workers or the order tasks finish in.

Multi-fidelity: with at least 2 x ``SCREEN_MIN_ROWS`` training rows, each family's first size trains on a
stratified quarter of them (at least ``SCREEN_MIN_ROWS``, at most ``SCREEN_MAX_ROWS``; not kNN, whose
size is its rows): every family is screened before any family's second size starts; then the families
whose screening was in the better half (best feasible validation accuracy) climb their ladders on every
row first, the others after them (successive halving: the budget cuts the worse half first). A fixed-size
family (linear, naive Bayes) is measured again on every row. A build that cannot fit the chip whatever
its scales is refused before the compiler's scale search (``Backend.check_size_floor``), whose work is
bounded for wide graphs.

Determinism: for one ``random_state`` and the same data the candidates, their order, the split, the
screening rows, the training and every measurement are the same, so the result is too, unless the time
budget ends the search early. The budget covers the whole call: from the start ``FINAL_SHARE`` of it (or
the end of the run as expected for the choice so far, ``final_seconds``, when more) is kept for
retraining the choice on all rows and its final check; a size is started only while the time left
exceeds that and what the family's previous size took; sizes still running when it is spent are
stopped; retraining is left out when it would not fit. These estimates follow the machine's pace in this
run (``_Search.pace``: wall seconds per CPU second of the last tasks): when other work slows the machine
down, the end of the run is expected to take longer and the search stops earlier; the final check then
simulates its rows in growing batches, each only while the rate just measured says it ends in time, and
the plot is left out when the pace says it would not fit. What was left out is recorded (``skipped``,
pareto.txt's "not measured" lines, each candidate's note, the plot's foot) and ``complete`` is False;
how far a search gets then depends on the machine's speed. BLAS and OpenMP run on one thread in
every task, so the thread settings of the environment do not change the sums (k-means, matrix
products) and with them the models.
"""

from __future__ import annotations

import json
import logging
import math
import tempfile
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tinycc_ml.api import as_model
from tinycc_ml.codegen.backend import get_backend
from tinycc_ml.codegen.emitter import check_prefix
from tinycc_ml.errors import DataError, InfeasibleError, TinyccError
from tinycc_ml.files import write_tree
from tinycc_ml.models.saved import FLOAT32_MAX
from tinycc_ml.progress import Progress
from tinycc_ml.runtime.simulate import SIMULATORS
from tinycc_ml.search.candidates import FAMILIES, FAMILY_ORDER, HOST_FLASH, Ladder, describe_settings, start_settings
from tinycc_ml.search.limits import Limits
from tinycc_ml.search.measure import compile_for, compiled_predictions, measure
from tinycc_ml.search.pareto import (
    RULE,
    Candidate,
    closest,
    not_measured,
    pareto_front,
    rank,
    standard_error,
    table,
    why,
)
from tinycc_ml.search.plot import pareto_png
from tinycc_ml.search.workers import WorkerDied, Workers, check_jobs, check_scheduler

log = logging.getLogger(__name__)

DEFAULT_TIME_BUDGET = 300.0
CALIBRATION_ROWS = 1024
FIRMWARE_RESERVE = 4096  # flash the ladder leaves for the rest of a firmware when no max_flash is given
CODE_ESTIMATE = 1024  # model code beside its constants on a microcontroller, until measured
PRUNE_MARGIN = 1.15  # a build predicted above limit x this is not compiled
HOPELESS = 4.0  # ... not even as the first size of a family
clock = time.perf_counter  # the search's clock, read only by this process (tests put a fake one in its place)
STOP_GRACE = 1.0  # seconds past the search's deadline before candidates running on workers are stopped
SIMULATED_PER_SECOND = 2e7  # cycles (simavr) or instructions (QEMU, unicorn) a second, a low guess (simavr runs
# 70e6 a second on an idle core: 1,298 rows of a 208,000-cycle model in 4 s)
FINAL_SHARE = 0.1  # of the time budget kept from the start for retraining the choice and its final check
FINAL_SIMULATION_SHARE = 0.05  # of the time budget planned for the final check's simulated rows, at most
SCREEN_MIN_ROWS = 1000  # a family's first size trains on a quarter of the rows, at least these (see _Search) ...
SCREEN_MAX_ROWS = 4000  # ... and at most these (long data: every family is screened quickly)
OUTPUT_SECONDS = 3.0  # writing the outputs (the plot imports matplotlib) at the end of a budgeted run, at full pace
RECENT_TASKS = 3  # the machine's pace is read from the wall and CPU seconds of the last tasks that ran
FINAL_BATCH_GROWTH = 4  # each batch of the final check's simulated rows at most this many times the last
MIN_TIME_BUDGET = OUTPUT_SECONDS  # a smaller budget is refused; one spent early still buys the first candidate
FORMAT = "tinycc-ml-fit"
# loggers of the steps run for every candidate: their INFO lines would bury the search's own (kept at -vv)
BUILD_LOGGERS = ("tinycc_ml.api", "tinycc_ml.passes", "tinycc_ml.runtime", "tinycc_ml.codegen",
                 "tinycc_ml.avr", "tinycc_ml.arm", "tinycc_ml.host", "tinycc_ml.buildsys",
                 "tinycc_ml.progress", "tinycc_ml.train")


_quiet = {"depth": 0, "saved": {}}
_quiet_lock = threading.Lock()


@contextmanager
def _quiet_builds():
    """Build loggers at WARNING while candidates run (unless -vv). Tasks may overlap in threads (a Dask
    cluster in this process): the first in saves the levels, the last out restores them."""
    if logging.getLogger("tinycc_ml").getEffectiveLevel() <= logging.DEBUG:
        yield
        return
    with _quiet_lock:
        if _quiet["depth"] == 0:
            _quiet["saved"] = {name: logging.getLogger(name).level for name in BUILD_LOGGERS}
            for name in BUILD_LOGGERS:
                logging.getLogger(name).setLevel(max(_quiet["saved"][name], logging.WARNING))
        _quiet["depth"] += 1
    try:
        yield
    finally:
        with _quiet_lock:
            _quiet["depth"] -= 1
            if _quiet["depth"] == 0:
                for name, level in _quiet["saved"].items():
                    logging.getLogger(name).setLevel(level)


@dataclass
class FitResult:
    model: object  # the chosen Model (retrained on all rows when refit)
    estimator: object  # its fitted estimator
    compiled: object  # CompileResult of the chosen build
    chosen: Candidate
    candidates: list[Candidate]
    front: list[Candidate]
    limits: Limits
    verification: dict
    complete: bool
    seconds: float
    reason: str
    search: dict = field(default_factory=dict)  # data sizes and the search's settings (for pareto.json)
    trained: dict = field(default_factory=dict)  # candidate id -> its Model (trained on the search's split)
    files: dict[str, str | bytes] = field(default_factory=dict)
    out_dir: Path | None = None
    plot_note: str = ""
    phase_seconds: dict = field(default_factory=dict)  # seconds of the search, the final check, the outputs

    @property
    def paths(self) -> list[Path]:
        return [self.out_dir / n for n in self.files] if self.out_dir else []

    def report(self) -> str:
        """The Pareto front (the choice marked), why it won, and its check in the simulator."""
        unit = self.limits.count_unit
        v = self.verification
        lines = [f"limits: {self.limits.describe()}",
                 f"searched {len(self.candidates)} candidates in {self.seconds:.0f} s"
                 + (f" on {self.search['n_jobs']} worker processes" if self.search.get("n_jobs", 1) > 1 else "")
                 + (f" ({self.search['n_jobs_asked']} asked for; capped at the {self.search['n_jobs']} core(s) "
                    "available)" if self.search.get("n_jobs_asked", 1) > self.search.get("n_jobs", 1) else "")
                 + (f" on the Dask cluster at {self.search['scheduler']}" if self.search.get("scheduler") else "")
                 + ("" if self.complete else " (time budget reached: the search stopped early)"),
                 *([f"not trained for lack of time: {_grouped(self.search['skipped'])}"]
                   if self.search.get("skipped") else []),
                 self._refit_words(),
                 *[f"not measured: {line}" for line in not_measured(self.candidates)],
                 "", "Pareto front (validation accuracy / flash / latency; * = chosen):",
                 table(self.front if self.chosen in self.front else [*self.front, self.chosen], unit, self.chosen),
                 "", self.reason + ".",
                 (f"verified on {v['rows']} {v['rows_from']} rows in {v['method']}: "
                  if v.get("simulated_rows", v["rows"]) == v["rows"] else
                  f"verified on {v['rows']} {v['rows_from']} rows ({v['simulated_rows']} of them in {v['method']}, "
                  "the time budget's share; the accuracy over all of them as the search computes it, equal on "
                  "those): ")
                 + ("" if v["accuracy"] is None else f"accuracy {100 * v['accuracy']:.2f}%, ")
                 + f"flash {v['flash_bytes']:,} B, RAM {v['ram_bytes']:,} B"
                 + ("" if v["count_max"] is None else f", max {v['count_max']:,} {unit} ({v['ms_max']:.2f} ms)")
                 + ("" if not v["refit"] else " (retrained on all training rows)")]
        return "\n".join(lines)

    def _refit_words(self) -> str:
        """Whether the chosen model was retrained on every training row, and if not, why, in words."""
        search = self.search
        rows = search.get("train_rows", 0) + search.get("validation_rows", 0)
        if self.verification.get("refit"):
            return f"final model: retrained on all {rows:,} training rows"
        trained_rows = self.chosen.screen_rows or search.get("train_rows", 0)
        trained_on = f"it is the search's model, trained on {trained_rows:,} rows"
        why_not = search.get("refit_skipped") or "refit=False asked for no retraining"
        return f"final model: not retrained on all {rows:,} rows ({why_not}); {trained_on}"

    def as_json(self) -> dict:
        unit = self.limits.count_unit
        return {"format": FORMAT, "version": 1, "target": self.limits.target, "chip": self.limits.chip,
                "limits": self.limits.as_json(), "search": self.search, "complete": self.complete,
                "seconds": round(self.seconds, 1),
                "candidates": [c.as_json(unit) for c in self.candidates],
                "front": [c.id for c in self.front],
                "chosen": {"id": self.chosen.id, "label": self.chosen.label, "reason": self.reason,
                           "verification": self.verification}}


def _grouped(skipped: list[str]) -> str:
    """``["mlp 64 hidden units", "mlp 128 hidden units", "knn k=1"]`` as "mlp (64 hidden units, 128 hidden
    units); knn (k=1)": each family once, its sizes in order."""
    families: dict[str, list[str]] = {}
    for entry in skipped:
        family, _, size = entry.partition(" ")
        families.setdefault(family, []).append(size)
    return "; ".join(f"{family} ({', '.join(sizes)})" for family, sizes in families.items())


def _precisions(precision, backend) -> tuple[str, ...]:
    if precision in (None, "auto"):
        wanted = ("float", "int16", "int8") if getattr(backend, "chip", None) is None else ("int16", "int8")
    elif isinstance(precision, str):
        wanted = (precision,)
    else:
        wanted = tuple(precision)
    for p in wanted:
        if p not in ("float", "int16", "int8"):
            raise DataError(f"precision {p!r} is not one of auto, float, int16, int8")
        if p not in backend.precisions:
            raise DataError(f"target {backend.name} supports precision {', '.join(backend.precisions)}, not {p}")
    if not wanted:
        raise DataError("no precision to try")
    return tuple(dict.fromkeys(wanted))


def _families(families) -> tuple[str, ...]:
    if families is None:
        return FAMILY_ORDER
    if isinstance(families, str):
        families = [f for f in families.replace(" ", ",").split(",") if f]
    names = tuple(dict.fromkeys(families))
    for f in names:
        if f not in FAMILIES:
            raise DataError(f"unknown model family {f!r}; families: {', '.join(FAMILY_ORDER)}")
    if not names:
        raise DataError(f"no model family to try; families: {', '.join(FAMILY_ORDER)}")
    return tuple(f for f in FAMILY_ORDER if f in names)


def _rows(X, what: str, n_features: int | None = None) -> np.ndarray:
    X = np.asarray(X)
    if X.dtype.kind not in "biuf":
        raise DataError(f"{what}: dtype {X.dtype}, expected bool, integer or real float values")
    if X.ndim != 2 or X.shape[0] == 0 or X.shape[1] == 0:
        raise DataError(f"{what}: shape {X.shape}, expected (rows, features)")
    if n_features is not None and X.shape[1] != n_features:
        raise DataError(f"{what}: {X.shape[1]} features, the training rows have {n_features}")
    X = X.astype(np.float64)
    if not np.all(np.isfinite(X)):
        row, col = np.argwhere(~np.isfinite(X))[0]
        raise DataError(f"{what}: row {row}, column {col} holds {X[row, col]} (NaN or Inf)")
    if X.size and np.max(np.abs(X)) > FLOAT32_MAX:  # the scalers square them; the compiled code holds float32
        row, col = np.argwhere(np.abs(X) > FLOAT32_MAX)[0]
        raise DataError(f"{what}: row {row}, column {col} holds {X[row, col]:g}, beyond the float32 range of the "
                        "compiled code (scale the features)")
    return X


def _labels(y, n: int, what: str) -> np.ndarray:
    if y is None:
        raise DataError(f"{what}: no labels; fit needs a class label per row")
    y = np.asarray(y)
    if y.dtype.kind == "f" and y.ndim == 1 and np.all(np.isfinite(y)) and np.all(y == np.round(y)):
        if y.size and np.max(np.abs(y)) >= 2.0**63:
            raise DataError(f"{what}: label {y[np.argmax(np.abs(y))]:g} is beyond int64, the widest label type")
        y = y.astype(np.int64)  # whole-number labels stored as floats
    if y.dtype.kind == "u" and y.size and int(np.max(y)) > 2**63 - 1:
        raise DataError(f"{what}: label {int(np.max(y))} is beyond int64, the widest label type")
    if y.dtype.kind not in "biuU":
        raise DataError(f"{what}: dtype {y.dtype}, expected integer or string class labels (fit searches "
                        "classifiers)")
    if y.ndim != 1 or len(y) != n:
        raise DataError(f"{what}: shape {y.shape}, expected one label per row ({n})")
    return y


def _check_data(X, y, X_test, y_test):
    X = _rows(X, "X")
    y = _labels(y, len(X), "y")
    classes, index, counts = np.unique(y, return_inverse=True, return_counts=True)
    if len(classes) < 2:
        raise DataError(f"y holds a single class ({classes[0]!r}); at least two classes are needed")
    if counts.min() < 2:
        raise DataError(f"y: class {classes[int(np.argmin(counts))]!r} has {counts.min()} row; fit needs at least 2 "
                        "per class (a stratified validation split holds out some of each)")
    if (X_test is None) != (y_test is None):
        raise DataError("X_test and y_test go together: give both or neither")
    if X_test is not None:
        X_test = _rows(X_test, "X_test", X.shape[1])
        y_test = _labels(y_test, len(X_test), "y_test")
    return X, y, classes, index.reshape(-1), X_test, y_test


def _positive_number(value, what: str, integer: bool = False):
    if value is None:
        return None
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0
    if not ok or (integer and value != int(value)):
        raise DataError(f"{what} is {value!r}; expected a positive {'whole number' if integer else 'number'}")
    return int(value) if integer else float(value)


@dataclass
class _Data:
    """What a worker needs to train and measure a candidate (sent with each task)."""
    X_fit: np.ndarray
    y_fit: np.ndarray
    calibration: np.ndarray
    X_val: np.ndarray
    val_index: np.ndarray
    X_sim: np.ndarray
    target: str
    name: str
    screen_index: np.ndarray | None = None  # the rows a screening task trains on (None: no screening)


@dataclass
class _Task:
    family: str
    settings: dict
    precisions: tuple[str, ...]
    data: _Data
    deadline: float | None = None  # time.time() after which the task is not started
    predicted_seconds: float = 0.0  # ... nor when it would end after the deadline
    screen: bool = False  # train on the screening rows only


@dataclass
class _Outcome:
    status: str  # "measured", "failed", "skipped"
    note: str = ""
    estimator: object = None
    model: object = None
    train_seconds: float = 0.0
    seconds: float = 0.0  # training and every measurement
    measurements: list = field(default_factory=list)
    cpu_seconds: float = 0.0  # CPU time of the task (its thread and the tools it ran); 0: not known


def cpu_seconds() -> float:
    """CPU time of this thread and of the child processes waited for (compilers, simulators)."""
    try:
        import resource
    except ImportError:  # not on Windows: the thread's own time
        return time.thread_time()
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.thread_time() + children.ru_utime + children.ru_stime


def run_candidate(task: _Task) -> _Outcome:
    """Train one family at one size and measure it at each precision (run in a worker process)."""
    from threadpoolctl import threadpool_limits


    now = time.time()
    if task.deadline is not None and now >= task.deadline:
        return _Outcome("skipped", "time budget reached")
    if task.deadline is not None and now + task.predicted_seconds > task.deadline:
        return _Outcome("skipped", f"time budget reached (would take ~{task.predicted_seconds:.0f} s)")
    d = task.data

    get_backend(d.target)  # imported before the clock starts: a fresh worker's imports are not training time
    fresh = FAMILIES[task.family].estimator(task.settings)
    X_fit, y_fit = (d.X_fit[d.screen_index], d.y_fit[d.screen_index]) if task.screen else (d.X_fit, d.y_fit)
    t0, cpu0 = time.perf_counter(), cpu_seconds()
    # one BLAS / OpenMP thread: the same sums whatever the environment, and workers do not oversubscribe
    with threadpool_limits(limits=1), _quiet_builds():
        try:
            estimator = fresh.fit(X_fit, y_fit)
            model = as_model(estimator)
        except TinyccError as exc:
            return _Outcome("failed", " ".join(str(exc).split()))
        train_seconds = time.perf_counter() - t0
        measurements = [measure(model, d.target, p, d.calibration, d.X_val, d.val_index, d.X_sim, d.name)[0]
                        for p in task.precisions]
    return _Outcome("measured", "", estimator, model, train_seconds, time.perf_counter() - t0, measurements,
                    cpu_seconds() - cpu0)


@dataclass
class _Plan:
    family: str
    size: int
    rung: int
    settings: dict
    records: list = field(default_factory=list)  # (precision, fields) of pruned / skipped candidates
    active: tuple[str, ...] = ()
    screen_rows: int | None = None  # trained on this many rows (screening), None: on every search row


class _Search:
    """The state of one search: data split, ladders, candidates, the models trained."""

    kept_settings: dict = {}  # the user's own settings every candidate keeps (fit's start_from)

    def __init__(self, X, y, index, classes, backend, limits, precisions, families, time_budget, random_state,
                 sizes_per_family, validation_fraction, sim_rows, name, n_jobs=1, scheduler=None, start=None,
                 refit=True, final_rows=0):
        from sklearn.model_selection import train_test_split

        self.backend, self.limits, self.precisions = backend, limits, precisions
        self.target, self.name, self.random_state = limits.target, name, random_state
        self.time_budget, self.n_jobs, self.scheduler = time_budget, n_jobs, scheduler
        self.refit, self.final_rows = refit, final_rows
        n_val = max(int(math.ceil(validation_fraction * len(X))), len(classes))
        if len(X) - n_val < len(classes):
            raise DataError(f"{len(X)} rows are too few for {len(classes)} classes and a validation split")
        fit_rows, val_rows = train_test_split(np.arange(len(X)), test_size=n_val, stratify=index,
                                              random_state=random_state)
        self.n_all = len(X)
        self.X_fit, self.y_fit = X[fit_rows], y[fit_rows]
        self.X_val, self.val_index = X[val_rows], index[val_rows]
        self.calibration = self.X_fit[:CALIBRATION_ROWS]
        self.X_sim = self.X_val[:sim_rows]
        # multi-fidelity: with many rows, each family's first size trains on a stratified quarter of them
        # (screening), so every family is measured early; the more promising half climbs first (see priority)
        n_screen = min(SCREEN_MAX_ROWS, max(SCREEN_MIN_ROWS, len(fit_rows) // 4))
        self.screen_index = None
        if 2 * n_screen <= len(fit_rows):
            self.screen_index, _ = train_test_split(np.arange(len(fit_rows)), train_size=n_screen,
                                                    stratify=index[fit_rows], random_state=random_state)
            self.screen_index = np.sort(self.screen_index)
        self.data = _Data(self.X_fit, self.y_fit, self.calibration, self.X_val, self.val_index, self.X_sim,
                          self.target, name, self.screen_index)
        chip = getattr(backend, "chip", None)
        if limits.max_flash is not None:
            self.flash_plan = float(limits.max_flash)
        elif chip is not None:
            self.flash_plan = float(chip.flash - FIRMWARE_RESERVE)
        else:
            self.flash_plan = float(HOST_FLASH)
        code = 0 if chip is None else CODE_ESTIMATE
        D, L = X.shape[1], len(classes)
        self.n_classes = L
        self.ladders = {f: Ladder(FAMILIES[f], precisions, self.flash_plan, code, D, L, len(self.X_fit),
                                  sizes_per_family) for f in families}
        for f, ladder in self.ladders.items():
            if self.screens(f) and ladder.family.fixed_size:  # its one size again, on every row
                ladder.sizes.append(ladder.sizes[0])
        self.candidates: list[Candidate] = []
        self.models: dict[int, tuple[object, object]] = {}  # candidate id -> (estimator, model)
        self.seconds: dict[int, float] = {}  # candidate id -> seconds to train and measure its family's size
        self.start = clock() if start is None else start
        self.complete = True
        self.skipped: list[str] = []  # what the time budget left out, in words
        self._order: dict[int, tuple] = {}  # candidate -> (family, rung, n-th record of that size)
        self._last: dict[str, tuple[int, float, float, int]] = {}  # family -> (size, seconds, training seconds,
        # rows) of its last task
        self.task_times: list[tuple[float, float]] = []  # (wall, CPU seconds) of each measured task, as they end
        self.candidate_pace: dict[int, float] = {}  # candidate id -> the pace of the task that measured it
        self.family_pace: dict[str, float] = {}  # family -> the pace of its last task

    # ------------------------------------------------------------ time
    def elapsed(self) -> float:
        return clock() - self.start

    def screens(self, family: str) -> bool:
        """Whether ``family``'s first size trains on the screening rows (not kNN: its size is its rows)."""
        return self.screen_index is not None and family != "knn"

    def priority(self, plan: _Plan) -> tuple:
        """Which queued size runs first (successive halving): every family's screening size, then the sizes
        of the families whose screening was in the better half (best feasible validation accuracy), then
        the rest; the budget cuts the last ones first."""
        if plan.screen_rows is not None:
            return (0,)
        screened = {}
        for c in self.candidates:
            if c.screen_rows is not None:
                best = c.val_accuracy if c.feasible else -1.0
                screened[c.family] = max(screened.get(c.family, -1.0), best)
        order = sorted(screened, key=lambda f: (-screened[f], list(self.ladders).index(f)))
        better = order[: max(1, math.ceil(len(self.ladders) / 2))]
        return (1 if plan.family in better or plan.family not in screened else 2,)

    def pace(self, times: list[tuple[float, float]] | None = None) -> float:
        """Wall seconds per CPU second of ``times`` (default: the last RECENT_TASKS tasks), at least 1: how much
        slower than its own work a task runs on this machine now, other processes taking their share of the
        cores. 1 before any task is measured."""
        times = self.task_times[-RECENT_TASKS:] if times is None else times
        cpu = sum(c for _, c in times)
        return max(1.0, sum(w for w, _ in times) / cpu) if cpu > 0 else 1.0

    def slowdown_since(self, then: float) -> float:
        """How many times longer work measured at pace ``then`` takes now (at least 1: a machine that got
        faster is not counted on)."""
        return max(1.0, self.pace() / then)

    def output_seconds(self) -> float:
        """Writing the outputs at the machine's pace now."""
        return OUTPUT_SECONDS * self.pace()

    def final_seconds(self, c: Candidate, refit: bool) -> float:
        """Seconds the end of the run is expected to take for ``c``: its retraining on all rows (its
        training time scaled by the rows), its final check (one more measurement plus the simulated
        rows at ``SIMULATED_PER_SECOND`` counts a second), each at the machine's pace now against the pace
        they were measured at, x1.25, plus the outputs."""
        rows = c.screen_rows or len(self.X_fit)
        slower = self.slowdown_since(self.candidate_pace.get(c.id, 1.0))
        train = (c.train_seconds or 0.0) * self.n_all / rows * slower if refit else 0.0
        simulate = (c.count or 0) * self.final_rows / SIMULATED_PER_SECOND * self.pace()
        if self.time_budget is not None:  # the final check simulates only the rows it can afford (see _verify)
            simulate = min(simulate, FINAL_SIMULATION_SHARE * self.time_budget)
        return 1.25 * (train + self.seconds.get(c.id, 0.0) * slower + simulate) + self.output_seconds()

    def next_batch(self, done: int, rows: int, last_batch: int, last_seconds: float) -> int:
        """How many more of ``rows`` final-check rows to simulate after ``done``, the last batch of
        ``last_batch`` rows having taken ``last_seconds``: at most FINAL_BATCH_GROWTH times that batch, and
        only as many as end, at its rate (x1.25), before the outputs must start (all of them without a budget)."""
        if self.time_budget is None:
            return rows - done
        left = self.time_budget - self.elapsed() - self.output_seconds()
        affordable = int(max(0.0, left) / (1.25 * max(last_seconds, 1e-9) / last_batch))
        return max(0, min(rows - done, FINAL_BATCH_GROWTH * last_batch, affordable))

    def affords(self, seconds: float) -> bool:
        """Whether ``seconds`` more of work ends within the time budget (always, without one)."""
        return self.time_budget is None or self.elapsed() + seconds <= self.time_budget

    def final_reserve(self) -> float:
        """``final_seconds`` of the best candidate so far (0 when there is none)."""
        best = rank(self.candidates)
        return self.final_seconds(best[0], self.refit) if best else 0.0

    def search_deadline(self) -> float | None:
        """``clock`` time after which no candidate is started (None: no budget, or nothing measured yet):
        the budget less the end of the run, at least FINAL_SHARE of the budget from the start."""
        if self.time_budget is None or not any(c.status == "measured" for c in self.candidates):
            return None
        floor = FINAL_SHARE * self.time_budget if self.refit else self.output_seconds()
        return self.start + self.time_budget - max(floor, self.final_reserve())

    def out_of_time(self) -> bool:
        """Whether the search's share of the budget is spent; the search goes on until one candidate is
        measured, so it has a result."""
        deadline = self.search_deadline()
        return deadline is not None and clock() >= deadline

    # ------------------------------------------------------------ candidates
    def add(self, family: str, settings: dict, precision: str, rung: int = 0, **fields) -> Candidate:
        c = Candidate(len(self.candidates), family, settings, precision, **fields)
        self._order[c.id] = (family, rung, sum(1 for o in self._order.values() if o[:2] == (family, rung)))
        self.candidates.append(c)
        return c

    def _renumber(self) -> None:
        """Ids in the order of a round-robin search (round by round, families in order), whatever the order
        the workers finished in: rung r of every family is round r; refinements come after the longest
        family's planned sizes."""
        planned = {f: len(lad.sizes) - lad.refinements for f, lad in self.ladders.items()}
        longest = max(planned.values(), default=0)
        families = list(self.ladders)

        def key(c):
            family, rung, n = self._order[c.id]
            rnd = rung if rung < planned[family] else longest + rung - planned[family]
            return rnd, families.index(family), n

        old = sorted(self.candidates, key=key)
        mapping = {c.id: i for i, c in enumerate(old)}
        for c in old:
            c.id = mapping[c.id]
        self.candidates = old
        self.models = {mapping[i]: m for i, m in self.models.items()}
        self.seconds = {mapping[i]: s for i, s in self.seconds.items()}
        self.candidate_pace = {mapping[i]: p for i, p in self.candidate_pace.items()}

    def plan(self, family: str, ladder: Ladder, size: int, rung: int) -> _Plan:
        fam = FAMILIES[family]
        settings = {**fam.settings(size, self.random_state, self.X_fit.shape[1], self.n_classes),
                    **self.kept_settings}
        plan = _Plan(family, size, rung, settings,
                     screen_rows=len(self.screen_index) if rung == 0 and self.screens(family) else None)
        predicted = {p: ladder.predicted_flash(p, size) for p in self.precisions}
        cheapest = min(self.precisions, key=lambda p: (predicted[p], self.precisions.index(p)))
        active = []
        for p in self.precisions:
            # the first size is measured whatever the prediction (it teaches the ladder each precision's
            # cost, and an infeasible search can then name real figures), unless hopelessly large
            must = rung == 0 and (p == cheapest or not fam.fixed_size) and predicted[p] <= HOPELESS * self.flash_plan
            if ladder.is_blocked(p, size):
                plan.records.append((p, {"status": "pruned", "note": "this size or a smaller one of this family "
                                                                     "broke the latency or RAM limit, or could not "
                                                                     "be built"}))
            elif predicted[p] > PRUNE_MARGIN * self.flash_plan and not must:
                plan.records.append((p, {"status": "pruned", "failed": ["flash"],
                                         "predicted_flash_bytes": int(predicted[p]),
                                         "note": f"predicted flash {predicted[p]:,.0f} B > {self.flash_plan:,.0f} B"}))
            else:
                active.append(p)
        plan.active = tuple(active)
        return plan

    def task(self, plan: _Plan) -> _Task:
        deadline = self.search_deadline()
        predicted = 0.0
        rows = plan.screen_rows or len(self.X_fit)
        if plan.family in self._last:  # training grows with the rows, both with the size
            size, seconds, train, last_rows = self._last[plan.family]
            predicted = (seconds + train * (max(1.0, rows / last_rows) - 1)) * max(1.0, plan.size / max(size, 1))
            predicted *= self.slowdown_since(self.family_pace.get(plan.family, 1.0))
        elif self._last:  # a family's first size: as long as the other families' sizes took (the median)
            predicted = float(np.median([seconds for _, seconds, *_ in self._last.values()]))
        wall = None if deadline is None else time.time() + (deadline - clock())
        return _Task(plan.family, plan.settings, plan.active, self.data, wall, predicted, plan.screen_rows is not None)

    def skip(self, plan: _Plan, note: str = "time budget reached") -> None:
        self.complete = False
        self.skipped.append(f"{plan.family} {describe_settings(plan.family, plan.settings)}")
        for p in self.precisions:
            self.add(plan.family, plan.settings, p, plan.rung, status="skipped", note=note,
                     screen_rows=plan.screen_rows)

    def run(self) -> None:
        """Every family climbs its own ladder (the next size of a family is planned from what its earlier
        sizes measured, so each family is a chain, the families independent of each other): one task per
        family at a time, on ``n_jobs`` workers. Ids follow a round-robin order whatever finishes first."""
        total = sum(len(lad.sizes) if lad.family.fixed_size else lad.n_rungs for lad in self.ladders.values())
        next_rung = dict.fromkeys(self.ladders, 0)
        with Progress("fit: training and measuring", total=total, unit="sizes", logger=log) as bar, \
                Workers(self.n_jobs, self.scheduler, self.target, stoppable=self.time_budget is not None) as workers:

            def start(family: str) -> None:
                ladder = self.ladders[family]
                while True:
                    if next_rung[family] >= len(ladder.sizes):
                        if self.out_of_time() or not ladder.refine():
                            return
                        bar.total = max(bar.total or 0, bar.done + 1)
                    rung = next_rung[family]
                    plan = self.plan(family, ladder, ladder.sizes[rung], rung)
                    next_rung[family] += 1
                    if self.out_of_time():
                        self.skip(plan)
                        bar.advance(1, note=family)
                        continue
                    if plan.active:
                        log.info("fit: training %s %s", family, describe_settings(family, plan.settings))
                        workers.submit(plan, run_candidate, lambda plan=plan: self.task(plan),  # deadline when sent
                                       priority=lambda plan=plan: self.priority(plan))
                        return
                    self.apply(plan, None)
                    bar.advance(1, note=family)

            for family in self.ladders:
                start(family)
            while workers.busy:
                deadline = self.search_deadline()
                wait = None if deadline is None else max(0.0, deadline + STOP_GRACE - clock())
                finished = workers.finished(wait)
                if not finished and wait is not None and workers.can_stop:
                    # the budget is spent: candidates still running on workers are stopped, not waited for
                    for plan in workers.stop():
                        self.apply(plan, _Outcome("skipped", "time budget reached (stopped while running)"))
                        bar.advance(1, note=plan.family)
                    break
                for plan, outcome in finished:
                    self.apply(plan, outcome)
                    bar.advance(1, note=plan.family)
                    start(plan.family)
            for family, ladder in self.ladders.items():  # sizes planned but never started (stopped above)
                while next_rung[family] < len(ladder.sizes):
                    rung = next_rung[family]
                    self.skip(self.plan(family, ladder, ladder.sizes[rung], rung))
                    next_rung[family] += 1
                    bar.advance(1, note=family)
        self._renumber()

    def apply(self, plan: _Plan, outcome: _Outcome | None) -> None:
        ladder = self.ladders[plan.family]
        for p, fields_ in plan.records:
            self.add(plan.family, plan.settings, p, plan.rung, screen_rows=plan.screen_rows, **fields_)
        if outcome is not None:
            if isinstance(outcome, WorkerDied):
                outcome = _Outcome("failed", outcome.why)
            if outcome.status == "skipped":
                self.complete = False
                self.skipped.append(f"{plan.family} {describe_settings(plan.family, plan.settings)}")
                for p in plan.active:
                    self.add(plan.family, plan.settings, p, plan.rung, status="skipped", note=outcome.note,
                             screen_rows=plan.screen_rows)
            elif outcome.status == "failed":
                for p in plan.active:
                    self.add(plan.family, plan.settings, p, plan.rung, status="failed", note=outcome.note,
                             screen_rows=plan.screen_rows)
            else:
                self._last[plan.family] = (plan.size, outcome.seconds, outcome.train_seconds,
                                           plan.screen_rows or len(self.X_fit))
                if outcome.cpu_seconds > 0:
                    self.task_times.append((outcome.seconds, outcome.cpu_seconds))
                self.family_pace[plan.family] = self.pace([(outcome.seconds, outcome.cpu_seconds)])
                for p, m in zip(plan.active, outcome.measurements):
                    self.record(plan, p, m, outcome)
        if plan.rung == 0:
            ladder.extend()

    def record(self, plan: _Plan, precision: str, m, outcome: _Outcome) -> None:
        ladder, size = self.ladders[plan.family], plan.size
        c = self.add(plan.family, plan.settings, precision, plan.rung, train_seconds=round(outcome.train_seconds, 2),
                     screen_rows=plan.screen_rows)
        self.models[c.id] = (outcome.estimator, outcome.model)
        self.candidate_pace[c.id] = self.pace([(outcome.seconds, outcome.cpu_seconds)])
        self.seconds[c.id] = (outcome.seconds - outcome.train_seconds) / max(1, len(plan.active))
        if m.error is not None:
            c.status, c.failed, c.note = "failed", [m.misfit], m.error
            ladder.block(precision, size)
            log.info("fit: %s: %s", c.label, m.error)
            return
        for key in ("flash_bytes", "ram_bytes", "static_ram_bytes", "stack_bytes", "const_bytes",
                    "firmware_flash_bytes", "firmware_ram_bytes", "count"):
            setattr(c, key, getattr(m, key))
        c.val_accuracy = m.accuracy
        c.val_se = standard_error(m.accuracy, len(self.X_val))
        c.ms = self.limits.ms(m.count)
        c.failed = self.limits.failed(m.flash_bytes, m.ram_bytes, m.count)
        if m.extra.get("simulator_disagrees"):
            c.failed.append("simulator")
            c.note = "the simulator's predictions differ from the fixed-point interpreter's (a compiler bug)"
        ladder.learn(precision, size, m.const_bytes, m.flash_bytes)
        if "latency" in c.failed or "ram" in c.failed:
            ladder.block(precision, size)  # larger sizes are slower and bigger still
        log.info("fit: %s: validation %.2f%%, flash %s B, RAM %s B%s%s", c.label, 100 * c.val_accuracy,
                 f"{c.flash_bytes:,}", f"{c.ram_bytes:,}",
                 "" if c.count is None else f", {c.count:,} {self.limits.count_unit} ({c.ms:.2f} ms)",
                 "" if c.feasible else f"; breaks {', '.join(c.failed)}")


def _infeasible(search: _Search) -> InfeasibleError:
    near = closest(search.candidates)
    unit = search.limits.count_unit
    if not near:
        pruned = sorted((c for c in search.candidates if c.predicted_flash_bytes is not None),
                        key=lambda c: (c.predicted_flash_bytes, c.id))[:3]
        named = "; ".join(f"{c.label} (predicted flash {c.predicted_flash_bytes:,} B)" for c in pruned)
        return InfeasibleError(f"no candidate meets {search.limits.describe()}: none could be built within it"
                               + (f"; closest: {named}" if named else
                                  f" ({len(search.candidates)} candidates: pruned, skipped or failed)"),
                               [c.as_json(unit) for c in pruned])
    parts = []
    for c in near:
        figures = f"flash {c.flash_bytes:,} B, RAM {c.ram_bytes:,} B" if c.flash_bytes is not None else c.note
        if c.count is not None:
            figures += f", {c.ms:.2f} ms"
        parts.append(f"{c.label} ({figures}; breaks {', '.join(c.failed)})")
    return InfeasibleError(f"no candidate meets {search.limits.describe()}; closest: " + "; ".join(parts),
                           [c.as_json(unit) for c in near])


def _verify(search: _Search, candidate: Candidate, estimator, model, X_rows, y_rows, rows_from: str, refit: bool,
            X, y) -> tuple[dict | None, object, object, object]:
    """Compile (after retraining on all rows when ``refit``) and run the chosen build on ``X_rows`` in the
    simulator: (verification, estimator, model, compile result); verification None when a limit breaks.
    With a time budget the simulator runs as many of the rows as the time left affords (``simulated_rows``,
    at least the search's own; ``_simulate_affordable``), the accuracy then coming from what the target
    computes on every row (the fixed-point interpreter, bit-exact with the build, as in the search), checked
    equal on the simulated rows."""
    calibration = X[:CALIBRATION_ROWS] if refit else search.calibration
    if refit:
        log.info("fit: retraining %s on all %d training rows", candidate.label, len(X))
        estimator = FAMILIES[candidate.family].estimator(dict(candidate.settings)).fit(X, y)
        model = as_model(estimator)
    result = compile_for(model, search.target, candidate.precision, calibration, search.name)
    run, counts = _simulate_affordable(search, result, X_rows)
    simulated = len(run.predictions)
    predictions = np.asarray(run.predictions, dtype=np.int64)
    if simulated < len(X_rows):
        everywhere = np.asarray(compiled_predictions(result, model, X_rows, search.target), dtype=np.int64)
        if not np.array_equal(everywhere[:simulated], predictions) and candidate.precision != "float":
            log.warning("fit: %s: the %s run disagrees with the fixed-point interpreter on %d of %d rows",
                        candidate.label, search.target, int(np.sum(everywhere[:simulated] != predictions)), simulated)
            return None, estimator, model, result
        predictions = everywhere
    flash = int(run.model_flash_bytes if run.model_flash_bytes is not None else result.output.const_bytes)
    ram = int(run.model_ram_bytes if run.model_ram_bytes is not None else result.output.ram_bytes)
    ram += int(run.stack_bytes or 0)
    count = None if counts is None else int(np.max(counts))
    accuracy = None
    if y_rows is not None:
        accuracy = float(np.mean(model.classes[predictions] == y_rows))
    failed = search.limits.failed(flash, ram, count)
    verification = {"rows": int(len(X_rows)), "rows_from": rows_from, "method": run.method, "accuracy": accuracy,
                    "simulated_rows": int(simulated),
                    "flash_bytes": flash, "ram_bytes": ram, "stack_bytes": run.stack_bytes,
                    "firmware_flash_bytes": run.flash_bytes, "firmware_ram_bytes": run.ram_bytes,
                    "count_max": count, "count_mean": None if counts is None else float(np.mean(counts)),
                    "ms_max": search.limits.ms(count), "refit": refit, "failed": failed}
    if failed:
        log.warning("fit: %s%s breaks %s on the %s rows", candidate.label, " retrained" if refit else "",
                    ", ".join(failed), rows_from)
        return None, estimator, model, result
    return verification, estimator, model, result


def _simulate_affordable(search: _Search, result, X_rows: np.ndarray):
    """Run the build on the first of ``X_rows`` in the simulator, as many as the time left affords: the
    search's own number of rows first, then growing batches, each sized by the rate the last one ran at
    (``_Search.next_batch``), so a machine that slows down shortens the check instead of overrunning the budget.
    Returns the first run (its sizes) holding every batch's predictions and the peak stack, and the cycle or
    instruction counts of every row (None where the simulator counts none)."""
    batches, predictions, counts = [], [], []
    with tempfile.TemporaryDirectory(prefix="tinycc-ml-fit-") as tmp:
        for file_name, text in result.files.items():
            (Path(tmp) / file_name).write_text(text)
        done, batch = 0, len(X_rows) if search.time_budget is None else min(len(X_rows), len(search.X_sim))
        while batch > 0:
            t0 = clock()
            run = search.backend.simulate(Path(tmp), result.output, X_rows[done:done + batch])
            batches.append(run)
            predictions.append(np.asarray(run.predictions))
            ran = run.cycles if run.cycles is not None else run.instructions
            counts.append(None if ran is None else np.asarray(ran))
            done += batch
            batch = search.next_batch(done, len(X_rows), batch, clock() - t0)
    first = batches[0]
    first.predictions = np.concatenate(predictions)
    stacks = [r.stack_bytes for r in batches if r.stack_bytes is not None]
    first.stack_bytes = max(stacks) if stacks else None
    if len(batches) > 1:
        log.info("fit: final check: %d rows simulated in %d batches", done, len(batches))
    return first, None if counts[0] is None else np.concatenate(counts)


@dataclass(frozen=True)
class FitArguments:
    """``fit``'s arguments but the data, checked (``check_arguments``)."""
    backend: object
    limits: Limits
    prefix: str
    precisions: tuple
    names: tuple
    kept_settings: dict
    time_budget: float | None
    sizes_per_family: int
    sim_rows: int
    n_jobs: int  # capped at the cores available
    jobs_asked: int


def check_arguments(target: str = "avr", max_flash=None, max_ram=None, max_ms=None, clock_hz=None,
                    precision="auto", families=None, time_budget=DEFAULT_TIME_BUDGET, random_state: int = 0,
                    name: str = "model", sizes_per_family: int = 4, validation_fraction: float = 0.2,
                    sim_rows: int = 8, n_jobs: int = 1, scheduler=None, start_from=None) -> FitArguments:
    """Every argument of ``fit`` but the data, checked before any data is read or any work done: DataError
    (or ToolchainError: the target's simulator is missing) naming the value at fault. A scheduler address is
    probed (``workers.check_scheduler``)."""
    backend = get_backend(target)
    limits = Limits.make(target, backend, max_flash, max_ram, max_ms, clock_hz)
    prefix = check_prefix(name)
    precisions = _precisions(precision, backend)
    names = _families(families)
    kept_settings: dict = {}
    if start_from is not None:
        family, kept_settings = start_settings(start_from)
        if families is not None and family not in names:
            raise DataError(f"start_from is a {family} estimator, but families {', '.join(names)} leave it out")
        names = (family,)
    time_budget = _positive_number(time_budget, "time_budget")
    if time_budget is not None and time_budget < MIN_TIME_BUDGET:
        raise DataError(f"time_budget is {time_budget:g} s; fit needs at least {MIN_TIME_BUDGET:g} s (what it keeps "
                        "for writing the outputs; a budget spent before the search is done still trains, measures "
                        "and writes the one candidate a result needs)")
    sizes_per_family = _positive_number(sizes_per_family, "sizes_per_family", integer=True)
    sim_rows = _positive_number(sim_rows, "sim_rows", integer=True)
    jobs_asked = n_jobs
    n_jobs = check_jobs(n_jobs)
    if not isinstance(random_state, (int, np.integer)) or isinstance(random_state, bool):
        raise DataError(f"random_state is {random_state!r}; expected an integer")
    if not 0 <= random_state < 2**32:  # numpy's and scikit-learn's seeds
        raise DataError(f"random_state is {random_state}; expected an integer in [0, 2^32)")
    if isinstance(validation_fraction, bool) or not isinstance(validation_fraction, (int, float)) \
            or not 0 < validation_fraction < 1:
        raise DataError(f"validation_fraction is {validation_fraction!r}; expected a fraction in (0, 1)")
    if getattr(backend, "chip", None) is not None:
        if backend.simulator is None:
            raise DataError(f"target {target} has no simulator to measure its builds")
        SIMULATORS.load(backend.simulator).require()  # ToolchainError before any training
    if isinstance(scheduler, str):
        check_scheduler(scheduler)
    return FitArguments(backend, limits, prefix, precisions, names, kept_settings, time_budget, sizes_per_family,
                        sim_rows, n_jobs, jobs_asked)


def fit(X, y, target: str = "avr", max_flash=None, max_ram=None, max_ms=None, clock_hz=None, precision="auto",
        families=None, time_budget=DEFAULT_TIME_BUDGET, random_state: int = 0, X_test=None, y_test=None,
        out_dir=None, name: str = "model", sizes_per_family: int = 4, validation_fraction: float = 0.2,
        sim_rows: int = 8, refit: bool = True, n_jobs: int = 1, scheduler=None, start_from=None) -> FitResult:
    """The most accurate model that meets the limits on ``target``, compiled (see the module doc).

    max_flash, max_ram: bytes of the model's own flash (code + constants) and RAM (static + peak stack).
    max_ms: latency of one prediction at ``clock_hz`` (default: the chip's clock).
    precision: "auto" (int16 and int8 on microcontrollers; float, int16, int8 on the host), one name or a list.
    families: names from ``FAMILY_ORDER`` (default all). time_budget: seconds (None: no limit).
    X_test, y_test: used only for the final check of the chosen model. out_dir: where to write the model
    file, its C, pareto.json, pareto.txt and pareto.png (all or nothing); None keeps them in ``files``.
    time_budget bounds the whole call, the retraining and the final check included (see ``final_reserve``).
    n_jobs: worker processes training and measuring candidates at once (-1: one per core); scheduler: the
    address of a Dask ``distributed`` scheduler (or a ``distributed.Client``) to run them on instead. The
    result does not depend on either (see ``_Search.run``).
    start_from: your own estimator (fitted or not, e.g. ``RandomForestClassifier(max_depth=12,
    min_samples_leaf=2)``; see ``candidates.START_CLASSES``): the search climbs its family's size ladder only,
    every candidate keeping the settings you gave it (all but the size and the seed).
    Raises InfeasibleError (a ValueError) naming the closest candidates when nothing meets the limits.
    """
    start = clock()
    args = check_arguments(target, max_flash, max_ram, max_ms, clock_hz, precision, families, time_budget,
                           random_state, name, sizes_per_family, validation_fraction, sim_rows, n_jobs, scheduler,
                           start_from)
    backend, limits, prefix, precisions, names = args.backend, args.limits, args.prefix, args.precisions, args.names
    time_budget, sizes_per_family, sim_rows, n_jobs = (args.time_budget, args.sizes_per_family, args.sim_rows,
                                                       args.n_jobs)
    X, y, classes, index, X_test, y_test = _check_data(X, y, X_test, y_test)
    log.info("fit: %d rows, %d features, %d classes; %s; families %s; precisions %s", len(X), X.shape[1],
             len(classes), limits.describe(), ", ".join(names), ", ".join(precisions))

    from threadpoolctl import threadpool_limits

    search = _Search(X, y, index, classes, backend, limits, precisions, names, time_budget, int(random_state),
                     sizes_per_family, validation_fraction, sim_rows, prefix, n_jobs, scheduler, start, refit,
                     len(X_test) if X_test is not None else int(math.ceil(validation_fraction * len(X))))
    search.kept_settings = args.kept_settings
    search.jobs_asked = n_jobs if args.jobs_asked == -1 else args.jobs_asked
    # one BLAS / OpenMP thread: the same sums, so the same models, whatever the environment's thread settings
    # (k-means and BLAS reductions change with the thread count), and no oversubscription beside the simulators
    with threadpool_limits(limits=1):
        return _search_and_choose(search, X, y, classes, X_test, y_test, refit, out_dir, names, precisions,
                                  sizes_per_family, time_budget, random_state, prefix, start, scheduler)


def _search_and_choose(search, X, y, classes, X_test, y_test, refit, out_dir, names, precisions, sizes_per_family,
                       time_budget, random_state, prefix, start, scheduler=None) -> FitResult:
    limits = search.limits
    search.run()
    phases = {"search": search.elapsed()}
    ranked = rank(search.candidates)
    if not ranked:
        raise _infeasible(search)

    if X_test is not None:
        X_rows, y_rows, rows_from = X_test, y_test, "test"
    else:
        X_rows, y_rows, rows_from = search.X_val, classes[search.val_index], "validation"
    verification = None
    refit_skipped = None  # why the choice was not retrained on all rows, in words
    checked: list[Candidate] = []
    out_of_time = False
    for candidate in ranked[:3]:
        estimator, model = search.models[candidate.id]
        tries = [True, False] if refit else [False]
        if refit and time_budget is not None:
            needed = search.final_seconds(candidate, True)
            if search.elapsed() + needed > time_budget:
                tries = [False]
                refit_skipped = (f"the time budget left {max(0.0, time_budget - search.elapsed()):.0f} s, "
                                 f"retraining and checking it needs ~{needed:.0f} s")
                search.complete = False
        for retrain in tries:
            # the first check always runs (a result needs one); another only while the budget holds it
            if checked and not search.affords(search.final_seconds(candidate, retrain)):
                out_of_time = True
                break
            checked += [] if candidate in checked else [candidate]
            verification, est, mdl, result = _verify(search, candidate, estimator, model, X_rows, y_rows, rows_from,
                                                    retrain, X, y)
            if verification is not None:
                break
            if retrain:
                refit_skipped = "retrained on all rows it broke a limit on the final check"
        if verification is not None:
            chosen, estimator, model = candidate, est, mdl
            break
        if out_of_time:
            break
    if verification is None:
        raise InfeasibleError(f"the best candidates meet {limits.describe()} on the validation rows but not on the "
                              f"{rows_from} rows in the simulator: " + "; ".join(c.label for c in checked)
                              + ("; the time budget ran out before the next best could be checked"
                                 if out_of_time else ""),
                              [c.as_json(limits.count_unit) for c in checked])

    phases["final check"] = search.elapsed() - phases["search"]
    front = pareto_front(search.candidates)
    for c in front:
        c.on_front = True
    reason = why(chosen, rank(search.candidates), search.candidates)
    res = FitResult(model, estimator, result, chosen, search.candidates, front, limits, verification,
                    search.complete, clock() - start, reason)
    res.trained = {i: mdl for i, (_, mdl) in search.models.items()}
    res.search = {"train_rows": len(search.X_fit), "validation_rows": len(search.X_val), "features": X.shape[1],
                  "classes": classes.tolist(), "test_rows": None if X_test is None else len(X_test),
                  "families": list(names), "precisions": list(precisions), "sizes_per_family": sizes_per_family,
                  "time_budget": time_budget, "random_state": int(random_state), "refit": refit,
                  "simulated_rows": len(search.X_sim), "n_jobs": search.n_jobs,
                  "n_jobs_asked": getattr(search, "jobs_asked", search.n_jobs),
                  "screen_rows": None if search.screen_index is None else len(search.screen_index),
                  "scheduler": None if scheduler is None else str(getattr(scheduler, "scheduler", scheduler)),
                  "skipped": list(search.skipped), "refit_skipped": refit_skipped, "rule": RULE}
    # the plot (matplotlib's import and drawing: seconds on a loaded machine) only while the budget holds it
    res.files = _output_files(res, prefix, plot=search.affords(search.output_seconds()))
    if out_dir is not None:
        res.out_dir = Path(out_dir)
        write_tree(res.out_dir, res.files)
    phases["outputs"] = search.elapsed() - phases["search"] - phases["final check"]
    res.phase_seconds = phases
    log.info("fit: %s", reason)
    log.info("fit: %s; the machine's pace %.1f wall seconds per CPU second", ", ".join(
        f"{name} {seconds:.1f} s" for name, seconds in phases.items()), search.pace())
    return res


def _output_files(res: FitResult, prefix: str, plot: bool = True) -> dict[str, str | bytes]:
    with tempfile.TemporaryDirectory(prefix="tinycc-ml-fit-") as tmp:
        model_bytes = res.model.save(Path(tmp) / f"{prefix}.npz").read_bytes()
    files: dict[str, str | bytes] = {f"{prefix}.npz": model_bytes, **res.compiled.files}
    png, note = pareto_png(res) if plot else (None, "pareto.png left out: the time budget was spent")
    res.plot_note = note
    data = res.as_json()
    data["plot"] = "pareto.png" if png is not None else note
    files["pareto.json"] = json.dumps(data, indent=1) + "\n"
    files["pareto.txt"] = res.report() + "\n\nAll candidates:\n" + table(res.candidates, res.limits.count_unit,
                                                                        res.chosen) + "\n"
    if png is not None:
        files["pareto.png"] = png
    return files
