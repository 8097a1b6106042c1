"""A clock to put in the place of fit's (``tinycc_ml.search.fit.clock``): budgets tested without waiting."""

from __future__ import annotations

import time


class SpentClock:
    """fit's clock (``tinycc_ml.search.fit.clock``) with the whole budget spent as soon as the run has started:
    the first reading is the run's start, every later one ``spent`` seconds on."""

    def __init__(self, spent: float):
        self.spent, self.start = spent, None

    def __call__(self) -> float:
        if self.start is None:
            self.start = time.perf_counter()
            return self.start
        return time.perf_counter() + self.spent


class ManualClock:
    """fit's clock standing still until a test moves it (``advance``): work takes the time the test says."""

    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
