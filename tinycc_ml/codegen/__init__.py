"""Backends: the shared C emitter and one module per target (see base.Backend)."""

from tinycc_ml.codegen import (  # noqa: F401  (fill the per-precision code tables)
    c_fixed,
    c_float,
    c_front_end,
    c_network,
    c_network_float,
    c_network_pow2,
)
from tinycc_ml.codegen.emitter import C_CODE
from tinycc_ml.ir.ops import OPS

for _op in OPS.values():  # the C an op's own module holds (registry.OpDef.c)
    for _precision, _code in _op.c.items():
        C_CODE[_precision].setdefault(_op.name, _code)
