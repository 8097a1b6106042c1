"""Ops of the sensor front ends (``tinycc_ml.features``) that the other families do not have, one module per op.
Importing this package registers them."""

from tinycc_ml.ir.ops.sensor import zero_crossings  # noqa: F401  (register)
