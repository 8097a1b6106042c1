"""Backends: the shared C emitter and one module per target (see base.Backend)."""

from tinycc_ml.codegen import c_fixed, c_float, c_network, c_network_float, c_network_pow2  # noqa: F401  (fill the per-precision code tables)
