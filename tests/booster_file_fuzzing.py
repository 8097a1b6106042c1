"""Mutation fuzzers for the other libraries' model files (``scripts/fuzz.py --target xgboost-file,
lightgbm-file,onnx-file``): XGBoost JSON and UBJSON, LightGBM text, ONNX protobuf.

Seeds are small models trained (or built, ONNX) here with fixed seeds; a case mutates one of them, in its
structure (a random value anywhere in the document replaced by a number at a boundary, NaN, inf, a string,
a list, an object or null; a key removed; a list cut short, emptied or grown by copies of its entries;
huge counts and sizes) or in its bytes (flips, boundary bytes, truncation, a length field rewritten),
loads it with ``tinycc_ml.load_model`` and compiles it for the host (the C built with -Werror and loaded).
The outcome is that of tests/fuzzing.py: ``ok``, ``error`` (one tinycc_ml error; a ModelFileError names
the file) or ``crash`` (a traceback, C that does not build, a hang, a memory blow-up, or: the mutated file
still loads in its own library and the compiled C disagrees with it on a row the library does not decide
by a hair). ``Outcome.rows`` counts the rows compared with the library.
"""

from __future__ import annotations

import copy
import functools
import json
import math
import tempfile
import traceback
import warnings
from pathlib import Path

import numpy as np

import tinycc_ml
from tests.fuzzing import Outcome
from tests.library_worker import in_library_process, lightgbm_answers, xgboost_answers
from tinycc_ml.errors import ModelFileError, TinyccError, ToolchainError

ROWS = 48
NEAR_TIE = 1e-4
BOUNDARY_NUMBERS = [0, -1, 1, 2, 3, 255, 256, 32767, 32768, 65535, 65536, 2**31 - 1, 2**31, 2**53, 2**63, -2**63,
                    10**30, 1e9, 1e300, -1e300, 1e-45, 0.5, -0.0, 1.5, 3.4e38, 3.5e38, float("nan"), float("inf"),
                    float("-inf")]
ODD_VALUES = ["", "nan", "inf", "-inf", "1e999", "[1,2]", "[]", "0x10", "abc", None, True, [], {}, [1.0, "x"],
              {"a": 1}]


def _pick(rng, options):
    return options[int(rng.integers(len(options)))]


def _data(seed: int, n: int = 120, d: int = 5):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * np.array([1.0, 10.0, 0.1, 1.0, 3.0][:d])
    X[:, 3] = np.round(X[:, 3])  # an integer feature (zero thresholds for LightGBM)
    margin = X[:, 0] + 0.1 * X[:, 1] - X[:, 3] + 0.2 * rng.normal(size=n)
    return X, margin


# ---------------------------------------------------------------- seeds


@functools.cache
def xgboost_seeds() -> tuple:
    """(name, JSON document) of small XGBoost models: every objective family, early stopping, vector leaves."""
    import xgboost

    X, margin = _data(1)
    y2, y3 = (margin > 0).astype(int), np.digitize(margin, np.quantile(margin, [1 / 3, 2 / 3]))
    built = []
    specs = [("binary", xgboost.XGBClassifier, {"objective": "binary:logistic"}, y2),
             ("logitraw", xgboost.XGBClassifier, {"objective": "binary:logitraw"}, y2),
             ("softprob", xgboost.XGBClassifier, {"objective": "multi:softprob"}, y3),
             ("vector-leaf", xgboost.XGBClassifier, {"objective": "multi:softprob", "multi_strategy":
                                                     "multi_output_tree", "tree_method": "hist"}, y3),
             ("regression", xgboost.XGBRegressor, {"objective": "reg:squarederror"}, margin),
             ("poisson", xgboost.XGBRegressor, {"objective": "count:poisson"}, np.exp(np.clip(margin, -3, 3))),
             ("logistic-reg", xgboost.XGBRegressor, {"objective": "reg:logistic"}, (margin > 0).astype(float))]
    for name, cls, options, y in specs:
        est = cls(n_estimators=4, max_depth=3, random_state=0, **options)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est.fit(X, y)
        built.append((name, json.loads(bytes(est.get_booster().save_raw("json")))))
    stopped = xgboost.XGBClassifier(n_estimators=30, max_depth=2, early_stopping_rounds=2, random_state=0)
    stopped.fit(X[:60], y2[:60], eval_set=[(X[60:], y2[60:])], verbose=False)
    built.append(("early-stopped", json.loads(bytes(stopped.get_booster().save_raw("json")))))
    return tuple(built)


