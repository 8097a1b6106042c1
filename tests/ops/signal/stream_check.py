"""What the tests of the signal ops with state share: one-operator .tflite files run over a stream of calls by
tflite-micro (the definition) and by tinycc-ml's interpreter, host C and simulated chips."""

from __future__ import annotations

import numpy as np
from tflite_micro.python.tflite_micro import runtime

import tinycc_ml
from tests.conftest import require_target
from tests.tflite_models import TfliteBuilder
from tinycc_ml.codegen.backend import get_backend
from tinycc_ml.ir.fixed import run_fixed_stream
from tinycc_ml.ir.interp import run_float_stream


def one_op(name: str, x_shape, x_kind: str, outputs, options: dict, graph_outputs=None) -> bytes:
    """x -> name -> outputs ((shape, kind) each); the graph's outputs: ``graph_outputs`` (indices), default all."""
    b = TfliteBuilder()
    x = b.tensor(x_shape, x_kind, scale=None, name="x")
    ys = [b.tensor(shape, kind, scale=None, name=f"y{k}") for k, (shape, kind) in enumerate(outputs)]
    b.custom_op(name, [x], ys, options)
    return b.finish([x], [ys[k] for k in (range(len(ys)) if graph_outputs is None else graph_outputs)])


def tflite_micro_outputs(data: bytes, calls: np.ndarray, n_outputs: int = 1) -> list[np.ndarray]:
    """Each of tflite-micro's first ``n_outputs`` outputs over the calls in turn (one interpreter: its state carried
    from call to call), (calls, -1) each."""
    interpreter = runtime.Interpreter.from_bytes(data, arena_size=1 << 20)
    outs: list[list[np.ndarray]] = [[] for _ in range(n_outputs)]
    for call in calls:
        interpreter.set_input(call, 0)
        interpreter.invoke()
        for k in range(n_outputs):
            outs[k].append(np.asarray(interpreter.get_output(k)).copy().reshape(-1))
    return [np.stack(o) for o in outs]


def interpreted(path, calls: np.ndarray) -> list[np.ndarray]:
    """tinycc-ml's interpreter over the calls: each result output, (calls, -1)."""
    graph = tinycc_ml.load_model(path).graph
    rows = calls.astype(np.int64) if np.issubdtype(calls.dtype, np.integer) else calls.astype(np.float64)
    run = run_fixed_stream if np.issubdtype(calls.dtype, np.integer) else run_float_stream
    got, _ = run(graph, rows)
    return [np.asarray(got[label]).reshape(len(calls), -1) for label, _ in graph.result_outputs()]


def built(path, calls: np.ndarray, target: str, tmp_path) -> np.ndarray:
    """The compiled build's scores over the calls (one step each) on ``target``."""
    out = tmp_path / target
    result = tinycc_ml.compile(path, target=target, name="op", out_dir=out)
    flat = calls.reshape(len(calls), -1)
    if target == "host":
        return np.asarray(result.load().run_raw(flat)[0]).reshape(len(calls), -1)
    require_target(target)
    run = get_backend(target).simulate(out, result.output, flat.astype(np.float64))
    return np.asarray(run.scores).reshape(len(calls), -1)
