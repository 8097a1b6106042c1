"""What the library-file mutation surfaces (tests/booster_file_fuzzing.py: xgboost-file, lightgbm-file,
onnx-file) found, each rebuilt here by hand: a traceback, or a file its own library reads as another model
than the one compiled. Each is now one ModelFileError / DataError naming the file, or read as the library
reads it. Also XGBoost's binary model format (UBJSON, ``.ubj``)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import tinycc_ml
from tests.conftest import require_target
from tinycc_ml.errors import CompileError, DataError, ModelFileError

xgboost = pytest.importorskip("xgboost")
lightgbm = pytest.importorskip("lightgbm")
onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402


def _rows(seed: int, n: int = 200, d: int = 4):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    return X, X[:, 0] - X[:, 1] + 0.3 * rng.normal(size=n)


def _xgb_document(**options):
    X, margin = _rows(1)
    est = xgboost.XGBClassifier(n_estimators=3, max_depth=2, random_state=0, **options)
    est.fit(X, (margin > 0).astype(int))
    return est, json.loads(bytes(est.get_booster().save_raw("json")))


# ---------------------------------------------------------------- XGBoost


def test_an_xgboost_tree_param_that_is_not_an_object_is_refused(tmp_path):
    """Was AttributeError ('str' object has no attribute 'get') while reading leaf vector sizes."""
    _, doc = _xgb_document()
    doc["learner"]["gradient_booster"]["model"]["trees"][1]["tree_param"] = "abc"
    path = tmp_path / "m.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(ModelFileError, match=r"m\.json: tree 1: tree_param is a str, not an object"):
        tinycc_ml.load_model(path)


def test_an_iteration_indptr_that_does_not_start_at_tree_0_is_refused(tmp_path):
    """Found by the campaign (xgboost-file): iteration_indptr [1, 2, 3] of 3 trees (its first entry deleted):
    XGBoost predicted with other trees than the C (48 of 48 values differed); the offsets are now checked
    whenever they are there, not only for early stopping."""
    _, doc = _xgb_document()
    model = doc["learner"]["gradient_booster"]["model"]
    assert model["iteration_indptr"] == [0, 1, 2, 3]
    del model["iteration_indptr"][0]
    path = tmp_path / "m.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(ModelFileError, match=r"m\.json: iteration_indptr \[1, 2, 3\] does not split the 3 trees"):
        tinycc_ml.load_model(path)


def test_a_vector_leaf_model_with_fewer_trees_than_classes_compiles_to_what_xgboost_predicts():
    """multi_output_tree: one tree holds every class's value, so 2 trees for 3 classes is a whole model; it was
    refused as 'num_class 3 exceeds the model's 2 tree(s)' (the check meant for num_class 1e9)."""
    require_target("host")
    X, margin = _rows(7)
    est = xgboost.XGBClassifier(n_estimators=2, max_depth=3, multi_strategy="multi_output_tree", tree_method="hist",
                                random_state=0).fit(X, np.digitize(margin, [-0.5, 0.5]))
    Xt = np.random.default_rng(8).normal(size=(300, 4)).astype(np.float32)
    np.testing.assert_array_equal(tinycc_ml.compile(est, target="host").load().predict(Xt), est.predict(Xt))


def test_xgboost_places_trees_by_their_ids_and_so_does_the_importer(tmp_path):
    """Found by the clean run at HEAD (xgboost-file, a list reversed): XGBoost loads each tree at its ``id``, so
    a reversed trees list predicts the same, where the importer read the list's order (36 of 48 rows another
    class); ids that are not 0..n-1 once each (XGBoost refuses or crashes) are refused."""
    X, y = load_iris_rows()
    est = xgboost.XGBClassifier(n_estimators=3, max_depth=2, random_state=0).fit(X, y)
    doc = json.loads(bytes(est.get_booster().save_raw("json")))
    trees = doc["learner"]["gradient_booster"]["model"]["trees"]
    trees.reverse()
    path = tmp_path / "reversed.json"
    path.write_text(json.dumps(doc))
    booster = xgboost.Booster(model_file=str(path))
    want = np.argmax(booster.predict(xgboost.DMatrix(X)), axis=1)
    np.testing.assert_array_equal(want, est.predict(X))  # XGBoost itself: the same model
    np.testing.assert_array_equal(tinycc_ml.compile(path).load().predict_index(X), want)
    trees[0]["id"] = trees[1]["id"]
    path.write_text(json.dumps(doc))
    with pytest.raises(ModelFileError, match="ids are not 0..8 once each"):
        tinycc_ml.load_model(path)