@functools.cache
def lightgbm_seeds() -> tuple:
    """(name, model text) of small LightGBM models."""
    import lightgbm

    X, margin = _data(2)
    y2, y3 = (margin > 0).astype(int), np.digitize(margin, np.quantile(margin, [1 / 3, 2 / 3]))
    built = []
    specs = [("binary", lightgbm.LGBMClassifier, {"objective": "binary"}, y2),
             ("multiclass", lightgbm.LGBMClassifier, {"objective": "multiclass"}, y3),
             ("ova", lightgbm.LGBMClassifier, {"objective": "multiclassova"}, y3),
             ("regression", lightgbm.LGBMRegressor, {"objective": "regression"}, margin),
             ("sqrt", lightgbm.LGBMRegressor, {"objective": "regression", "reg_sqrt": True}, margin),
             ("poisson", lightgbm.LGBMRegressor, {"objective": "poisson"}, np.exp(np.clip(margin, -3, 3))),
             ("forest", lightgbm.LGBMRegressor, {"boosting_type": "rf", "bagging_freq": 1, "bagging_fraction": 0.7},
              margin)]
    for name, cls, options, y in specs:
        est = cls(n_estimators=4, num_leaves=6, min_child_samples=5, verbose=-1, random_state=0, **options)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est.fit(X, y)
        built.append((name, est.booster_.model_to_string()))
    return tuple(built)


@functools.cache
def onnx_seeds() -> tuple:
    """(name, serialised model) of small dense and convolutional networks (tests/onnx_oracle.py's builders)."""
    from tests.onnx_oracle import conv_net, dense_net

    built = []
    with tempfile.TemporaryDirectory(prefix="tinycc-ml-onnx-seeds-") as tmp:
        for k in range(6):
            path = Path(tmp) / f"{k}.onnx"
            rng = np.random.default_rng([36, k])
            (conv_net if k >= 4 else dense_net)(rng, path)
            built.append((f"{'conv' if k >= 4 else 'dense'}-{k}", path.read_bytes()))
    return tuple(built)


# ---------------------------------------------------------------- structure mutations (JSON-like documents)


