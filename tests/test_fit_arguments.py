"""`tinycc-ml fit`'s arguments are checked before any work: a bad value, a port where no Dask scheduler
answers, an unusable budget are one line and exit status 2 before the data is read; `--jobs` is capped at
the cores available and the summary says so."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import tinycc_ml
import tinycc_ml.datafiles
from tinycc_ml.cli import main
from tinycc_ml.errors import DataError
from tinycc_ml.search import workers
from tinycc_ml.search.fit import MIN_TIME_BUDGET, check_arguments


@pytest.fixture
def data_never_read(monkeypatch, tmp_path):
    """A data file whose loader fails the test if it is called."""
    def loader(path):
        raise AssertionError(f"the data {path} was read before the arguments were checked")

    monkeypatch.setattr(tinycc_ml.datafiles, "load_training", loader)
    path = tmp_path / "d.npz"
    np.savez(path, X_train=np.zeros((4, 2)), y_train=np.arange(4) % 2)
    return path


class _Server:
    """A local TCP server that is not Dask's: it sends ``reply`` on each connection (None: never a byte)."""

    def __init__(self, reply: bytes | None):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.reply, self.open = reply, []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.open.append(conn)  # kept open: a silent server neither answers nor hangs up
            if self.reply is not None:
                conn.sendall(self.reply)

    def close(self):
        for conn in self.open:
            conn.close()
        self.sock.close()