def load_iris_rows():
    from sklearn.datasets import load_iris

    X, y = load_iris(return_X_y=True)
    return X.astype(np.float32).astype(np.float64), y


def test_vector_leaf_weights_that_are_not_a_list_are_refused(tmp_path):
    """Found by the campaign (xgboost-file, a UBJSON file): leaf_weights replaced by a number gave TypeError
    ('float' object is not iterable)."""
    X, margin = _rows(6)
    est = xgboost.XGBClassifier(n_estimators=2, max_depth=2, multi_strategy="multi_output_tree", tree_method="hist",
                                random_state=0).fit(X, np.digitize(margin, [-0.5, 0.5]))
    doc = json.loads(bytes(est.get_booster().save_raw("json")))
    doc["learner"]["gradient_booster"]["model"]["trees"][1]["leaf_weights"] = 2.5
    path = tmp_path / "m.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(ModelFileError, match=r"m\.json: tree 1: leaf_weights is a float, not a list of numbers"):
        tinycc_ml.load_model(path)


@pytest.mark.parametrize("options", [{}, {"objective": "multi:softprob"}])
def test_xgboost_ubj_files_compile_to_what_xgboost_predicts(tmp_path, options):
    """XGBoost's default binary format (save_model("m.ubj")) reads as its JSON form does."""
    require_target("host")
    X, margin = _rows(2)
    y = np.digitize(margin, [-0.5, 0.5]) if options else (margin > 0).astype(int)
    est = xgboost.XGBClassifier(n_estimators=4, max_depth=3, random_state=0, **options).fit(X, y)
    est.get_booster().save_model(str(tmp_path / "m.ubj"))
    est.get_booster().save_model(str(tmp_path / "m.json"))
    from_ubj, from_json = tinycc_ml.load_model(tmp_path / "m.ubj"), tinycc_ml.load_model(tmp_path / "m.json")
    Xt = np.random.default_rng(3).normal(size=(300, 4)).astype(np.float32)
    np.testing.assert_array_equal(from_ubj.scores(Xt), from_json.scores(Xt))
    got = tinycc_ml.compile(from_ubj, target="host").load().predict(Xt)
    np.testing.assert_array_equal(got, est.predict(Xt))


@pytest.mark.parametrize("count, message", [(2**62, "a count of 4611686018427387904 elements"),
                                             (-1, "negative count"), (3, "a count of 3 elements in 8 bytes")])
def test_ubj_counts_beyond_the_file_are_refused_before_allocating(tmp_path, count, message):
    """A typed array's count is checked against the bytes left (2^62 float32 would be 16 EB)."""
    body = b"[$d#L" + count.to_bytes(8, "big", signed=True) + b"\x00" * 8
    path = tmp_path / "m.ubj"
    path.write_bytes(b"{#L" + (1).to_bytes(8, "big") + b"L" + (7).to_bytes(8, "big") + b"learner" + body)
    with pytest.raises(ModelFileError, match=rf"m\.ubj: not a readable UBJSON model: {message}"):
        tinycc_ml.load_model(path)


# ---------------------------------------------------------------- LightGBM


def _lgb_text(**options) -> str:
    X, margin = _rows(4)
    est = lightgbm.LGBMRegressor(n_estimators=4, num_leaves=5, min_child_samples=5, verbose=-1, random_state=0,
                                 **options).fit(X, margin)
    return est.booster_.model_to_string()


def _duplicate_tree(text: str, k: int) -> str:
    start = text.index(f"Tree={k}\n")
    end = text.index(f"Tree={k + 1}\n")
    return text[:end] + text[start:end] + text[end:]