def _paths(doc, prefix=()):
    """Every (path, value) of a JSON document, containers and leaves."""
    yield prefix, doc
    if isinstance(doc, dict):
        for key, value in doc.items():
            yield from _paths(value, (*prefix, key))
    elif isinstance(doc, list) and len(doc) <= 64:
        for i, value in enumerate(doc):
            yield from _paths(value, (*prefix, i))
    elif isinstance(doc, list):
        for i in range(0, len(doc), max(1, len(doc) // 16)):
            yield from _paths(doc[i], (*prefix, i))


def _set(doc, path, value):
    node = doc
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value


def _number_variant(rng, value):
    if rng.random() < 0.5 or not isinstance(value, (int, float)) or isinstance(value, bool):
        return _pick(rng, BOUNDARY_NUMBERS)
    return _pick(rng, [value * 10.0 ** int(rng.integers(-40, 40)), -value, value + 1, value - 1, value * 2**31,
                       float(np.nextafter(np.float32(value), np.float32(np.inf))) if math.isfinite(value) else 0.0])


def mutate_document(rng, doc) -> tuple[object, str]:
    """One structural mutation of a JSON document (a copy)."""
    doc = copy.deepcopy(doc)
    spots = [(p, v) for p, v in _paths(doc) if p]
    path, value = _pick(rng, spots)
    how = _pick(rng, ["number", "number", "number", "odd", "delete", "list", "string-number", "swap"])
    where = "/".join(map(str, path))[-80:]
    if how == "number":
        new = _number_variant(rng, value)
        if isinstance(value, str):  # XGBoost writes many numbers as strings
            new = repr(new) if not isinstance(new, float) or math.isfinite(new) else str(new)
        _set(doc, path, new)
    elif how == "string-number" and isinstance(value, list) and value:
        i = int(rng.integers(len(value)))
        value[i] = _pick(rng, [str(value[i]), None, float("nan"), 1e300, -1, 2**40])
    elif how == "odd":
        _set(doc, path, copy.deepcopy(_pick(rng, ODD_VALUES)))
    elif how == "delete":
        parent = doc
        for key in path[:-1]:
            parent = parent[key]
        del parent[path[-1]]
    elif how == "list":
        lists = [(p, v) for p, v in _paths(doc) if p and isinstance(v, list) and v]
        if lists:
            path, value = _pick(rng, lists)
            where = "/".join(map(str, path))[-80:]
            change = _pick(rng, ["cut", "empty", "grow", "reverse"])
            if change == "cut":
                del value[int(rng.integers(len(value))):]
            elif change == "empty":
                value.clear()
            elif change == "grow":
                value.extend(copy.deepcopy(value[:int(rng.integers(1, len(value) + 1))]))
            else:
                value.reverse()
            how = f"list {change}"
    elif how == "swap":
        others = [(p, v) for p, v in spots if p != path and type(v) is not type(value)]
        if others:
            _set(doc, path, copy.deepcopy(_pick(rng, others)[1]))
    return doc, f"{how} at {where}"


def mutate_bytes(rng, data: bytes) -> tuple[bytes, str]:
    out = bytearray(data)
    how = _pick(rng, ["flip", "byte", "truncate", "insert", "delete"])
    i = int(rng.integers(len(out)))
    if how == "flip":
        for _ in range(int(rng.integers(1, 4))):
            j = int(rng.integers(len(out)))
            out[j] ^= 1 << int(rng.integers(8))
    elif how == "byte":
        out[i] = _pick(rng, [0, 0x7F, 0x80, 0xFF, ord("0"), ord("9"), ord("-"), ord("e"), ord("["), ord("{")])
    elif how == "truncate":
        del out[i:]
    elif how == "insert":
        out[i:i] = bytes(_pick(rng, [b"9999999999", b"\xff\xff\xff\xff", b"-", b"nan", b"\x00"]))
    else:
        del out[i:i + int(rng.integers(1, 16))]
    return bytes(out), f"bytes {how} at {i}"


# UBJSON: the big-endian length and count fields XGBoost writes (int64 'L' markers) rewritten
def mutate_ubj_counts(rng, data: bytes) -> tuple[bytes, str]:
    spots = [i for i in range(len(data) - 9) if data[i:i + 1] == b"L"]
    if not spots:
        return mutate_bytes(rng, data)
    i = _pick(rng, spots)
    value = _pick(rng, [0, 1, 2**31, 2**62, 2**63 - 1, -1, 2**40, int.from_bytes(data[i + 1:i + 9], "big") + 1])
    out = bytearray(data)
    out[i + 1:i + 9] = (value % 2**64).to_bytes(8, "big")
    return bytes(out), f"UBJSON count at {i} = {value}"


def ubjson_bytes(doc) -> bytes:
    """A document as XGBoost writes UBJSON: objects and arrays with counts, numbers' lists typed."""
    out = bytearray()

    def length(n: int):
        out.extend(b"L" + int(n).to_bytes(8, "big", signed=True))

    def put(v):
        if v is None:
            out.extend(b"Z")
        elif isinstance(v, bool):
            out.extend(b"T" if v else b"F")
        elif isinstance(v, int):
            if -2**63 <= v < 2**63:
                out.extend(b"L" + v.to_bytes(8, "big", signed=True))
            else:
                text = str(v).encode()
                out.extend(b"H")
                length(len(text))
                out.extend(text)
        elif isinstance(v, float):
            out.extend(b"D" + np.array(v, dtype=">f8").tobytes())
        elif isinstance(v, str):
            out.extend(b"S")
            length(len(v.encode()))
            out.extend(v.encode())
        elif isinstance(v, list):
            if v and all(isinstance(x, float) for x in v):
                out.extend(b"[$d#")
                length(len(v))
                out.extend(np.asarray(v, dtype=">f4").tobytes())
            elif v and all(isinstance(x, int) and not isinstance(x, bool) and -2**31 <= x < 2**31 for x in v):
                out.extend(b"[$l#")
                length(len(v))
                out.extend(np.asarray(v, dtype=">i4").tobytes())
            else:
                out.extend(b"[#")
                length(len(v))
                for x in v:
                    put(x)
        else:
            out.extend(b"{#")
            length(len(v))
            for key, x in v.items():
                length(len(key.encode()))
                out.extend(key.encode())
                put(x)

    put(doc)
    return bytes(out)


# ---------------------------------------------------------------- running a case


def _rows(rng, d: int) -> np.ndarray:
    X, _ = _data(int(rng.integers(1000)), ROWS, 5)
    X = np.hstack([X, rng.normal(size=(ROWS, max(0, d - 5)))])[:, :d] if d > 0 else X
    X[int(rng.integers(ROWS)), int(rng.integers(d))] = _pick(rng, [np.nan, 1e30, -1e-36, 0.0])
    return X.astype(np.float32).astype(np.float64)


def _compiled(path: Path):
    """(model, predictor) or an Outcome: load and compile for the host, C built and loaded."""
    try:
        model = tinycc_ml.load_model(path)
    except ModelFileError as exc:
        if not str(exc).startswith(str(path)):
            return Outcome("crash", f"ModelFileError not naming the file: {exc}"[:400])
        return Outcome("error", f"ModelFileError: {exc}"[:300])
    except Exception as exc:  # noqa: BLE001 - the fuzzer's job is to catch exactly these
        return Outcome("crash", f"loading: {_where(exc)}")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if model.input_dim > 4096:
                return Outcome("error", f"{model.input_dim} features: not built")
            return model, tinycc_ml.compile(model, target="host").load()
    except ToolchainError as exc:  # the generated C does not build (-Werror): the compiler's bug
        return Outcome("crash", f"C does not build: {exc}"[:600])
    except TinyccError as exc:
        return Outcome("error", f"{type(exc).__name__}: {exc}"[:300])
    except Exception as exc:  # noqa: BLE001
        return Outcome("crash", f"compiling: {_where(exc)}")


def _where(exc: BaseException) -> str:
    frame = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
    place = f" at {Path(frame.filename).name}:{frame.lineno}" if frame else ""
    return f"{type(exc).__name__}{place}: {exc}"[:500]


def _compare(predictor, model, X: np.ndarray, margin: np.ndarray | None, value: np.ndarray | None,
             cut: float, what: str) -> Outcome:
    """The C against the library: regression values (``value``), else labels from the library's margins
    (binary: margin > cut; classes: argmax) on the rows it does not decide by a hair."""
    kind = getattr(model, "task", {}).get("kind", "classification") if isinstance(getattr(model, "task", None),
                                                                                  dict) else "classification"
    with np.errstate(all="ignore"):
        if kind == "regression" and value is not None:
            got = np.asarray(predictor.predict(X), dtype=np.float64).reshape(-1)
            value = np.asarray(value, dtype=np.float64).reshape(len(X), -1)
            if value.shape[1] != 1:
                return Outcome("crash", f"{what}: the library gives {value.shape[1]} values, the C one", rows=len(X))
            want = value[:, 0]
            bad = np.isfinite(want) & (np.abs(want) < 1e37) & ~(np.abs(got - want) <= 1e-3 * (1 + np.abs(want)))
        elif kind == "classification" and margin is not None:
            got = np.asarray(predictor.predict_index(X)).reshape(-1)
            margin = np.asarray(margin, dtype=np.float64).reshape(len(X), -1)
            if margin.shape[1] == 1:
                m = margin[:, 0]
                want = (m > cut).astype(int)
                decided = np.abs(m - cut) > NEAR_TIE * (1 + np.abs(m))
            else:
                want = np.argmax(margin, axis=1)
                top = np.sort(margin, axis=1)
                decided = top[:, -1] - top[:, -2] > NEAR_TIE * (1 + np.abs(top[:, -1]))
            bad = decided & np.all(np.isfinite(margin), axis=1) & (got != want)
        else:
            return Outcome("ok", f"{what} (task {kind}: not compared)")
    if np.any(bad):
        i = int(np.flatnonzero(bad)[0])
        return Outcome("crash", f"{what}: the C disagrees with the library on {int(bad.sum())} of {len(X)} rows "
                                f"(row {i}: library {want[i]!r}, C {got[i]!r})"[:600], rows=len(X))
    return Outcome("ok", what, rows=len(X))


def xgboost_file_case(rng) -> Outcome:
    name, doc = _pick(rng, xgboost_seeds())
    ubj = rng.random() < 0.5
    mutated, how = mutate_document(rng, doc) if rng.random() < 0.75 else (doc, "")
    data = ubjson_bytes(mutated) if ubj else json.dumps(mutated).encode()
    if not how:
        data, how = mutate_ubj_counts(rng, data) if ubj and rng.random() < 0.6 else mutate_bytes(rng, data)
    what = f"xgboost {name} {'ubj' if ubj else 'json'}: {how}"
    with tempfile.TemporaryDirectory(prefix="tinycc-ml-fuzz-xgb-") as tmp:
        path = Path(tmp) / ("model.ubj" if ubj else "model.json")
        path.write_bytes(data)
        built = _compiled(path)
        if isinstance(built, Outcome):
            return Outcome(built.kind, f"{what}: {built.detail}"[:600])
        model, predictor = built
        return _against_xgboost(rng, path, model, predictor, what)


def _against_xgboost(rng, path: Path, model, predictor, what: str) -> Outcome:
    X = _rows(rng, model.input_dim)
    answers = in_library_process(xgboost_answers, str(path), X, model.input_dim)
    if answers is None:
        return Outcome("ok", f"{what} (XGBoost refuses the file)")
    margin, value, objective = answers
    cut = 0.5 if objective == "binary:logitraw" else 0.0
    return _compare(predictor, model, X, margin, value, cut, what)


def lightgbm_file_case(rng) -> Outcome:
    name, text = _pick(rng, lightgbm_seeds())
    if rng.random() < 0.7:
        text, how = mutate_lightgbm_text(rng, text)
        data = text.encode()
    else:
        data, how = mutate_bytes(rng, text.encode())
    what = f"lightgbm {name}: {how}"
    with tempfile.TemporaryDirectory(prefix="tinycc-ml-fuzz-lgb-") as tmp:
        path = Path(tmp) / "model.txt"
        path.write_bytes(data)
        built = _compiled(path)
        if isinstance(built, Outcome):
            return Outcome(built.kind, f"{what}: {built.detail}"[:600])
        model, predictor = built
        return _against_lightgbm(rng, path, model, predictor, what)


LGB_KEYS = ["num_class", "num_tree_per_iteration", "max_feature_idx", "objective", "num_leaves", "num_cat",
            "split_feature", "split_gain", "threshold", "decision_type", "left_child", "right_child", "leaf_value",
            "leaf_weight", "leaf_count", "internal_value", "internal_count", "is_linear", "shrinkage", "tree_sizes",
            "feature_names", "feature_infos", "average_output", "version"]


def mutate_lightgbm_text(rng, text: str) -> tuple[str, str]:
    lines = text.split("\n")
    keyed = [i for i, line in enumerate(lines) if "=" in line]
    how = _pick(rng, ["value", "value", "token", "delete-line", "duplicate-tree", "drop-tree", "objective", "key"])
    if how == "objective":
        i = next((k for k in keyed if lines[k].startswith("objective=")), keyed[0])
        lines[i] = "objective=" + _pick(rng, ["binary sigmoid:0", "binary sigmoid:-1", "multiclass num_class:1",
                                              "regression sqrt", "poisson sqrt", "cross_entropy", "tweedie",
                                              "lambdarank", "custom", "multiclassova num_class:3 sigmoid:1e30",
                                              "binary sigmoid:nan", ""])
        return "\n".join(lines), f"objective {lines[i]!r}"
    if how == "key":
        key = _pick(rng, LGB_KEYS)
        candidates = [k for k in keyed if lines[k].startswith(key + "=")] or keyed
        i = _pick(rng, candidates)
    else:
        i = _pick(rng, keyed)
    key, _, value = lines[i].partition("=")
    tokens = value.split(" ")
    if how in ("value", "key"):
        lines[i] = f"{key}=" + " ".join(_lgb_token(rng, t) for t in tokens) if rng.random() < 0.3 else \
            f"{key}=" + _lgb_token(rng, value)
    elif how == "token":
        j = int(rng.integers(len(tokens)))
        change = _pick(rng, ["replace", "drop", "add"])
        if change == "replace":
            tokens[j] = _lgb_token(rng, tokens[j])
        elif change == "drop":
            del tokens[j]
        else:
            tokens.insert(j, _lgb_token(rng, tokens[j]))
        lines[i] = f"{key}=" + " ".join(tokens)
    elif how == "delete-line":
        del lines[i]
    elif how in ("duplicate-tree", "drop-tree"):
        starts = [k for k, line in enumerate(lines) if line.startswith("Tree=")]
        if starts:
            k = _pick(rng, starts)
            end = next((e for e in range(k + 1, len(lines)) if lines[e].startswith(("Tree=", "end of trees"))),
                       len(lines))
            block = lines[k:end]
            lines[k:end] = block + block if how == "duplicate-tree" else []
    return "\n".join(lines), f"{how} at line {i} ({key})"


def _lgb_token(rng, token: str) -> str:
    try:
        value = float(token)
    except ValueError:
        value = None
    choice = _pick(rng, ["number", "number", "odd", "near"])
    if choice == "odd":
        return _pick(rng, ["", "nan", "inf", "-inf", "1e999", "x", "-", "1e-36", "-1e-36", "1.0000000180025095e-35",
                           "2147483648", "-2147483649", "99999999999999999999", "0x1"])
    if choice == "near" and value is not None and math.isfinite(value):
        return repr(_pick(rng, [value + 1, value - 1, -value, value * 1e20, value * 1e-20, 0.0]))
    number = _pick(rng, BOUNDARY_NUMBERS)
    return str(int(number)) if isinstance(number, int) else repr(number)


def _against_lightgbm(rng, path: Path, model, predictor, what: str) -> Outcome:
    X = _rows(rng, model.input_dim)
    answers = in_library_process(lightgbm_answers, str(path), X, model.input_dim)
    if answers is None:
        return Outcome("ok", f"{what} (LightGBM refuses the file)")
    margin, value, _ = answers
    return _compare(predictor, model, X, margin, value, 0.0, what)


def mutate_onnx(rng, data: bytes) -> tuple[bytes, str]:
    import onnx
    from onnx import numpy_helper

    if rng.random() < 0.3:
        return mutate_bytes(rng, data)
    model = onnx.load_from_string(data)
    graph = model.graph
    how = _pick(rng, ["initializer-values", "initializer-dims", "initializer-type", "initializer-raw", "attribute",
                      "op-type", "node-input", "drop-node", "input-dims", "domain", "duplicate-node", "opset"])
    if how.startswith("initializer") and graph.initializer:
        tensor = _pick(rng, list(graph.initializer))
        if how == "initializer-values":
            array = numpy_helper.to_array(tensor).astype(np.float32).copy()
            flat = array.reshape(-1)
            if flat.size:
                flat[int(rng.integers(flat.size))] = np.float32(_pick(rng, [np.nan, np.inf, -np.inf, 3.4e38, 1e30,
                                                                            -1e30, 1e-45, 0.0, 1e20]))
            tensor.CopyFrom(numpy_helper.from_array(array, tensor.name))
        elif how == "initializer-dims":
            if tensor.dims:
                tensor.dims[int(rng.integers(len(tensor.dims)))] = int(_pick(rng, [0, 1, 2, 3, 1000, 2**31, 2**40]))
            else:
                tensor.dims.append(7)
        elif how == "initializer-type":
            tensor.data_type = int(_pick(rng, [0, 2, 3, 6, 7, 10, 11, 16, 99]))
        else:
            raw = tensor.raw_data
            tensor.raw_data = raw[:int(rng.integers(len(raw) + 1))] if raw else b"\x00" * 3
    elif how == "attribute":
        nodes = [n for n in graph.node if n.attribute]
        if nodes:
            node = _pick(rng, nodes)
            attr = _pick(rng, list(node.attribute))
            if attr.ints:
                attr.ints[int(rng.integers(len(attr.ints)))] = int(_pick(rng, [0, -1, 2, 7, 1000, 2**31, -2**40]))
            elif attr.type == onnx.AttributeProto.INT:
                attr.i = int(_pick(rng, [0, -1, 2, 7, 1000, 2**31]))
            elif attr.type == onnx.AttributeProto.FLOAT:
                attr.f = float(_pick(rng, [0.0, -1.0, float("nan"), float("inf"), 1e30]))
            else:
                del node.attribute[:]
    elif how == "op-type" and graph.node:
        node = _pick(rng, list(graph.node))
        node.op_type = _pick(rng, ["Relu", "Tanh", "Sigmoid", "Softmax", "Gemm", "MatMul", "Add", "Identity",
                                   "Flatten", "Conv", "MaxPool", "Mul", "Sub", "Nonsense"])
    elif how == "node-input" and graph.node:
        node = _pick(rng, list(graph.node))
        names = [i.name for i in graph.initializer] + [o for n in graph.node for o in n.output] + ["x", "missing"]
        if node.input:
            node.input[int(rng.integers(len(node.input)))] = _pick(rng, names)
        if rng.random() < 0.3:
            node.input.append(_pick(rng, names))
    elif how == "drop-node" and graph.node:
        del graph.node[int(rng.integers(len(graph.node)))]
    elif how == "duplicate-node" and graph.node:
        graph.node.append(copy.deepcopy(_pick(rng, list(graph.node))))
    elif how == "input-dims" and graph.input:
        dims = graph.input[0].type.tensor_type.shape.dim
        if dims:
            dim = dims[int(rng.integers(len(dims)))]
            if rng.random() < 0.3:
                dim.dim_param = "batch"
            else:
                dim.dim_value = int(_pick(rng, [0, 1, 2, 3, 100, 2**31, 2**40]))
    elif how == "domain" and graph.node:
        _pick(rng, list(graph.node)).domain = _pick(rng, ["com.example", "ai.onnx.ml", "ai.onnx"])
    elif how == "opset":
        model.opset_import[0].version = int(_pick(rng, [1, 6, 11, 13, 21, 99]))
    return model.SerializeToString(), how


def onnx_file_case(rng) -> Outcome:
    name, data = _pick(rng, onnx_seeds())
    try:
        data, how = mutate_onnx(rng, data)
    except Exception as exc:  # noqa: BLE001 - the mutation itself failed (onnx refused to build it)
        return Outcome("ok", f"onnx {name}: mutation not built ({type(exc).__name__})")
    what = f"onnx {name}: {how}"
    with tempfile.TemporaryDirectory(prefix="tinycc-ml-fuzz-onnx-") as tmp:
        path = Path(tmp) / "model.onnx"
        path.write_bytes(data)
        try:
            model = tinycc_ml.load_model(path)
        except ModelFileError as exc:
            if not str(exc).startswith(str(path)):
                return Outcome("crash", f"{what}: ModelFileError not naming the file: {exc}"[:400])
            return Outcome("error", f"{what}: ModelFileError: {exc}"[:300])
        except Exception as exc:  # noqa: BLE001
            return Outcome("crash", f"{what}: loading: {_where(exc)}")
        from tinycc_ml.models.network import NetworkModel

        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                X = _onnx_rows(rng, model.input_dim)
                network = isinstance(model, NetworkModel)
                if network:
                    result = tinycc_ml.compile(model, target="host", precision="int8", calibration=X)
                else:
                    result = tinycc_ml.compile(model, target="host", input_range=(X.min(axis=0), X.max(axis=0)))
                predictor = result.load()
        except ToolchainError as exc:
            return Outcome("crash", f"{what}: C does not build: {exc}"[:600])
        except TinyccError as exc:
            return Outcome("error", f"{what}: {type(exc).__name__}: {exc}"[:300])
        except Exception as exc:  # noqa: BLE001
            return Outcome("crash", f"{what}: compiling: {_where(exc)}")
        return _against_onnxruntime(path, model, predictor, X, network, what)


def _onnx_rows(rng, d: int) -> np.ndarray:
    return (rng.normal(size=(ROWS, d)) * _pick(rng, [1.0, 1.0, 10.0, 0.01])).astype(np.float32).astype(np.float64)


def _against_onnxruntime(path: Path, model, predictor, X: np.ndarray, network: bool, what: str) -> Outcome:
    """Where onnxruntime runs the mutated file: float (dense) builds give its labels and values; a network
    is checked by its float graph against onnxruntime (the int8 C is the interpreter's, tested elsewhere)."""
    import onnxruntime

    try:
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = 1
        options.log_severity_level = 4
        session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        inp = session.get_inputs()[0]
        shape = [s if isinstance(s, int) else 1 for s in inp.shape]
        if int(np.prod(shape)) != X.shape[1]:
            return Outcome("crash", f"{what}: onnxruntime takes {shape}, tinycc-ml {X.shape[1]} features")
        want = np.concatenate([np.asarray(session.run(None, {inp.name: x.reshape(shape).astype(np.float32)})[0],
                                          dtype=np.float64).reshape(1, -1) for x in X])
    except Exception as exc:  # noqa: BLE001 - onnxruntime refuses it: tinycc-ml compiled it anyway
        return Outcome("crash", f"{what}: compiles, but onnxruntime refuses the file: {str(exc)[-300:]}")
    with np.errstate(all="ignore"):
        if network:
            got = np.asarray(model.scores(X), dtype=np.float64).reshape(len(X), -1)
            spread = np.max(np.abs(want), axis=1, keepdims=True)
            bad = np.all(np.isfinite(want), axis=1) & ~np.all(np.abs(got - want) <= 1e-3 * (1 + spread), axis=1)
            if np.any(bad):
                i = int(np.flatnonzero(bad)[0])
                return Outcome("crash", f"{what}: the float graph differs from onnxruntime on {int(bad.sum())} rows "
                                        f"(row {i}: {got[i][:3]} vs {want[i][:3]})"[:600], rows=len(X))
            return Outcome("ok", what, rows=len(X))
        kind = model.task.get("kind") if isinstance(getattr(model, "task", None), dict) else "classification"
        if want.shape[1] == 1 and kind == "regression":
            return _compare(predictor, model, X, None, want, 0.0, what)
        if kind != "classification":
            return Outcome("ok", f"{what} ({kind}: not compared)")
        if want.shape[1] == 1:  # a logistic output: its probability against 0.5
            return _compare(predictor, model, X, want, None, 0.5, what)
        return _compare(predictor, model, X, want, None, 0.0, what)


FILE_CASES = {"xgboost-file": xgboost_file_case, "lightgbm-file": lightgbm_file_case, "onnx-file": onnx_file_case}