@pytest.mark.parametrize("option, value, message", [
    ("--time-budget", "1e-9", f"time_budget is 1e-09 s; fit needs at least {MIN_TIME_BUDGET:g} s"),
    ("--time-budget", "0", "time_budget is 0.0; expected a positive number"),
    ("--time-budget", "-5", "time_budget is -5.0; expected a positive number"),
    ("--time-budget", "nan", "time_budget is nan; expected a positive number"),
    ("--time-budget", "inf", "time_budget is inf; expected a positive number"),
    ("--max-flash", "0", "max_flash is 0, but max_flash must be a positive number of bytes"),
    ("--max-ram", "0", "max_ram is 0, but max_ram must be a positive number of bytes"),
    ("--max-ms", "0", "max_ms is 0.0; expected a positive number"),
    ("--families", "nope", "unknown model family 'nope'"),
    ("--sizes", "0", "sizes_per_family is 0; expected a positive whole number"),
    ("--random-state", "-1", "random_state is -1; expected an integer in [0, 2^32)"),
])
def test_a_bad_argument_is_refused_before_the_data_is_read(data_never_read, tmp_path, capsys, option, value,
                                                           message):
    out = tmp_path / "out"
    status = main(["fit", str(data_never_read), "--target", "host", option, value, "-o", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and len(err) == 1 and message in err[0], err
    assert not out.exists()


@pytest.mark.parametrize("reply, message", [
    # answering garbage at once: distributed read its first 8 bytes as a length ("3.07 EiB" allocation)
    (b"\x00\x00\x00\x00\x00\x00\x00\x2a" + b"HTTP/1.1 400 Bad Request\r\n\r\n", "is not a Dask scheduler"),
    (b"SSH-2.0-OpenSSH_9.6\r\n", "is not a Dask scheduler"),
    (None, "no Dask scheduler answered within 0.5 s"),  # never answering: the Client waited past 130 s
])
def test_a_port_that_is_not_a_dask_scheduler_is_refused_before_the_data_is_read(data_never_read, tmp_path,
                                                                                monkeypatch, capsys, reply, message):
    pytest.importorskip("distributed")
    monkeypatch.setattr(workers, "PROBE_SECONDS", 0.5)
    server = _Server(reply)
    try:
        status = main(["fit", str(data_never_read), "--target", "host", "--scheduler",
                       f"tcp://127.0.0.1:{server.port}", "-o", str(tmp_path / "out")])
    finally:
        server.close()
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and len(err) == 1 and message in err[0], err
    assert f"scheduler tcp://127.0.0.1:{server.port}" in err[0]


def test_a_real_dask_scheduler_passes_the_probe():
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=0, processes=False, protocol="tcp", dashboard_address=None) as cluster:
        workers.check_scheduler(cluster.scheduler_address, timeout=5)


def test_a_handshake_check_refuses_frames_that_do_not_add_up():
    no_protocol = (b"\x01" + b"\x00" * 7) + (b"\x05" + b"\x00" * 7) + b"pickle-protocol"[:5]
    assert not workers._is_dask_handshake(no_protocol)  # the frame names no pickle protocol
    body = b"\x83\xabcompression\xc0\xa6python\x93\x03\x0b\x07\xafpickle-protocol\x05"
    framed = (b"\x01" + b"\x00" * 7) + len(body).to_bytes(8, "little") + body
    assert workers._is_dask_handshake(framed)
    assert not workers._is_dask_handshake(framed[:-1])
    assert not workers._is_dask_handshake(b"\xff" * 8 + framed[8:])


def test_jobs_beyond_the_cores_are_capped_and_the_summary_says_so(monkeypatch, caplog):
    monkeypatch.setattr(workers, "available_cores", lambda: 2)
    with caplog.at_level("WARNING", logger="tinycc_ml.search.workers"):
        assert workers.check_jobs(100000) == 2
    assert "100000 worker processes asked for, 2 core(s) available: running 2" in caplog.text
    assert workers.check_jobs(-1) == 2 and workers.check_jobs(1) == 1
    args = check_arguments(target="host", n_jobs=100000)
    assert (args.n_jobs, args.jobs_asked) == (2, 100000)



def test_a_fit_on_capped_jobs_says_so_in_its_summary(monkeypatch):
    from sklearn.datasets import load_iris

    monkeypatch.setattr(workers, "available_cores", lambda: 2)
    X, y = load_iris(return_X_y=True)
    result = tinycc_ml.fit(X, y, target="host", families="linear", sizes_per_family=1, precision="float",
                           time_budget=None, n_jobs=100000)
    assert result.search["n_jobs"] == 2 and result.search["n_jobs_asked"] == 100000
    assert "on 2 worker processes (100000 asked for; capped at the 2 core(s) available)" in result.report()


def test_check_arguments_is_what_fit_checks(monkeypatch):
    """fit itself refuses a too small budget before looking at the data (the data here is not even rows)."""
    with pytest.raises(DataError, match="fit needs at least"):
        tinycc_ml.fit("not data", None, target="host", time_budget=MIN_TIME_BUDGET / 2)


def _children(pid: int) -> set[str]:
    found: set[str] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            found |= set((task / "children").read_text().split())
        except OSError:  # the thread ended meanwhile
            pass
    return found


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads worker processes from /proc")
def test_ctrl_c_during_a_parallel_fit_exits_130_without_leaked_semaphores(tmp_path):
    """Ctrl-C (SIGINT to the whole process group, as a terminal sends it) as the worker processes start: one
    line, exit status 130, and no loky resource tracker warning of leaked semaphores (the command line ends
    with os._exit, which ran no multiprocessing finalizer). The warning came in about 2 runs of 3."""
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    np.savez(tmp_path / "digits.npz", X_train=X, y_train=y)
    env = dict(os.environ, PYTHONPATH=os.getcwd())
    for attempt in range(3):
        out = tmp_path / f"out{attempt}"
        proc = subprocess.Popen([sys.executable, "-m", "tinycc_ml", "fit", str(tmp_path / "digits.npz"), "--target",
                                 "host", "--jobs", "2", "--time-budget", "300", "-o", str(out)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                                start_new_session=True,  # SIGINT as a terminal leaves it (an xdist worker ignores
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # it: children too)
        try:
            for _ in range(1200):  # until the workers are there (a resource tracker and two workers)
                if len(_children(proc.pid)) >= 3 or proc.poll() is not None:
                    break
                time.sleep(0.05)
            os.killpg(proc.pid, signal.SIGINT)
            _, err = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
        assert proc.returncode == 130, err
        assert "leaked" not in err and "tinycc-ml: error: interrupted" in err, err
        assert not out.exists()
