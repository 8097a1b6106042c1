"""Backends: the shared C emitter and one module per target (see base.Backend)."""

from tinycc_ml.backends import c_fixed  # noqa: F401  (registers the fixed-point op emitters)
