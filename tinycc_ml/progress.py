"""Progress of long steps (training epochs, calibration search, simulator runs), through ``logging``.

    with Progress("simavr", total=len(rows), unit="rows") as bar:
        for chunk in chunks:
            ...
            bar.advance(len(chunk))

Each step logs at INFO on the ``tinycc_ml`` logger at most every few seconds (and when it ends), so
``tinycc-ml -v`` or a configured logger shows it. The command line also turns on a one-line bar
redrawn in place on stderr when stderr is a terminal (``show_bar(True)``); pipes and CI get nothing
unless asked. No third-party dependency.
"""

from __future__ import annotations

import logging
import sys
import threading
import time

log = logging.getLogger("tinycc_ml.progress")

LOG_EVERY_SECONDS = 5.0
DRAW_EVERY_SECONDS = 0.2
_bar = {"on": False}


def wait_all(futures, what: str, sizes, unit: str = "rows") -> list:
    """Results of ``futures`` in order, advancing a Progress by ``sizes[i]`` as each one finishes."""
    from concurrent.futures import as_completed

    size_of = {id(f): s for f, s in zip(futures, sizes)}
    with Progress(what, total=sum(sizes), unit=unit) as bar:
        for future in as_completed(futures):
            bar.advance(size_of[id(future)])
    return [f.result() for f in futures]


def show_bar(on: bool) -> None:
    """Draw the terminal bar for later steps (the CLI turns it on for a TTY unless -q)."""
    _bar["on"] = bool(on)


def bar_shown() -> bool:
    return _bar["on"]


class Progress:
    """A long step of ``total`` units (None when unknown). Thread-safe ``advance``."""

    def __init__(self, what: str, total: int | None = None, unit: str = "", logger: logging.Logger | None = None):
        self.what, self.total, self.unit = what, total, unit
        self.log = logger or log
        self.done = 0
        self.note = ""
        self._lock = threading.Lock()
        self._start = self._last_log = self._last_draw = time.perf_counter()
        self._drawn = False

    def __enter__(self) -> Progress:
        self.log.debug("%s: started%s", self.what, f" ({self.total} {self.unit})" if self.total else "")
        return self

    def __exit__(self, *exc) -> None:
        self.close(failed=exc[0] is not None)

    def _text(self) -> str:
        count = f"{self.done}/{self.total}" if self.total else f"{self.done}"
        unit = f" {self.unit}" if self.unit else ""
        note = f" {self.note}" if self.note else ""
        return f"{self.what}: {count}{unit}{note} ({time.perf_counter() - self._start:.1f} s)"

    def advance(self, n: int = 1, note: str = "") -> None:
        with self._lock:
            self.done += n
            if note:
                self.note = note
            now = time.perf_counter()
            if now - self._last_log >= LOG_EVERY_SECONDS:
                self._last_log = now
                self.log.info("%s", self._text())
            if _bar["on"] and now - self._last_draw >= DRAW_EVERY_SECONDS:
                self._last_draw = now
                self._draw()

    def _draw(self) -> None:
        text = self._text()
        if self.total:
            width = 20
            filled = int(width * min(self.done, self.total) / self.total)
            text = f"[{'#' * filled}{'.' * (width - filled)}] {text}"
        sys.stderr.write("\r" + text[:100].ljust(100))
        sys.stderr.flush()
        self._drawn = True

    def close(self, failed: bool = False) -> None:
        with self._lock:
            if self._drawn:
                sys.stderr.write("\r" + " " * 100 + "\r")
                sys.stderr.flush()
                self._drawn = False
            if not failed and time.perf_counter() - self._start >= 1.0:
                self.log.info("%s: done", self._text())
