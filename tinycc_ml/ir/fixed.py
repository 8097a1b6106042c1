"""The fixed-point reference interpreter: runs an integer graph by looking up each op's integer
semantics in the op registry (numpy int64 holds the values; every intermediate that C keeps in
an int32 is checked to fit one, so a passing run also checks the overflow proofs). The
arithmetic conventions are in tinycc_ml.ir.ops.arith."""

from __future__ import annotations

import numpy as np

from tinycc_ml.errors import DataError, IRError
from tinycc_ml.ir.graph import Graph
from tinycc_ml.ir.interp import row_chunks
from tinycc_ml.ir.ops import CONST_INTS, OPS, FixedCall
from tinycc_ml.ir.ops.arith import (  # noqa: F401  (the interpreter's public vocabulary)
    INT32_MAX,
    INT32_MIN,
    MAX_ALIGN_SHIFT,
    FixedOverflow,
    align_shifts,
    check32,
    clip_bounds,
    rshift,
    saturate,
)
from tinycc_ml.ir.ops.state import next_label
from tinycc_ml.ir.ops.tables import exp_lut_index, tanh_lut_value  # noqa: F401
from tinycc_ml.ir.ops.tflite_arith import AFFINE_CODES, quantise_affine  # noqa: F401


def const_ints(graph: Graph, name: str) -> np.ndarray:
    """A constant's integers at its type's scale."""
    node = graph.node(name)
    return CONST_INTS[node.op](node.attrs)


def _eval_node(graph: Graph, name: str, vals: dict[str, np.ndarray]) -> np.ndarray:
    node = graph.node(name)
    if node.op == "const" and node.type.dtype.is_float:  # a float constant among integers keeps its value
        return node.attrs["value"].astype(np.float64)
    if node.type.dtype.is_float and node.inputs and all(graph.type(i).dtype.is_float for i in node.inputs):
        # float among integers (an audio front end's last scaling): the float semantics, rounded to float32 as
        # the C's float arithmetic rounds an op of one rounding
        rows = [vals[i] for i in node.inputs]
        n = max((len(v) for v, i in zip(rows, node.inputs) if np.ndim(v) == graph.type(i).rank + 1), default=1)
        batched = [np.ndim(v) == graph.type(i).rank + 1 for v, i in zip(rows, node.inputs)]
        value = np.stack([np.asarray(OPS[node.op].evaluate([v[r] if b else v for v, b in zip(rows, batched)],
                                                            node.attrs)) for r in range(n)])
        return value.astype(np.float32).astype(np.float64)
    semantics = OPS[node.op].fixed
    if semantics is None:
        raise IRError(f"node %{name}: op {node.op} has no fixed-point semantics "
                      f"({OPS[node.op].unsupported.get('fixed', 'not defined')})")
    call = FixedCall([vals[i] for i in node.inputs], [graph.type(i) for i in node.inputs], node.type,
                     node.attrs, f"%{name} ({node.op})")
    return semantics(call)


def initial_state(graph: Graph) -> dict[str, np.ndarray]:
    """Every state node's contents before the first call (its ``init``)."""
    return {name: np.array(graph.node(name).attrs["init"]) for name, _ in graph.states()}


def run_fixed(graph: Graph, Xq) -> dict[str, np.ndarray]:
    """Run an integer graph on rows of integer inputs (already at the input's scale).

    Returns every output stacked over rows. Constants are ints at their type's scale. A graph with state
    takes the rows as successive calls from its initial state (``run_fixed_stream``).
    """
    if graph.states():
        return run_fixed_stream(graph, Xq)[0]
    (input_name,) = graph.inputs()
    Xq = np.asarray(Xq)
    in_type = graph.type(input_name)
    if Xq.ndim == in_type.rank:  # one row
        Xq = Xq[None]
    if Xq.shape[1:] != in_type.shape:
        raise DataError(f"input has shape {Xq.shape}, expected (n, {', '.join(str(d) for d in in_type.shape)})")
    if not np.issubdtype(Xq.dtype, np.integer):
        raise DataError(f"fixed-point inputs must be integers, got {Xq.dtype}")
    parts = [_run_rows(graph, input_name, Xq[rows]) for rows in row_chunks(graph, len(Xq))]
    return {label: np.concatenate([p[label] for p in parts]) for label, _ in graph.outputs}


