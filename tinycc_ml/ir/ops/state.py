"""State: values a model keeps from one call to the next (a noise estimate, a frame buffer, an LSTM's cell).

A ``state`` node is a leaf: its value is what the state held when the call began (the first call: ``init``).
The value it holds for the next call is the graph output labelled ``next_<state node>`` (``Graph.set_next_state``),
computed like any other value, so the graph stays a pure function (state in, state out) that passes, the
interpreters and the C all treat alike. A state without a next value keeps its contents. The C keeps each state
in static RAM of its own, outside the arenas, copies the next values in at the end of a call, and restores
``init`` in ``<prefix>_reset()``. TFLite's resource variables (VAR_HANDLE, READ_VARIABLE, ASSIGN_VARIABLE) map
onto it: a variable is a state node, a read is its value, an assignment its next value.
"""

from __future__ import annotations

import numpy as np

from tinycc_ml.ir.ops.registry import OpDef, need, register_op
from tinycc_ml.ir.types import TensorType


def _infer_state(ts, attrs, declared):
    need(declared is not None and "init" in attrs, "a state needs a declared type and its init")
    init = attrs["init"]
    need(isinstance(init, np.ndarray) and init.shape == declared.shape,
         f"a state's init must be an array of its shape {list(declared.shape)}")
    if declared.dtype.is_float:
        need(init.dtype == np.float32, f"an f32 state's init must hold float32 values, got {init.dtype}")
    else:
        need(np.issubdtype(init.dtype, np.integer), f"a {declared.dtype} state's init must hold integers")
        if declared.dtype.is_integer:
            lo, hi = declared.dtype.integer_range
            need(init.size == 0 or (int(init.min()) >= lo and int(init.max()) <= hi),
                 f"a {declared.dtype} state's init holds values outside [{lo}, {hi}]")
    return declared


register_op(OpDef(
    "state", None, _infer_state, lambda xs, attrs: None, {"init": "array"},
    "a value kept from one call to the next: its contents when the call began (output next_<name>: the next)",
    leaf=True,
    fixed=lambda call: None,  # the interpreters bind the state's contents
    unsupported={"interval": "a state's range is its history's: range analysis does not follow it",
                 "acc_bound": "a state has no accumulator"}))


def next_label(state: str) -> str:
    """The graph output label of a state's next value."""
    return f"next_{state}"


def variable_state(low, index: int, name: str) -> str:
    """A variable tensor as a state node, starting as TFLite Micro resets it: an int8 tensor at its zero point,
    any other at 0 (whatever data its buffer holds)."""
    t = low.tensors[index]
    ty = low.tensor_type(t)
    if ty.dtype.is_float:
        init = np.zeros(ty.size, np.float32)
    else:
        init = np.full(ty.size, ty.dtype.zero_point if t.type_name == "int8" else 0, np.int64)
    return low.graph.add("state", [], {"init": init}, type=TensorType((ty.size,), ty.dtype), name=name)