def test_a_lightgbm_file_whose_trees_are_not_where_tree_sizes_says_is_refused(tmp_path):
    """A tree block added by hand: LightGBM reads the trees at tree_sizes' offsets (the copy in place of tree 2,
    the last tree dropped), tinycc-ml read every block: another model (46 of 48 rows' values differed)."""
    text = _duplicate_tree(_lgb_text(), 1)
    path = tmp_path / "m.txt"
    path.write_text(text)
    with pytest.raises(ModelFileError, match=r"m\.txt: tree_sizes lists 4 tree\(s\) whose sizes do not match the "
                                             r"5 tree block\(s\)"):
        tinycc_ml.load_model(path)
    # LightGBM's own reading of it (in a worker process: its loader may abort on such files) is not the five
    # blocks' sum; without the tree_sizes line both read the five blocks
    from tests.library_worker import in_library_process, lightgbm_answers

    X = np.random.default_rng(5).normal(size=(50, 4))
    without_sizes = tmp_path / "plain.txt"
    without_sizes.write_text("\n".join(line for line in text.split("\n") if not line.startswith("tree_sizes=")))
    five_blocks = tinycc_ml.load_model(without_sizes).scores(X)[:, 0]
    answers = in_library_process(lightgbm_answers, str(path), X, 4)
    assert answers is None or not np.allclose(answers[0], five_blocks, atol=1e-6)
    np.testing.assert_allclose(in_library_process(lightgbm_answers, str(without_sizes), X, 4)[0], five_blocks,
                               atol=1e-5)


def test_a_lightgbm_objective_whose_class_count_disagrees_with_the_trees_is_refused(tmp_path):
    """A regressor's objective edited to 'multiclassova num_class:3': one tree per iteration read as one class
    (C: class 0 on every row) while LightGBM answered class 1 on 36 of 48 rows."""
    text = _lgb_text().replace("objective=regression", "objective=multiclassova num_class:3 sigmoid:1")
    path = tmp_path / "m.txt"
    path.write_text(text)
    with pytest.raises(ModelFileError, match=r"m\.txt: LightGBM objective 'multiclassova num_class:3 sigmoid:1' "
                                             r"with num_class 1 / 3 and 1 tree\(s\) per iteration"):
        tinycc_ml.load_model(path)


# ---------------------------------------------------------------- ONNX


def _init(name, value, dtype=np.float32):
    return numpy_helper.from_array(np.asarray(value, dtype=dtype), name)


W43 = np.random.default_rng(36).normal(size=(4, 3))


def _dense(path, nodes, inits, x_dims=(1, 4), opset=17, attributes=None):
    graph = helper.make_graph(nodes, "net", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_dims))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    path.write_bytes(model.SerializeToString())
    return path


GEMM = [helper.make_node("Gemm", ["x", "W", "b"], ["h"]), helper.make_node("Relu", ["h"], ["y"])]


def _with_attribute(node, **attributes):
    node.attribute.extend(helper.make_attribute(k, v) for k, v in attributes.items())
    return node


@pytest.mark.parametrize("nodes, inits, x_dims, opset, message", [
    (GEMM, [_init("W", W43.T), _init("b", np.ones(3))], (1, 4), 99, r"standard ONNX opset \[99\]; opsets 7 to"),
    (GEMM, [_init("W", W43.T), _init("b", np.ones(3))], (1, 4), 1, r"standard ONNX opset \[1\]"),
    ([helper.make_node("Gemm", ["x", "W", "b"], ["h"], transB=1), helper.make_node("Identity", ["h", "W", "b"], ["y"])],
     [_init("W", W43.T), _init("b", np.ones(3))], (1, 4), 17, "Identity node '' has 3 inputs; Identity takes one"),
    ([helper.make_node("Gemm", ["x", "W", "b"], ["h"]), helper.make_node("Gemm", ["x", "W", "b"], ["h"]),
      helper.make_node("Relu", ["h"], ["y"])],
     [_init("W", W43), _init("b", np.ones(3))], (1, 4), 17, "defines 'h', which is already defined"),
    ([helper.make_node("Gemm", ["x", "W", "b"], ["y"])], [_init("W", W43, np.int32), _init("b", np.ones(3))], (1, 4),
     17, "takes initializer 'W' of ONNX data type 6; its operands must be float32"),
    ([helper.make_node("Gemm", ["x", "W", "b"], ["h"]), _with_attribute(helper.make_node("Relu", ["h"], ["y"]),
                                                                        axis=1)],
     [_init("W", W43), _init("b", np.ones(3))], (1, 4), 17, "attribute 'axis', which Relu .* does not define"),
    ([_with_attribute(helper.make_node("Gemm", ["x", "W", "b"], ["y"]), transB="1")],
     [_init("W", W43), _init("b", np.ones(3))], (1, 4), 17, "attribute 'transB' is of ONNX attribute type 3, not 2"),
])
def test_onnx_graphs_onnxruntime_refuses_are_refused(tmp_path, nodes, inits, x_dims, opset, message):
    """Found by the onnx-file surface: each compiled (as some network) while onnxruntime refuses the file."""
    import onnxruntime

    path = _dense(tmp_path / "m.onnx", nodes, inits, x_dims, opset)
    with pytest.raises(Exception):  # noqa: B017 - whatever onnxruntime raises: it does not run the file
        onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    with pytest.raises(ModelFileError, match=message):
        tinycc_ml.load_model(path)


