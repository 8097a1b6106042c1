"""Where ``fit`` runs its candidates: in this process (``n_jobs=1`` without a time budget), on worker processes
of this machine (joblib's loky executor, ``n_jobs > 1`` or ``stoppable``) or on a Dask cluster (``scheduler``:
a ``distributed`` scheduler's address, or a ``distributed.Client``).

Tasks are submitted as they become ready and collected as they finish, in any order; the caller makes the
result independent of that order. A task may carry a priority (a callable, asked when a worker frees up: the
lowest goes first, then the earliest submitted), so that what runs next follows what is known then. A worker
process that dies mid-task (killed, out of memory, a crash in native code) breaks the tasks running beside it
too: those are run again one at a time, and a task whose worker dies when it runs alone is reported as failed
(``WorkerDied``) instead of ending the search.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import struct
import threading
import time
from concurrent.futures import FIRST_COMPLETED, wait
from contextlib import contextmanager

from tinycc_ml.codegen.backend import get_backend
from tinycc_ml.errors import DataError, ToolchainError
from tinycc_ml.runtime.simulate import SIMULATORS

log = logging.getLogger(__name__)


class WorkerDied:
    """The outcome of a task whose worker process died running it alone."""

    def __init__(self, why: str):
        self.why = why


def _is_worker_death(exc: BaseException) -> bool:
    from concurrent.futures.process import BrokenProcessPool

    from joblib.externals.loky.process_executor import TerminatedWorkerError

    if isinstance(exc, (TerminatedWorkerError, BrokenProcessPool)):
        return True
    return type(exc).__name__ == "KilledWorker"  # distributed: the task killed every worker it ran on


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity where the system has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def check_jobs(n_jobs) -> int:
    """``n_jobs`` as a positive whole number (-1: every core), at most the cores available (more processes
    than cores only queue for them, each with its own memory and semaphores; said in the log)."""
    if isinstance(n_jobs, bool) or not isinstance(n_jobs, int) or not (n_jobs >= 1 or n_jobs == -1):
        raise DataError(f"n_jobs is {n_jobs!r}; expected a positive whole number of worker processes (or -1: "
                        "one per core)")
    cores = available_cores()
    if n_jobs > cores:
        log.warning("fit: %d worker processes asked for, %d core(s) available: running %d", n_jobs, cores, cores)
    return cores if n_jobs == -1 else min(n_jobs, cores)


class Workers:
    def __init__(self, n_jobs: int = 1, scheduler=None, target: str | None = None, stoppable: bool = False):
        """``stoppable``: one job runs on a worker process too (not in this process), so that a task still
        running when a time budget is spent can be stopped."""
        self.n_jobs, self.scheduler, self.target, self.stoppable = n_jobs, scheduler, target, stoppable
        self.queue: list = []  # (key, fn, arg, tries, priority, n)
        self.running: dict = {}  # future -> (key, fn, arg, tries, priority, n)
        self.done: list = []  # (key, outcome)
        self.retrying = 0  # tasks being run again alone after a worker died beside them
        self.executor = None
        self.client = None
        self.slots = n_jobs
        self._submitted = 0

    def __enter__(self):
        if self.scheduler is not None:
            self.client = connect(self.scheduler)
            if self.target is not None:
                check_cluster(self.client, self.target)
            self.executor = self.client.get_executor()
            self.slots = max(1, sum(self.client.nthreads().values()))
        elif self.n_jobs > 1 or self.stoppable:
            from joblib.externals.loky import get_reusable_executor

            self.executor = get_reusable_executor(max_workers=self.n_jobs)
        return self

    def __exit__(self, exc_type, exc, tb):
        if self.client is None and self.executor is not None and exc_type is not None \
                and issubclass(exc_type, KeyboardInterrupt):
            self.stop()  # interrupted: the workers are killed now, not left to finish their tasks
        if self.client is not None:  # (a loky executor is reused; its futures are left alone, see stop)
            for future in self.running:
                future.cancel()
            if self.client is not self.scheduler:
                self.client.close()
        return False

    @property
    def busy(self) -> bool:
        return bool(self.queue or self.running or self.done)

    def submit(self, key, fn, arg, priority=None) -> None:
        """Run ``fn(arg)``; ``arg`` may be a callable making the argument when the task is dispatched;
        ``priority``: a callable giving a sortable rank when a worker frees up (lowest first; None: 0)."""
        self._submitted += 1
        self.queue.append((key, fn, arg, 0, priority, self._submitted))
        if self.executor is not None:
            self._pump()

    def _next(self):
        """The queued task to run next: a retried one first, then the lowest priority, then the earliest."""
        def rank(item):
            _key, _fn, _arg, tries, priority, n = item
            return (-tries, 0 if priority is None else priority(), n)

        return self.queue.pop(min(range(len(self.queue)), key=lambda i: rank(self.queue[i])))

    def _pump(self) -> None:
        slots = 1 if self.retrying else self.slots  # tasks sent only as workers free up: their deadlines are fresh
        while self.queue and len(self.running) < slots:
            key, fn, arg, tries, priority, n = self._next()
            if self.executor is not None and getattr(self.executor, "_flags", None) is not None \
                    and getattr(self.executor._flags, "broken", None):
                from joblib.externals.loky import get_reusable_executor

                self.executor = get_reusable_executor(max_workers=self.n_jobs)
            self.running[self.executor.submit(fn, arg() if callable(arg) else arg)] = (key, fn, arg, tries, priority, n)

    @property
    def can_stop(self) -> bool:
        """Whether running tasks can be stopped (on workers; not in this process)."""
        return self.executor is not None

    def stop(self) -> list:
        """Stop every queued and running task (the worker processes are killed): their keys."""
        keys = [key for key, *_ in sorted(self.queue, key=lambda item: item[-1])] + \
            [key for key, *_ in self.running.values()]
        if self.client is None:  # loky fails the running futures itself (cancelling them first upsets it)
            with _quiet_loky_shutdown_race():
                self.executor.shutdown(wait=True, kill_workers=True)
        else:
            for future in self.running:
                future.cancel()
        self.queue.clear()
        self.running.clear()
        self.retrying = 0
        return keys

    def finished(self, timeout: float | None = None) -> list:
        """(key, outcome) of tasks that have finished: waits for at least one, or ``timeout`` seconds
        (then possibly none)."""
        if self.executor is None and not self.done:  # in this process: one task at a time, in order
            key, fn, arg, *_ = self._next()
            self.done.append((key, fn(arg() if callable(arg) else arg)))
        if not self.done:
            ready, _ = wait(list(self.running), timeout=timeout, return_when=FIRST_COMPLETED)
            for future in ready:
                key, fn, arg, tries, priority, n = self.running.pop(future)
                if tries:
                    self.retrying -= 1
                exc = future.exception()
                if exc is None:
                    self.done.append((key, future.result()))
                elif _is_worker_death(exc) and tries == 0:
                    log.warning("fit: a worker process died; running its tasks again one at a time")
                    self.retrying += 1
                    self.queue.append((key, fn, arg, 1, priority, n))
                elif _is_worker_death(exc):
                    self.done.append((key, WorkerDied(f"its worker process died ({type(exc).__name__}: "
                                                      f"{' '.join(str(exc).split())[:200]})")))
                else:
                    raise exc
            self._pump()
        out, self.done = self.done, []
        return out


@contextmanager
def _quiet_loky_shutdown_race():
    """Killing loky's workers can race its manager thread, which then dies on a KeyError for a work item the
    shutdown already dropped (a traceback on stderr, nothing lost: every task is accounted for by ``stop``).
    That one exception is logged at DEBUG while the shutdown runs; any other goes to the usual hook."""
    previous = threading.excepthook

    def hook(args):
        if args.exc_type is KeyError and "ExecutorManagerThread" in type(args.thread).__name__ + str(args.thread):
            log.debug("fit: loky's manager thread stopped on %r while the workers were killed", args.exc_value)
            return
        previous(args)

    threading.excepthook = hook
    try:
        yield
    finally:
        threading.excepthook = previous


def tools_missing(target: str) -> str:
    """What this machine lacks to measure builds for ``target`` ("" when nothing)."""
    backend = get_backend(target)
    if getattr(backend, "chip", None) is None or backend.simulator is None:
        return ""

    try:
        SIMULATORS.load(backend.simulator).require()
    except ToolchainError as exc:
        return " ".join(str(exc).split())
    return ""


def check_cluster(client, target: str) -> None:
    """Every Dask worker once: ToolchainError naming the workers that lack a tool for ``target``."""
    lacking = {worker: why for worker, why in client.run(tools_missing, target).items() if why}
    if not client.scheduler_info().get("workers"):
        raise DataError(f"scheduler {client.scheduler.address}: no workers")
    if lacking:
        raise ToolchainError(f"{len(lacking)} Dask worker(s) cannot measure {target} builds: "
                             + "; ".join(f"{w}: {why}" for w, why in sorted(lacking.items()))[:600])


# [tcp|tls|ws|wss|ucx://]host:port, the host a name, an IPv4 address or a bracketed IPv6 one
SCHEDULER_ADDRESS = re.compile(r"^(?:(?P<scheme>tcp|tls|ws|wss|ucx)://)?(?:\[(?P<ip6>[0-9A-Fa-f:.]+)\]|"
                               r"(?P<host>[A-Za-z0-9._-]+)):(?P<port>\d{1,5})$")
HANDSHAKE_MAX_BYTES = 1 << 16  # a Dask server's first message (its handshake) is some 60 bytes
PROBE_SECONDS = 10.0


def _receive(sock: socket.socket, n: int, deadline: float) -> bytes:
    data = b""
    while len(data) < n:
        sock.settimeout(max(0.001, deadline - time.monotonic()))
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("the connection was closed")
        data += chunk
    return data


def _is_dask_handshake(body: bytes) -> bool:
    """Whether ``body`` (a first message's bytes, after its length) is distributed's framing of a handshake:
    a frame count, the frames' lengths that add up to the rest, a msgpack map naming "pickle-protocol"."""
    if len(body) < 8:
        return False
    (n_frames,) = struct.unpack_from("<Q", body)
    if not 1 <= n_frames <= 16 or len(body) < 8 * (1 + n_frames):
        return False
    lengths = struct.unpack_from(f"<{n_frames}Q", body, 8)
    return sum(lengths) == len(body) - 8 * (1 + n_frames) and b"pickle-protocol" in body


def check_scheduler(scheduler: str, timeout: float | None = None) -> None:
    """DataError unless ``scheduler`` is an address where a Dask server answers within ``timeout`` seconds.

    A Dask server sends its handshake as soon as a connection opens; it is read here, with a timeout and a
    size bound, before distributed's Client is made: the Client reads any first 8 bytes as a length
    (garbage asks for exabytes) and waits without end for a server that never answers. tls/ws/wss: the
    port is only connected to (their handshake is under another layer); ucx: not probed."""
    try:
        import distributed  # noqa: F401
    except ImportError:
        raise DataError(f"scheduler {scheduler!r}: running on a Dask cluster needs the distributed package "
                        "(pip install 'dask[distributed]')") from None
    found = SCHEDULER_ADDRESS.match(scheduler.strip())
    if not found or not 0 < int(found["port"]) < 65536:  # said here: distributed's own parse, inside Client's
        # event-loop thread, can leave the client's close waiting forever
        raise DataError(f"scheduler {scheduler!r}: not a scheduler address such as tcp://host:8786")
    scheme = found["scheme"] or "tcp"
    timeout = PROBE_SECONDS if timeout is None else timeout
    if scheme == "ucx":
        return
    deadline = time.monotonic() + timeout
    try:
        with socket.create_connection((found["ip6"] or found["host"], int(found["port"])), timeout=timeout) as sock:
            if scheme != "tcp":
                return
            (size,) = struct.unpack("<Q", _receive(sock, 8, deadline))
            body = _receive(sock, size, deadline) if size <= HANDSHAKE_MAX_BYTES else b""
    except TimeoutError:
        raise DataError(f"scheduler {scheduler}: no Dask scheduler answered within {timeout:g} s") from None
    except OSError as exc:
        raise DataError(f"scheduler {scheduler}: cannot connect ({' '.join(str(exc).split())[:200]})") from None
    if not _is_dask_handshake(body):
        raise DataError(f"scheduler {scheduler}: what answers there is not a Dask scheduler (its first message is "
                        "not distributed's handshake)")


def connect(scheduler, timeout: float | None = None):
    """A ``distributed.Client`` for a scheduler address (probed first, see ``check_scheduler``), or the client
    given."""
    if not isinstance(scheduler, str):
        return scheduler
    check_scheduler(scheduler, timeout)
    from distributed import Client

    try:
        return Client(scheduler.strip(), timeout=PROBE_SECONDS if timeout is None else timeout)
    except (OSError, TimeoutError) as exc:
        raise DataError(f"scheduler {scheduler}: cannot connect ({' '.join(str(exc).split())[:200]})") from None
    except (ValueError, TypeError) as exc:  # distributed's parse of the address: a port that is not a number, ...
        raise DataError(f"scheduler {scheduler!r}: not a scheduler address such as tcp://host:8786 "
                        f"({' '.join(str(exc).split())[:200]})") from None
