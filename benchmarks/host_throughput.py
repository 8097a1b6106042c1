"""Host builds against the fastest library for each model: predictions per second of the compiled model
(float, int16, int8) and of its anchor on one 10,000-row batch, one thread everywhere, median of --repeat
runs, every ratio measured in one run.

    python benchmarks/host_throughput.py [--rows 10000] [--repeat 7] [--only protonn-usps,mlp-784,...]

One thread: OPENBLAS_NUM_THREADS / OMP_NUM_THREADS / MKL_NUM_THREADS = 1 (set before numpy loads),
onnxruntime with intra_op_num_threads = inter_op_num_threads = 1, scikit-learn with n_jobs = 1; the host
builds run one thread. Every anchor takes the same float64 rows the host build takes (its conversion to
float32 is timed, as the host build's is).

Models (synthetic data with the data sets' shapes: USPS, Fashion-MNIST and letter are not available offline):
  protonn-usps  ProtoNNClassifier(budget_bytes=65536) on 256 features, 10 classes; anchor: the ProtoNN
                formula in numpy with matrix products (float32, BLAS: X W^T, the distances as
                |p|^2 - 2 p B + |b|^2, exp, S Z^T), not the model's broadcasting ``predict``
  mlp-784       scikit-learn MLPClassifier((32,)) on 784 features, 10 classes; anchor: onnxruntime running
                the same weights exported with onnx.helper (Gemm, Relu, Gemm, ArgMax; float32); a second row
                against its own library, scikit-learn's ``predict`` (float64 BLAS)
  forest-784    scikit-learn RandomForestClassifier(100, max_depth=10) on 784 features, 10 classes;
                anchor: its own ``predict`` (n_jobs=1)
  xgboost-784   xgboost.XGBClassifier(100, max_depth=6) on 784 features, 10 classes (1,000 trees); anchor:
                the booster's ``inplace_predict`` (nthread=1) on the float64 rows, then argmax
  logreg-784    scikit-learn LogisticRegression on 784 features, 10 classes; anchor: argmax(X W^T + b) in
                numpy (float32, BLAS); a second row against scikit-learn's own ``predict`` (float64 BLAS)
  kws-dscnn     MLPerf Tiny's keyword-spotting DS-CNN (data/mlperf-tiny/kws_ref_model.tflite, int8; the host build
                int8 only, every output byte tflite-micro's); anchor: LiteRT (ai-edge-litert, num_threads=1, its
                default XNNPACK delegate) invoked row by row (its fastest: batched invokes measured slower), the rows
                quantised with the input tensor's scale and zero point in numpy (timed, as the host build's are);
                rows: random int8 codes of the input tensor as real values; reference: tflite-micro's interpreter
Host builds are compiled with tinycc_ml.host.build.HOST_CFLAGS (printed): they are loaded on the machine
that builds them. One foreign call per batch: rows converted in C, then <prefix>_predict_batch (8 rows per
pass over the weights; tinycc_ml/host/batch.py).
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "VECLIB_MAXIMUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from results_table import write_table  # noqa: E402

import tinycc_ml  # noqa: E402
from tinycc_ml.host.build import HOST_CFLAGS  # noqa: E402

PRECISIONS = ("float", "int16", "int8")
REPO = Path(__file__).resolve().parents[1]
KWS = REPO / "data" / "mlperf-tiny" / "kws_ref_model.tflite"


def protonn_blas(model):
    """The ProtoNN formula with matrix products (float32): what numpy with BLAS does at its best."""
    f32 = np.float32
    W, B, Z = model.W.astype(f32), model.B.astype(f32), model.Z.astype(f32)
    mean = None if model.mean is None else model.mean.astype(f32)
    inv_std = None if model.std is None else (1.0 / model.std).astype(f32)
    WT, ZT, bb, g2 = np.ascontiguousarray(W.T), np.ascontiguousarray(Z.T), np.sum(B * B, axis=0), f32(model.gamma**2)

    def predict(X):
        X = X.astype(f32)
        if mean is not None:
            X = (X - mean) * inv_std
        P = X @ WT
        D = np.sum(P * P, axis=1, keepdims=True) - 2 * (P @ B) + bb
        return np.argmax(np.exp(-g2 * D) @ ZT, axis=1)

    return predict


def linear_blas(lr):
    W, b = np.ascontiguousarray(lr.coef_.T, dtype=np.float32), lr.intercept_.astype(np.float32)
    return lambda X: np.argmax(X.astype(np.float32) @ W + b, axis=1)


def xgboost_inplace(xgb):
    """The booster's own fastest entry point on one thread: ``inplace_predict`` on the rows as given."""
    booster = xgb.get_booster()
    booster.set_param({"nthread": 1})
    return lambda X: np.argmax(booster.inplace_predict(X), axis=1)


