"""onnxruntime as the oracle (``scripts/fuzz.py --target library-onnx``): small networks built as ONNX graphs
(onnx.helper), of random sizes and extreme-but-legal weights, loaded and compiled by tinycc-ml and compared
with onnxruntime on crafted rows.

- dense networks (importers/onnx.py: Gemm or MatMul + Add, chains of Relu / Sigmoid / Tanh, a final Softmax
  or Sigmoid or none; inputs [d], [1, d] or a dynamic batch): the float C on the host, held to the rows'
  range (a build whose values can leave float32 there is refused, as compile promises), gives onnxruntime's
  label on every row it does not decide by a hair (its top two logits apart by more than float32's error over
  the terms' magnitudes), its regression value and probabilities within FLOAT32_BOUND of onnxruntime's;
- convolutional networks (importers/onnx_network.py: Conv 1-D / 2-D, depthwise, pads and strides, Relu,
  MaxPool / AveragePool, GlobalAveragePool or Flatten, Gemm, Softmax): the float graph tinycc-ml reads
  computes onnxruntime's outputs (to FLOAT32_BOUND), and its int8 build (quantised from the rows) is
  bit-exact with the project's int8 interpreter on every row, as promised.

A refusal must be one clean tinycc_ml error; anything else is a crash. ``Outcome.rows`` counts the rows
compared with onnxruntime.
"""

from __future__ import annotations

import tempfile
import traceback
import warnings
from pathlib import Path

import numpy as np

import tinycc_ml
from tests.fuzzing import Outcome
from tinycc_ml.errors import TinyccError, ToolchainError

FLOAT32_BOUND = 1e-4  # relative to the terms' magnitude: float32 sums in another order
WEIGHT_SCALES = [1.0, 1.0, 1.0, 1e-3, 1e3, 1e-10, 1e10, 1e18, 1e-30, 1e30]
INPUT_SCALES = [1.0, 1.0, 1e-3, 1e3, 1e-20, 1e15]


def _pick(rng, options):
    return options[int(rng.integers(len(options)))]


def _init(name, value):
    from onnx import numpy_helper

    return numpy_helper.from_array(np.asarray(value, dtype=np.float32), name)