def run_fixed_once(graph: Graph, Xq) -> dict[str, np.ndarray]:
    """run_fixed, each distinct row run once per graph: a build's passes that read the interpreter on the same
    rows (the agreement with the float model, then the probabilities' error) share one run. Rows are taken as
    they are (their integers; the dtype is part of the key); a graph with state runs every call (each row depends
    on the rows before). Rows are found among those run before by a hash of each row (numpy, no Python loop over
    rows), every match checked against the row itself."""
    if graph.states():
        return run_fixed(graph, Xq)
    Xq = np.asarray(Xq)
    if Xq.ndim == graph.type(graph.inputs()[0]).rank:
        Xq = Xq[None]
    if not len(Xq) or not np.issubdtype(Xq.dtype, np.integer):
        return run_fixed(graph, Xq)  # nothing to look up (or not integers: run_fixed says so)
    fingerprint = (tuple(graph.order()), Xq.dtype.str)  # a graph changed since (a pass added a node): run anew
    known = graph.analyses.rows_run
    if known is None or known[0] != fingerprint:
        known = graph.analyses.rows_run = (fingerprint, {})
    memo = known[1]  # "rows" run so far, their "hashes", the hashes' sorting "order", the "outputs" per row
    rows = np.ascontiguousarray(Xq).reshape(len(Xq), -1)
    if memo and memo["rows"].shape[1:] == rows.shape[1:] and len(rows) <= len(memo["rows"]) \
            and np.array_equal(memo["rows"][:len(rows)], rows):
        # the leading rows run before (the agreement's rows, then the probabilities' without the widened
        # calibration's extra rows after them): no lookup
        return {label: memo["outputs"][label][:len(rows)].copy() for label, _ in graph.outputs}
    hashes = _row_hashes(rows)
    place = np.full(len(rows), -1, dtype=np.int64)  # each row's place among the rows run so far
    if memo:
        order = memo["order"]
        found = order[np.minimum(np.searchsorted(memo["hashes"][order], hashes), len(order) - 1)]
        same = (memo["hashes"][found] == hashes) & np.all(memo["rows"][found] == rows, axis=1)
        place[same] = found[same]
    missing = np.flatnonzero(place < 0)
    if len(missing):
        # the missing rows, each distinct row once: grouped by hash, each group checked to hold one row
        _, first, group = np.unique(hashes[missing], return_index=True, return_inverse=True)
        if len(first) == len(missing):  # every hash distinct, so every row: each runs, in its order
            first = group = np.arange(len(missing))
        elif not np.all(rows[missing[first[group.reshape(-1)]]] == rows[missing]):
            first = group = np.arange(len(missing))  # a collision: every missing row run
        group = group.reshape(-1)
        run = missing[first]
        whole = len(run) == len(rows)  # every row, in order (no copies of the rows)
        fresh = run_fixed(graph, Xq if whole else Xq[run])
        start = len(memo["rows"]) if memo else 0
        if memo:
            memo["rows"] = np.concatenate([memo["rows"], rows[run]])
            memo["hashes"] = np.concatenate([memo["hashes"], hashes[run]])
            memo["outputs"] = {label: np.concatenate([memo["outputs"][label], fresh[label]]) for label in fresh}
        else:
            memo.update(rows=rows if whole else rows[run], hashes=hashes if whole else hashes[run], outputs=fresh)
        memo["order"] = np.argsort(memo["hashes"], kind="stable")
        place[missing] = start + group
    return {label: memo["outputs"][label][place] for label, _ in graph.outputs}


_HASH_FACTORS = np.random.default_rng(0x5EED).integers(1, 2**63, size=1 << 12, dtype=np.uint64) | np.uint64(1)


