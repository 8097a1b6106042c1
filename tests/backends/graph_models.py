"""Test models shared by the backend tests (graphs no trained family lowers to)."""

from __future__ import annotations

import numpy as np

from tinycc_ml.ir.graph import Graph
from tinycc_ml.ir.types import F32, TensorType
from tinycc_ml.models.base import Model


class NearestMean(Model):
    """Scores -||x - p_c||^2: a graph whose first op is an sqdist (streamed per column j)."""

    family = "nearest_mean_test"

    def __init__(self, P):
        self.P = P  # (D, classes)

    def arrays(self):
        return {"P": self.P}

    input_dim = property(lambda self: self.P.shape[0])
    n_outputs = property(lambda self: self.P.shape[1])

    def scores(self, X):
        return -np.sum((self._check_input(X)[:, :, None] - self.P[None]) ** 2, axis=1)

    def lower(self):
        g = Graph("nm")
        x = g.add("input", attrs={"name": "x"}, type=TensorType((self.input_dim,), F32), name="x")
        d = g.add("sqdist", [x, g.add("const", attrs={"value": self.P.astype(np.float32)}, name="P")], name="d")
        s = g.add("scale", [d], {"factor": -1.0}, name="s")
        g.set_output("scores", s)
        g.set_output("prediction", g.add("argmax", [s], name="pred"))
        return g