@pytest.mark.parametrize("batch", [100, 0])
def test_a_fixed_batch_other_than_one_is_refused(tmp_path, batch):
    """onnxruntime runs a graph with a fixed batch of 100 on 100 rows at once (found: a conv net whose batch
    was edited to 100 compiled as a one-row network, its input 18 values where onnxruntime takes [100, 3, 6])."""
    path = _dense(tmp_path / "m.onnx", GEMM, [_init("W", W43), _init("b", np.ones(3))], (batch, 4))
    with pytest.raises(ModelFileError, match=f"has a fixed batch of {batch} rows"):
        tinycc_ml.load_model(path)


def _conv(path, flatten_axis=1, dense_scale=1.0):
    rng = np.random.default_rng(0)
    nodes = [helper.make_node("Conv", ["x", "cw", "cb"], ["c"], kernel_shape=[3]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("Flatten", ["r"], ["f"], axis=flatten_axis),
             helper.make_node("Gemm", ["f", "fw", "fb"], ["y"], transB=1)]
    fw = rng.normal(size=(3, 2 * 6))
    fw[0, 0] *= dense_scale
    # channel 0 is never positive (its bias -100): the dense weight fw[0, 0] reads a feature that is always 0
    inits = [_init("cw", rng.normal(size=(2, 1, 3))), _init("cb", [-100.0, 0.5]), _init("fw", fw),
             _init("fb", rng.normal(size=3))]
    return _dense(path, nodes, inits, (1, 1, 8))


def test_a_flatten_axis_beyond_the_rank_is_refused(tmp_path):
    """Flatten(axis=1000) of a rank-3 tensor was read as axis 1000 mod 4 = 0; onnxruntime refuses it."""
    path = _conv(tmp_path / "m.onnx", flatten_axis=1000)
    with pytest.raises(ModelFileError, match=r"Flatten node '': axis 1000 is outside \[-4, 3\]"):
        tinycc_ml.load_model(path)


def test_a_weight_int8_cannot_requantise_is_a_data_error(tmp_path):
    """One dense weight of 1e30 (on a feature that is always 0) among weights of 1: the int8 quantisation's
    requantisation multiplier needs a left shift over 31 bits; was a ValueError from the IR's type rule, now one
    DataError naming the node."""
    path = _conv(tmp_path / "m.onnx", dense_scale=1e30)
    model = tinycc_ml.load_model(path)
    X = np.random.default_rng(1).normal(size=(32, 8))
    with pytest.raises(DataError, match="scales are too far apart for int8"):
        tinycc_ml.compile(model, target="host", precision="int8", calibration=X)


@pytest.mark.parametrize("attribute, value, message", [
    ("strides", [0], r"Conv node 'conv' strides \[0\]: each must be at least 1"),
    ("dilations", [0], r"Conv node 'conv' dilations \[0\]: each must be at least 1"),
])
def test_a_zero_stride_or_dilation_is_refused(tmp_path, attribute, value, message):
    """Found by the campaign (onnx-file, attribute mutations): a Conv stride of 0 gave ZeroDivisionError in the
    padding arithmetic; onnxruntime refuses it."""
    rng = np.random.default_rng(0)
    nodes = [helper.make_node("Conv", ["x", "cw", "cb"], ["c"], name="conv", kernel_shape=[3], **{attribute: value}),
             helper.make_node("Flatten", ["c"], ["f"], axis=1),
             helper.make_node("Gemm", ["f", "fw", "fb"], ["y"], transB=1)]
    inits = [_init("cw", rng.normal(size=(2, 1, 3))), _init("cb", rng.normal(size=2)),
             _init("fw", rng.normal(size=(3, 12))), _init("fb", rng.normal(size=3))]
    path = _dense(tmp_path / "m.onnx", nodes, inits, (1, 1, 8))
    with pytest.raises(ModelFileError, match=message):
        tinycc_ml.load_model(path)


def test_a_pool_stride_of_zero_is_refused(tmp_path):
    rng = np.random.default_rng(0)
    nodes = [helper.make_node("MaxPool", ["x"], ["p"], name="pool", kernel_shape=[2], strides=[0]),
             helper.make_node("Flatten", ["p"], ["f"], axis=1),
             helper.make_node("Gemm", ["f", "fw", "fb"], ["y"], transB=1)]
    path = _dense(tmp_path / "m.onnx", nodes, [_init("fw", rng.normal(size=(3, 4))), _init("fb", np.zeros(3))],
                  (1, 1, 8))
    with pytest.raises(ModelFileError, match=r"MaxPool node 'pool' strides \[0\]: each must be at least 1"):
        tinycc_ml.load_model(path)


@pytest.mark.parametrize("edit, message", [
    (lambda m: m.ClearField("ir_version"), "ONNX IR version 0; versions 3 to"),
    (lambda m: setattr(m, "ir_version", 101), "ONNX IR version 101; versions 3 to"),
    (lambda m: setattr(m.graph.output[0].type.tensor_type, "elem_type", 5), "output 'y' has ONNX element type 5"),
    (lambda m: setattr(m.graph.output[0].type.tensor_type, "elem_type", 45), "output 'y' has ONNX element type 45"),
    # int64 input: token indices now (an Embedding's); anything else reading them is refused by name
    (lambda m: setattr(m.graph.input[0].type.tensor_type, "elem_type", 7), "reads the integer input 'x'; only a "
                                                                           "Gather of a constant table"),
    (lambda m: setattr(m.graph.output[0].type.tensor_type, "elem_type", 0), "output 'y' has ONNX element type 0"),
])
def test_model_fields_onnxruntime_refuses_are_refused(tmp_path, edit, message):
    """Found by the campaign (onnx-file, byte flips): a missing or unknown IR version and a graph output of
    another element type (int16, 45; 0, undefined: the clean run at HEAD) compiled while onnxruntime refuses
    the file."""
    import onnxruntime

    path = _dense(tmp_path / "m.onnx", GEMM, [_init("W", W43), _init("b", np.ones(3))])
    model = onnx.load(str(path))
    edit(model)
    path.write_bytes(model.SerializeToString())
    with pytest.raises(Exception):  # noqa: B017 - whatever onnxruntime raises: it does not run the file
        onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    with pytest.raises(ModelFileError, match=message):
        tinycc_ml.load_model(path)


def test_a_lightgbm_tree_line_that_is_not_key_value_is_refused(tmp_path):
    """Found by the campaign (lightgbm-file, a byte flip): 'shrinkage=1' -> 'shrinkage<1' in a random forest's
    tree 2: LightGBM then predicts another model (36 of 48 values differed) while this reader skipped the line."""
    X, margin = _rows(9)
    est = lightgbm.LGBMRegressor(boosting_type="rf", bagging_freq=1, bagging_fraction=0.7, n_estimators=4,
                                 num_leaves=6, min_child_samples=5, verbose=-1, random_state=0).fit(X, margin)
    text = est.booster_.model_to_string()
    start, end = text.index("Tree=2\n"), text.index("Tree=3\n")
    path = tmp_path / "m.txt"
    path.write_text(text[:start] + text[start:end].replace("shrinkage=1", "shrinkage<1") + text[end:])
    with pytest.raises(ModelFileError, match=r"m\.txt: tree 2: line 'shrinkage<1' is not key=value"):
        tinycc_ml.load_model(path)


def test_an_rbf_svm_narrower_than_float32s_rounding_of_its_support_vectors_is_refused():
    """Found by the library-svm surface (seed 491926900, case 20): features of 1e18 with gamma 0.014: every
    kernel value is 0 in scikit-learn, but a row equal in float32 to a support vector got a kernel of 1 in the
    float C (decision 1e8 against the intercept's -0.006: 22 of 244 rows). Refused now, naming gamma."""
    from sklearn.svm import SVC

    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 3)) * np.array([1e18, 1.0, 1.0])
    y = (X[:, 1] > 0).astype(int)
    est = SVC(kernel="rbf", gamma=0.014).fit(X, y)
    with pytest.raises(CompileError, match="resolves distances below float32's rounding of the support vectors"):
        tinycc_ml.compile(est, target="host", precision="float")
    scaled = SVC(kernel="rbf", gamma=0.014).fit(X / [1e18, 1, 1], y)  # the same model on scaled features compiles
    tinycc_ml.compile(scaled, target="host", precision="float")