def _row_hashes(rows: np.ndarray) -> np.ndarray:
    """A 64-bit hash of each row's integers (a sum of products with odd factors, wrapping): equal rows hash alike;
    callers check a match against the row itself."""
    values = rows.astype(np.uint64)  # two's complement: negative integers wrap, as the sum does
    width = values.shape[1]
    factors = np.resize(_HASH_FACTORS, width) if width > len(_HASH_FACTORS) else _HASH_FACTORS[:width]
    with np.errstate(over="ignore"):
        values *= factors
        return np.sum(values, axis=1, dtype=np.uint64)


def run_fixed_keyed(graph: Graph, Xq, keys: dict[str, bytes], memo: dict) -> dict[str, np.ndarray] | None:
    """run_fixed of a graph without state on rows ``Xq`` (one chunk of them), each node's value taken from
    ``memo`` where an earlier graph run on the same rows computed it: ``keys`` names each node's value by a digest
    of the node (op, type, attributes) and its operands' keys, so equal keys are equal values (the scale search's
    trials mostly change a few values and keep the rest). New values go into ``memo``, read-only. None where the
    graph has state or its rows are more than one chunk (run_fixed then)."""
    (input_name,) = graph.inputs()
    Xq = np.asarray(Xq)
    if graph.states() or len(row_chunks(graph, len(Xq))) != 1:
        return None
    if Xq.shape[1:] != graph.type(input_name).shape or not np.issubdtype(Xq.dtype, np.integer):
        raise DataError(f"input has shape {Xq.shape} ({Xq.dtype}), expected integer rows of shape (n, "
                        f"{', '.join(str(d) for d in graph.type(input_name).shape)})")
    vals: dict[str, np.ndarray] = {}
    for name in graph.order():
        value = memo.get(keys[name])
        if value is None:
            node = graph.node(name)
            if node.op == "input":
                value = Xq.astype(np.int64) if node.type.dtype.is_integer else saturate(Xq, node.type.dtype.bits)
            else:
                value = _eval_node(graph, name, vals)
            if isinstance(value, np.ndarray):
                value.flags.writeable = False  # shared with later runs: no op may change it in place
            memo[keys[name]] = value
        vals[name] = value
    return {label: vals[node] for label, node in graph.outputs}