def mlp_onnxruntime(mlp):
    """The MLP's weights as an ONNX graph (onnx.helper), run by onnxruntime on one thread."""
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    nodes, inits, prev = [], [], "X"
    n_layers = len(mlp.coefs_)
    for i, (W, b) in enumerate(zip(mlp.coefs_, mlp.intercepts_)):
        inits += [numpy_helper.from_array(W.astype(np.float32), f"W{i}"),
                  numpy_helper.from_array(b.astype(np.float32), f"b{i}")]
        nodes.append(helper.make_node("Gemm", [prev, f"W{i}", f"b{i}"], [f"h{i}"]))
        prev = f"h{i}"
        if i < n_layers - 1:
            if mlp.activation != "relu":
                raise ValueError("this export writes relu hidden layers only")
            nodes.append(helper.make_node("Relu", [prev], [f"a{i}"]))
            prev = f"a{i}"
    nodes.append(helper.make_node("ArgMax", [prev], ["label"], axis=1, keepdims=0))
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("X", TensorProto.FLOAT,
                                                                          [None, mlp.coefs_[0].shape[0]])],
                              [helper.make_tensor_value_info("label", TensorProto.INT64, [None])], inits)
    onnx_model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx_model.ir_version = 8
    onnx.checker.check_model(onnx_model)
    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    session = ort.InferenceSession(onnx_model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return lambda X: session.run(None, {"X": X.astype(np.float32)})[0]


def litert_rows(path: Path):
    """LiteRT's interpreter (num_threads=1) on each row: the rows quantised as the input tensor says, one invoke
    per row, the argmax of the output."""
    from ai_edge_litert.interpreter import Interpreter

    interpreter = Interpreter(model_path=str(path), num_threads=1)
    inp, out = interpreter.get_input_details()[0], interpreter.get_output_details()[0]
    interpreter.allocate_tensors()
    scale, zero_point = inp["quantization"]
    shape, index, out_index = tuple(inp["shape"]), inp["index"], out["index"]

    def predict(X):
        Xq = np.clip(np.round(X / scale) + zero_point, -128, 127).astype(np.int8)
        labels = np.empty(len(Xq), dtype=np.int64)
        for i, row in enumerate(Xq):
            interpreter.set_tensor(index, row.reshape(shape))
            interpreter.invoke()
            labels[i] = np.argmax(interpreter.get_tensor(out_index))
        return labels

    return predict


def tflite_micro_rows(path: Path, model):
    """tflite-micro's interpreter (the reference every output byte of the host build equals): argmax per row."""
    from tflite_micro.python.tflite_micro import runtime

    interpreter = runtime.Interpreter.from_bytes(path.read_bytes(), arena_size=1 << 20)

    def predict(X):
        Xq = model.quantise_input(X).astype(np.int8)
        labels = np.empty(len(Xq), dtype=np.int64)
        for i, row in enumerate(Xq):
            interpreter.set_input(row.reshape(model.input_shape), 0)
            interpreter.invoke()
            labels[i] = np.argmax(interpreter.get_output(0))
        return labels

    return predict


def models(rows: int, only: set[str] | None):
    """(key, description, model to compile, (anchor name, anchor predict), reference predict, calibration
    rows, test rows) of each benchmarked model."""
    from sklearn.datasets import make_classification

    def data(n_features, n_informative, n_classes, n_train):
        X, y = make_classification(n_samples=n_train + rows, n_features=n_features, n_informative=n_informative,
                                   n_classes=n_classes, random_state=0)
        return X[:n_train], y[:n_train], X[n_train:]

    want = lambda key: only is None or key in only  # noqa: E731
    if want("protonn-usps"):
        from tinycc_ml.models.protonn_trainer import ProtoNNClassifier

        Xt, yt, X = data(256, 60, 10, 4000)
        clf = ProtoNNClassifier(budget_bytes=65536, random_state=0).fit(Xt, yt)
        model = clf.to_model()
        kb = sum(a.size for a in (model.W, model.B, model.Z)) * 4 / 1024
        yield ("protonn-usps", f"ProtoNN, D=256, d={model.W.shape[0]}, m={model.B.shape[1]}, 10 classes "
               f"({kb:.0f} KB float)", model, ("numpy + BLAS (formula)", protonn_blas(model)), model.predict, Xt, X)
    if want("mlp-784") or want("forest-784") or want("logreg-784") or want("xgboost-784"):
        Xt, yt, X = data(784, 60, 10, 5000)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if want("mlp-784"):
                from sklearn.neural_network import MLPClassifier

                mlp = MLPClassifier((32,), max_iter=40, random_state=0).fit(Xt, yt)
                yield ("mlp-784", "MLP (32,), D=784, 10 classes", mlp, ("onnxruntime", mlp_onnxruntime(mlp)),
                       mlp.predict, Xt, X, ("scikit-learn predict", mlp.predict))
            if want("forest-784"):
                from sklearn.ensemble import RandomForestClassifier

                rf = RandomForestClassifier(100, max_depth=10, random_state=0, n_jobs=1).fit(Xt, yt)
                yield ("forest-784", "RandomForest(100, depth 10), D=784, 10 classes", rf,
                       ("scikit-learn predict", rf.predict), rf.predict, Xt, X)
            if want("xgboost-784"):
                import xgboost

                xgb = xgboost.XGBClassifier(n_estimators=100, max_depth=6, n_jobs=1, random_state=0).fit(Xt, yt)
                yield ("xgboost-784", "XGBoost(100 rounds, depth 6), D=784, 10 classes (1,000 trees)", xgb,
                       ("XGBoost inplace_predict", xgboost_inplace(xgb)), xgb.predict, Xt, X)
            if want("logreg-784"):
                from sklearn.linear_model import LogisticRegression

                lr = LogisticRegression(max_iter=300).fit(Xt[:2000], yt[:2000])
                yield ("logreg-784", "LogisticRegression, D=784, 10 classes", lr, ("numpy + BLAS", linear_blas(lr)),
                       lr.predict, Xt[:2000], X, ("scikit-learn predict", lr.predict))
    if want("kws-dscnn"):
        model = tinycc_ml.load_model(KWS)
        (_, _, x_type), = model.input_parts
        scale, zero_point = float(x_type.dtype.qscales[0]), int(x_type.dtype.zero_point)
        codes = np.random.default_rng(0).integers(-128, 128, size=(rows, model.input_dim))
        X = (codes - zero_point) * scale
        yield ("kws-dscnn", "MLPerf Tiny KWS DS-CNN (int8 .tflite), 49x10 MFCC, 12 classes", model,
               ("LiteRT (XNNPACK, 1 thread)", litert_rows(KWS)), tflite_micro_rows(KWS, model), None, X)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=10000)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--only", default=None, help="comma-separated model keys (the stored table is not replaced)")
    args = ap.parse_args(argv)
    only = set(args.only.split(",")) if args.only else None
    print(f"host C flags: {' '.join(HOST_CFLAGS)}; {args.rows:,}-row batches, median of {args.repeat}, one thread")
    head = f"{'model':<13} {'build':<24} {'predictions/s':>14} {'vs anchor':>9} {'agree':>6}"
    print(head)
    print("-" * len(head))
    table = []
    for key, description, model, (anchor_name, anchor), reference, Xc, X, *library in models(args.rows, only):
        X = X.astype(np.float32).astype(np.float64)
        ref = reference(X)
        precisions = ("int8",) if Xc is None else PRECISIONS  # a .tflite network: its int8 as given
        builds = {p: tinycc_ml.compile(model, target="host", precision=p, calibration=Xc, name="hb").load()
                  for p in precisions}
        # anchor and builds timed in turn, --repeat rounds (so a load change hits them alike); medians
        fns = {anchor_name: anchor, **dict(library), **{f"C {p}": b.predict for p, b in builds.items()}}
        for fn in fns.values():
            fn(X[:100])
        times = {name: [] for name in fns}
        for _ in range(args.repeat):
            for name, fn in fns.items():
                t0 = time.perf_counter()
                fn(X)
                times[name].append(time.perf_counter() - t0)
        rates = {name: len(X) / float(np.median(t)) for name, t in times.items()}
        base = rates[anchor_name]
        for name, fn in fns.items():
            agree = float(np.mean(np.asarray(fn(X)) == np.asarray(ref)))  # labels 0..9: indices alike
            print(f"{key:<13} {name:<24} {rates[name]:>14,.0f} {rates[name] / base:>9.2f} {agree:>6.3f}", flush=True)
        # a row per anchor: the fastest library first, then the model's own library where that is another
        for i, name in enumerate([anchor_name, *(n for n, _ in library)]):
            rate = rates[name]
            cells = [description if i == 0 else f"{description}: against its own library", f"{name}: {rate:,.0f}"]
            cells += [f"{rates[f'C {p}']:,.0f} ({rates[f'C {p}'] / rate:.2f}x)" if p in precisions else "-"
                      for p in PRECISIONS]
            table.append(cells)
    write_table("host_throughput", ["model", "anchor: predictions/s", *(f"C {p}" for p in PRECISIONS)], table,
                script="benchmarks/host_throughput.py" + (f" --repeat {args.repeat}" if args.repeat != 7 else ""),
                results_dir=None if only else Path(__file__).resolve().parent / "results")


if __name__ == "__main__":
    main()
