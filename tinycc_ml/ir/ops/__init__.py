"""The op registry: every op and all of its facets (see registry.py). Importing this package
registers the built-in ops; one module per family of ops."""

from tinycc_ml.ir.ops import (  # noqa: F401  (register)
    calibration,
    convolution,
    elementwise,
    ensembles,
    front_end,
    leaves,
    linalg,
    network,
    pooling,
    reductions,
    sensor,
    shape,
    signal,
    state,
    tables,
    tensor_elementwise,
    transpose,
    tree,
)
from tinycc_ml.ir.ops.leaves import CONST_INTS, dense_to_sparse_attrs, sparse_to_dense
from tinycc_ml.ir.ops.reductions import kvote_counts
from tinycc_ml.ir.ops.registry import (
    FACETS,
    OPS,
    BoundCall,
    FixedCall,
    OpDef,
    TypeRuleError,
    node_macs,
    node_output_shift,
    precision_of,
    register_op,
)

__all__ = ["CONST_INTS", "FACETS", "OPS", "BoundCall", "FixedCall", "OpDef", "TypeRuleError", "dense_to_sparse_attrs",
           "kvote_counts", "node_macs",
           "node_output_shift", "precision_of", "register_op", "sparse_to_dense"]