def run_fixed_stream(graph: Graph, Xq, state: dict[str, np.ndarray] | None = None
                     ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Run a graph with state on rows taken as successive calls: from ``state`` (default: the initial one),
    each row sees the state the row before left. Returns the outputs stacked over rows (the states' next values
    left out) and the state after the last row, to pass to the next run of the stream."""
    (input_name,) = graph.inputs()
    in_type = graph.type(input_name)
    Xq = np.asarray(Xq)
    if Xq.ndim == in_type.rank:
        Xq = Xq[None]
    if Xq.shape[1:] != in_type.shape or not np.issubdtype(Xq.dtype, np.integer):
        raise DataError(f"input has shape {Xq.shape} ({Xq.dtype}), expected integer rows of shape (n, "
                        f"{', '.join(str(d) for d in in_type.shape)})")
    state = {k: np.array(v) for k, v in (initial_state(graph) if state is None else state).items()}
    results = graph.result_outputs()
    rows = []
    for r in range(len(Xq)):
        out = _run_rows(graph, input_name, Xq[r:r + 1], state)
        state = {name: np.array(out[next_label(name)][0]) if nxt != name else state[name]
                 for name, nxt in graph.states()}
        rows.append(out)
    return ({label: np.concatenate([o[label] for o in rows]) if rows else np.zeros((0, *graph.type(n).shape))
             for label, n in results}, state)


def _run_rows(graph: Graph, input_name: str, Xq: np.ndarray,
              state: dict[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
    vals: dict[str, np.ndarray] = {}
    for name in graph.order():
        node = graph.node(name)
        if node.op == "input":
            vals[name] = Xq.astype(np.int64) if node.type.dtype.is_integer else saturate(Xq, node.type.dtype.bits)
        elif node.op == "state":
            contents = np.asarray(state[name] if state is not None else node.attrs["init"])[None]
            vals[name] = contents.astype(np.float64 if node.type.dtype.is_float else np.int64)  # a float state kept
        else:
            vals[name] = _eval_node(graph, name, vals)
    return {label: vals[node] for label, node in graph.outputs}


def quantise(X, scale: int, bits: int) -> np.ndarray:
    """Real rows to ints at ``scale``: round to nearest (halves up), saturate to [-2^(bits-1) + 1,
    2^(bits-1) - 1] (in float first: values beyond int64 saturate rather than wrap); NaN (a missing
    value) gives -2^(bits-1), a code no real value gets, as the input helper does."""
    with np.errstate(over="ignore", invalid="ignore"):
        v = np.asarray(X, dtype=np.float64) * 2.0**np.asarray(scale, dtype=np.float64)
        if isinstance(v, np.ndarray) and v.ndim:  # the product is this function's own array: the rest in place
            v += 0.5
            np.floor(v, out=v)
        else:
            v = np.floor(v + 0.5)
    top = 2.0 ** (bits - 1)
    if not isinstance(v, np.ndarray) or not v.ndim:
        return saturate(np.nan_to_num(np.clip(v, -top + 1, top - 1), nan=-top), bits)
    # np.clip and nan_to_num's values in place (v is this function's own array): NaN passes the bounds, then -top
    np.maximum(v, -top + 1, out=v)
    np.minimum(v, top - 1, out=v)
    missing = np.isnan(v)
    if missing.any():
        v[missing] = -top
    return v.astype(np.int64)  # whole numbers within the bits' range: saturate's value


def _float32_bits(order: np.ndarray) -> np.ndarray:
    """Integers in the float32 values' order (-0.0 is -1, +0.0 is 0) to their bit patterns as int32 values."""
    return np.where(order < 0, -(2**31) - order - 1, order).astype(np.int64)


def affine_thresholds(scale: float, zero_point: int) -> np.ndarray:
    """The 255 float32 values t[i], ascending, such that ``quantise_affine`` of a float32 x is -128 plus the
    number of t[i] <= x (x not NaN): t[i] is the least float32 whose code is at least -127 + i (infinity when
    no finite one is). Found by bisection over the floats in order, so the C needs only comparisons."""
    codes = np.arange(AFFINE_CODES[0] + 1, AFFINE_CODES[1] + 1, dtype=np.int64)
    lo = np.full(codes.shape, -(2**31) + 0x00800000 - 1, dtype=np.int64)  # order of -inf: code -128
    hi = np.full(codes.shape, 0x7F800000, dtype=np.int64)  # order of +inf: code 127, at least every code
    while np.any(hi - lo > 1):
        mid = (lo + hi) // 2
        x = _float32_bits(mid).astype(np.int32).view(np.float32)
        ok = quantise_affine(x, scale, zero_point) >= codes
        hi, lo = np.where(ok, mid, hi), np.where(ok, lo, mid)
    return _float32_bits(hi).astype(np.int32).view(np.float32)


def significant_bits(Mq, bits: int) -> np.ndarray:
    """Integers ``Mq`` rounded to ``bits`` significant bits as one array: M8 2^k with |M8| <= 2^(bits-1) - 1
    (the largest values saturate rather than carry into a larger k, so the result stays within Mq's range).
    The int8 precision keeps prototypes this way (``TargetAttributes.prototype_bits``): 8-bit distance kernels
    then store M8 and k, with the fixed-point semantics of any int16 sqdist."""
    Mq = np.asarray(Mq, np.int64)
    k = max(0, int(np.abs(Mq).max(initial=0)).bit_length() - (bits - 1))
    top = (1 << (bits - 1)) - 1
    m8 = np.clip((Mq + ((1 << (k - 1)) if k else 0)) >> k, -top, top)
    return m8 << k
