"""Network ops, one module per op (TFLite Micro's ``kernels/`` layout): each holds the op's registry entry (type
rule, float and integer semantics), its portable C per precision (``OpDef.c``) and its lowering from the model
formats (``frontends``). A target's kernels for an op stay in the target's package. Importing this package
registers them."""

from tinycc_ml.ir.ops.network import (  # noqa: F401  (register)
    activations,
    arg_reduce,
    batch_matmul,
    compare,
    float_binary,
    float_unary,
    gather,
    grouped_conv2d,
    integer_arith,
    leaky_relu,
    logical,
    logical_not,
    lstm,
    maximum_minimum,
    mul,
    normalisation,
    prelu,
    quantised_unary,
    quantize,
    reduce,
    resize_bilinear,
    resize_nearest,
    retyped_slice,
    select,
    shape_constants,
    space_batch,
    squared_difference,
    strided_slice,
    sub,
    svdf,
    take,
    transpose_conv,
)