def _save(path: Path, nodes, inits, in_dims, out_name: str) -> None:
    from onnx import TensorProto, helper

    graph = helper.make_graph(nodes, "net", [helper.make_tensor_value_info("x", TensorProto.FLOAT, in_dims)],
                              [helper.make_tensor_value_info(out_name, TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path.write_bytes(model.SerializeToString())


def dense_net(rng, path: Path) -> dict:
    """A random dense chain; returns its weights for the magnitude bound."""
    from onnx import helper

    d = int(rng.integers(1, 20))
    widths = [d] + [int(rng.integers(1, 16)) for _ in range(int(rng.integers(1, 4)))]
    final = _pick(rng, ["Softmax", "Sigmoid", None, None])
    if final == "Softmax" and widths[-1] < 2:
        widths[-1] = 2
    nodes, inits, layers, h = [], [], [], "x"
    scale = _pick(rng, WEIGHT_SCALES)
    for k, (n_in, n_out) in enumerate(zip(widths, widths[1:])):
        W = rng.normal(size=(n_in, n_out)) * scale * (rng.random((n_in, n_out)) < 0.9)
        b = rng.normal(size=n_out) * scale * _pick(rng, [1.0, 0.0, 1e3])
        W, b = W.astype(np.float32).astype(np.float64), b.astype(np.float32).astype(np.float64)
        out = f"h{k}"
        if rng.random() < 0.5:
            trans = int(rng.integers(2))
            inits += [_init(f"W{k}", W.T if trans else W), _init(f"b{k}", b)]
            nodes.append(helper.make_node("Gemm", [h, f"W{k}", f"b{k}"], [out], transB=trans))
        else:
            inits += [_init(f"W{k}", W), _init(f"b{k}", b)]
            nodes += [helper.make_node("MatMul", [h, f"W{k}"], [f"m{k}"]),
                      helper.make_node("Add", [f"m{k}", f"b{k}"], [out])]
        acts = [] if k == len(widths) - 2 else [_pick(rng, ["Relu", "Tanh", "Sigmoid"])
                                                 for _ in range(int(rng.integers(0, 3)))]
        for j, act in enumerate(acts):
            nodes.append(helper.make_node(act, [out], [f"{out}a{j}"]))
            out = f"{out}a{j}"
        layers.append((W, b, acts))
        h = out
    if final:
        nodes.append(helper.make_node(final, [h], ["y"], **({"axis": -1} if final == "Softmax" else {})))
    else:
        nodes.append(helper.make_node("Identity", [h], ["y"]))
    any_gemm = any(node.op_type == "Gemm" for node in nodes)  # Gemm takes matrices: no [d] input then
    in_dims = _pick(rng, [[1, d], ["N", d]] + ([] if any_gemm else [[d]]))
    _save(path, nodes, inits, in_dims, "y")
    return {"layers": layers, "final": final, "d": d, "in_dims": in_dims}


def conv_net(rng, path: Path) -> dict:
    from onnx import helper

    two_d = bool(rng.integers(2))
    c_in, c_mid, classes = int(rng.integers(1, 4)), int(rng.integers(1, 6)), int(rng.integers(2, 5))
    size = int(rng.integers(6, 14))
    k = int(rng.integers(1, 4))
    spatial = [size, size] if two_d else [size]
    scale = _pick(rng, [1.0, 1.0, 1e-3, 1e3])
    nodes, inits = [], []
    depthwise = c_in == c_mid and rng.random() < 0.3
    w_shape = [c_mid, 1 if depthwise else c_in] + [k] * len(spatial)
    inits += [_init("cw", rng.normal(size=w_shape) * scale), _init("cb", rng.normal(size=c_mid) * scale)]
    stride = int(rng.integers(1, 3))
    pad = int(rng.integers(0, k))
    nodes.append(helper.make_node("Conv", ["x", "cw", "cb"], ["c"], kernel_shape=[k] * len(spatial),
                                  strides=[stride] * len(spatial), pads=[pad] * (2 * len(spatial)),
                                  **({"group": c_in} if depthwise else {})))
    nodes.append(helper.make_node("Relu", ["c"], ["r"]))
    h = "r"
    out_size = (size + 2 * pad - k) // stride + 1
    if out_size >= 2 and rng.random() < 0.5:
        pool = _pick(rng, ["MaxPool", "AveragePool"])
        nodes.append(helper.make_node(pool, [h], ["p"], kernel_shape=[2] * len(spatial), strides=[2] * len(spatial)))
        h, out_size = "p", out_size // 2
    if rng.random() < 0.5:
        nodes.append(helper.make_node("GlobalAveragePool", [h], ["g"]))
        nodes.append(helper.make_node("Flatten", ["g"], ["f"], axis=1))
        features = c_mid
    else:
        nodes.append(helper.make_node("Flatten", [h], ["f"], axis=1))
        features = c_mid * out_size ** len(spatial)
    inits += [_init("fw", rng.normal(size=(classes, features)) * scale), _init("fb", rng.normal(size=classes) * scale)]
    nodes.append(helper.make_node("Gemm", ["f", "fw", "fb"], ["z"], transB=1))
    if rng.random() < 0.5:
        nodes.append(helper.make_node("Softmax", ["z"], ["y"], axis=-1))
    else:
        nodes.append(helper.make_node("Identity", ["z"], ["y"]))
    in_shape = [1, c_in, *spatial]
    _save(path, nodes, inits, in_shape, "y")
    return {"in_shape": in_shape}


def onnxruntime_outputs(path: Path, X: np.ndarray, in_shape) -> np.ndarray:
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    options.log_severity_level = 4
    session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    if "N" in [str(s) for s in in_shape]:
        return np.asarray(session.run(None, {name: X.astype(np.float32)})[0], dtype=np.float64).reshape(len(X), -1)
    shape = [s for s in in_shape]
    return np.concatenate([np.asarray(session.run(None, {name: x.reshape(shape).astype(np.float32)})[0],
                                      dtype=np.float64).reshape(1, -1) for x in X])


def _magnitudes(net: dict, X: np.ndarray) -> np.ndarray:
    """A bound on the terms each logit sums (|W| over |h|, activations' magnitudes at most their input's):
    float32's rounding in any order of the sums is within ~(depth + width) 6e-8 of it."""
    h = np.abs(X)
    for W, b, acts in net["layers"]:
        h = h @ np.abs(W) + np.abs(b)
        if acts and acts[-1] in ("Tanh", "Sigmoid"):
            h = np.ones_like(h)
    return h


def dense_rows(rng, d: int) -> np.ndarray:
    scale = _pick(rng, INPUT_SCALES)
    X = rng.normal(size=(200, d)) * scale
    extremes = [0.0, -0.0, 1e-40, 1e-30, 1e20, -1e20, 1e30, -1e30]
    for v in extremes:
        row = rng.normal(size=d) * scale
        row[int(rng.integers(d))] = v
        X = np.vstack([X, row])
    return X.astype(np.float32).astype(np.float64)


def _dense_case(rng, tmp: Path) -> Outcome:
    path = tmp / "net.onnx"
    net = dense_net(rng, path)
    X = dense_rows(rng, net["d"])
    try:
        want = onnxruntime_outputs(path, X, net["in_dims"])
    except Exception as exc:  # noqa: BLE001 - onnxruntime refuses the graph: the compiler must too
        try:
            tinycc_ml.compile(tinycc_ml.load_model(path), target="host")
        except TinyccError:
            return Outcome("error", f"onnxruntime and tinycc-ml refuse it ({type(exc).__name__})")
        return Outcome("crash", f"dense: onnxruntime refuses the graph, tinycc-ml compiles it: {exc}"[:400])
    what = f"dense {[W.shape for W, _, _ in net['layers']]} final {net['final']}"
    try:
        model = tinycc_ml.load_model(path)
        with np.errstate(all="ignore"):
            finite = np.abs(X).max(axis=0)
        try:
            predictor = tinycc_ml.compile(model, target="host", input_range=(-finite, finite)).load()
        except TinyccError:  # refused over the crafted rows' range: compare within the plain rows' range
            limit = np.abs(X[:200]).max(axis=0)
            keep = np.all(np.abs(X) <= limit, axis=1)
            X, want = X[keep], want[keep]
            predictor = tinycc_ml.compile(model, target="host", input_range=(-limit, limit)).load()
        scores = np.asarray(predictor.decision_function(X), dtype=np.float64).reshape(len(X), -1)
        labels = np.asarray(predictor.predict(X))
    except ToolchainError as exc:  # the generated C does not build (-Werror): the compiler's bug
        return Outcome("crash", f"{what}: C does not build: {exc}"[:600])
    except TinyccError as exc:
        return Outcome("error", f"{what}: {type(exc).__name__}: {exc}"[:300])
    except Exception as exc:  # noqa: BLE001
        frame = traceback.extract_tb(exc.__traceback__)[-1]
        return Outcome("crash", f"{what}: {type(exc).__name__} at {Path(frame.filename).name}:{frame.lineno}: "
                                f"{exc}"[:600])
    with np.errstate(all="ignore"):
        mag = _magnitudes(net, X)
        tol = FLOAT32_BOUND * (1.0 + mag.max(axis=1))
    finite = np.all(np.isfinite(want), axis=1) & np.isfinite(tol)
    n_out = want.shape[1]
    if net["final"] is None and n_out == 1:  # a regression value
        bad = finite & ~(np.abs(scores[:, 0] - want[:, 0]) <= tol)
        return _verdict(what, bad, len(X), scores[:, 0], want[:, 0])
    if net["final"] == "Sigmoid":  # logistic outputs: compare the probability of the ORT output
        logits = scores
        with np.errstate(all="ignore"):
            mine = 1.0 / (1.0 + np.exp(-logits))
        bad = finite[:, None] & ~(np.abs(mine - want) <= FLOAT32_BOUND + tol[:, None] * 0.25)
        return _verdict(what, bad.any(axis=1), len(X), mine[:, 0], want[:, 0])
    # class scores (Softmax or raw): the label where ORT's top two are apart by more than float32 can move
    logits = scores
    if net["final"] == "Softmax":
        with np.errstate(all="ignore"):
            top = np.sort(want, axis=1)
            decided = finite & (top[:, -1] - top[:, -2] > 1e-3) & (tol < 1e-3)
            shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
            mine = shifted / shifted.sum(axis=1, keepdims=True)
        bad = decided & (np.argmax(want, axis=1) != labels)
        close = finite & (tol < 1e-3) & ~np.all(np.abs(mine - want) <= 1e-3, axis=1)
        return _verdict(what, bad | close, len(X), labels, np.argmax(want, axis=1))
    top = np.sort(want, axis=1)
    decided = finite & (top[:, -1] - top[:, -2] > 2 * tol)
    bad = decided & (np.argmax(want, axis=1) != labels)
    return _verdict(what, bad, len(X), labels, np.argmax(want, axis=1))


def _verdict(what: str, bad: np.ndarray, rows: int, got, want) -> Outcome:
    if np.any(bad):
        i = int(np.flatnonzero(bad)[0])
        return Outcome("crash", f"{what}: wrong on {int(bad.sum())} of {rows} rows (row {i}: onnxruntime "
                                f"{want[i]!r}, C {got[i]!r})"[:600], rows=rows)
    return Outcome("ok", what, rows=rows)


def _conv_case(rng, tmp: Path) -> Outcome:
    path = tmp / "conv.onnx"
    net = conv_net(rng, path)
    n_in = int(np.prod(net["in_shape"]))
    X = (rng.normal(size=(64, n_in)) * _pick(rng, [1.0, 1e-3, 1e3])).astype(np.float32).astype(np.float64)
    try:
        want = onnxruntime_outputs(path, X, net["in_shape"])
    except Exception as exc:  # noqa: BLE001
        try:
            tinycc_ml.compile(tinycc_ml.load_model(path), target="host", precision="int8", calibration=X)
        except TinyccError:
            return Outcome("error", f"onnxruntime and tinycc-ml refuse it ({type(exc).__name__})")
        return Outcome("crash", f"conv: onnxruntime refuses the graph, tinycc-ml compiles it: {exc}"[:400])
    what = f"conv {net['in_shape']}"
    try:
        model = tinycc_ml.load_model(path)
        float_scores = np.asarray(model.scores(X), dtype=np.float64).reshape(len(X), -1)
        result = tinycc_ml.compile(model, target="host", precision="int8", calibration=X, name="conv")
        int8 = model.quantise(X)
        Xq = int8.quantise_input(X)
        scores, predictions = result.load().run_raw(Xq)
        interp = int8.run_int8(Xq.reshape(len(X), *int8.input_shape)).reshape(len(X), -1)
    except ToolchainError as exc:  # the generated C does not build (-Werror): the compiler's bug
        return Outcome("crash", f"{what}: C does not build: {exc}"[:600])
    except TinyccError as exc:
        return Outcome("error", f"{what}: {type(exc).__name__}: {exc}"[:300])
    except Exception as exc:  # noqa: BLE001
        frame = traceback.extract_tb(exc.__traceback__)[-1]
        return Outcome("crash", f"{what}: {type(exc).__name__} at {Path(frame.filename).name}:{frame.lineno}: "
                                f"{exc}"[:600])
    spread = np.max(np.abs(want), axis=1, keepdims=True)
    bad = ~np.all(np.abs(float_scores - want) <= 1e-3 * (1 + spread), axis=1)
    if np.any(bad):
        i = int(np.flatnonzero(bad)[0])
        return Outcome("crash", f"{what}: the float graph differs from onnxruntime on {int(bad.sum())} of {len(X)} "
                                f"rows (row {i}: {float_scores[i][:4]} vs {want[i][:4]})"[:600], rows=len(X))
    if not np.array_equal(np.asarray(scores).reshape(len(X), -1), interp):
        return Outcome("crash", f"{what}: the int8 C differs from the int8 interpreter", rows=len(X))
    return Outcome("ok", what, rows=len(X))


def onnx_case(rng) -> Outcome:
    try:
        import onnx  # noqa: F401
        import onnxruntime  # noqa: F401
    except ImportError as exc:
        return Outcome("error", f"onnx / onnxruntime: {exc}")
    with tempfile.TemporaryDirectory(prefix="tinycc-ml-onnx-oracle-") as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return _conv_case(rng, Path(tmp)) if rng.random() < 0.3 else _dense_case(rng, Path(tmp))
        except Exception as exc:  # noqa: BLE001 - the generator's own failure
            frame = traceback.extract_tb(exc.__traceback__)[-1]
            return Outcome("crash", f"generator: {type(exc).__name__} at {Path(frame.filename).name}:"
                                    f"{frame.lineno}: {exc}"[:600])
