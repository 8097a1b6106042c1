"""ONNX dense networks (exported from PyTorch, Keras, ...) as the mlp family.

Read with the ``onnx`` package (optional extra: ``pip install tinycc-ml[onnx]``); the file is parsed
(protobuf), never executed. A chain of

    Flatten / Identity (on a vector: no-ops), Gemm (transA = 0) or MatMul [+ Add of a constant],
    after each layer any sequence of Relu / Tanh / Sigmoid (layers may differ), and at the end
    optionally Softmax (classes)

becomes an ``MLPModel`` (per layer its chain of activations; its TFLite int8 build, ``compile``'s precision
"int8" in the default dialect, reads the file again as a float network: ``network_form``). A last Sigmoid makes
the output logistic (binary: one output; multilabel: several; the scores are what it is applied to, the file's
output the probabilities: ``onnx_outputs`` gives it from a build, as onnxruntime does, whatever the family); without
a final Softmax or Sigmoid two or more outputs are class scores (argmax; probabilities: their softmax), one
output is a regression value. Any other graph (convolutions, pools, a channels-first input, ...) is
read by ``onnx_network`` as a float network (a NetworkModel, quantised to int8 by ``compile`` from
calibration rows). Weights may be stored as external data next to the file (PyTorch's default export;
read by ``onnx_data``); a dynamic batch dimension is taken as 1. A network's inputs after the first are states
carried from call to call (PyTorch's h0, c0 given the h_n, c_n of the call before), its outputs after the first
their next values. A recurrent layer (GRU, LSTM, RNN) runs over its whole sequence per call (``recurrent="unroll"``:
a sequence of dynamic length needs ``sequence_length``) or one time step per call (``recurrent="step"``). Anything
else is refused with a ModelFileError naming the file and what is wrong: a branch, another dynamic dimension, a
non-finite weight.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

from tinycc_ml.errors import CompileError, ModelFileError
from tinycc_ml.importers.onnx_activation_folds import fold_activations
from tinycc_ml.importers.onnx_data import read_initializers
from tinycc_ml.importers.onnx_erf_gelu import fold_erf_gelu
from tinycc_ml.importers.onnx_network import attributes, fold_batch_norm, network_graph
from tinycc_ml.importers.onnx_recurrent import RECURRENT_OPS, input_sequence_axis
from tinycc_ml.importers.onnx_unrolled_rnn import fold_unrolled_rnns
from tinycc_ml.models.mlp import MLPModel
from tinycc_ml.models.network import NetworkModel
from tinycc_ml.models.saved import check_array

SUPPORTED_OPS = ("Gemm", "MatMul", "Add", "Relu", "Tanh", "Sigmoid", "Softmax", "Flatten", "Identity",
                 "BatchNormalization")
ACTIVATION_OF = {"Relu": "relu", "Tanh": "tanh", "Sigmoid": "logistic"}
MAX_ONNX_BYTES = 256 << 20
ONNX_DOMAINS = ("", "ai.onnx")  # the standard operator set; a custom domain's "Relu" is another op
RECURRENT_FORMS = ("unroll", "step")  # a recurrent layer's sequence per call, or one time step per call


def load_onnx(path, recurrent: str = "unroll", sequence_length: int | None = None,
              as_network: bool = False) -> MLPModel | NetworkModel:
    """``recurrent``: "unroll" (a recurrent layer's whole sequence per call) or "step" (one time step per call, the
    states in static RAM between calls); ``sequence_length``: the sequence's length where the file leaves it
    dynamic (unrolled builds); ``as_network``: a dense chain read as a float network too (its TFLite int8 build:
    the MLPModel's ``network_form``)."""
    path = Path(path)
    if recurrent not in RECURRENT_FORMS:
        raise CompileError(f"recurrent={recurrent!r} is not one of {', '.join(RECURRENT_FORMS)}")
    if sequence_length is not None and (isinstance(sequence_length, bool) or not isinstance(sequence_length, int)
                                        or sequence_length < 1):
        raise CompileError(f"sequence_length={sequence_length!r}: a positive number of time steps")
    try:
        import onnx
    except ImportError:
        raise ModelFileError(f"{path}: reading ONNX files needs the onnx package (pip install "
                             "'tinycc-ml[onnx]')") from None
    if not path.is_file():
        raise ModelFileError(f"{path}: no such file")
    if path.stat().st_size > MAX_ONNX_BYTES:
        raise ModelFileError(f"{path}: {path.stat().st_size} bytes, more than a tiny network's {MAX_ONNX_BYTES}")
    try:
        proto = onnx.load(str(path), load_external_data=False)
    except Exception as exc:  # protobuf's DecodeError and friends: the file is not an ONNX model
        raise ModelFileError(f"{path}: not a readable ONNX model ({type(exc).__name__})") from None
    graph = proto.graph
    weights = read_initializers(path, graph)
    inputs = [i for i in graph.input if i.name not in weights]
    if not inputs:
        raise ModelFileError(f"{path}: the network has no input")
    check_like_onnxruntime(path, proto, [i.name for i in inputs])
    graph, weights = fold_unrolled_rnns(graph, weights, proto.opset_import)
    graph = fold_activations(fold_erf_gelu(graph, weights), weights)
    dims = inputs[0].type.tensor_type.shape.dim
    axis, others = input_sequence_axis(graph, inputs[0].name, attributes)
    recurrent_layers = [f"{n.op_type} node {n.name!r}" for n in graph.node if n.op_type in RECURRENT_OPS]
    stepped = recurrent == "step"
    if (stepped or sequence_length is not None) and not recurrent_layers:
        option = "recurrent='step'" if stepped else "sequence_length"
        raise CompileError(f"{path}: {option} is for networks with recurrent layers (GRU, LSTM, RNN nodes); this one "
                           "has none" + ("" if not any(n.op_type == "Tanh" for n in graph.node) else
                                         " (an exporter may have unrolled one into MatMul and Tanh nodes: compile it "
                                         "unrolled)"))
    if stepped and axis is None:
        raise ModelFileError(f"{path}: a stepped build takes one time step of the network's input per call, and no "
                             f"recurrent layer reads the input as its sequence ({'; '.join(others)}, over the whole "
                             "sequence): compile it unrolled (recurrent='unroll')")
    if len(dims) > 1 and dims[0].HasField("dim_value") and dims[0].dim_value != 1 and axis != 0:
        raise ModelFileError(f"{path}: input {inputs[0].name!r} has a fixed batch of {dims[0].dim_value} rows (ONNX "
                             "Runtime runs that many rows per call); export with batch 1 or a dynamic batch")
    shape, file_steps = [], None
    for k, dim in enumerate(dims):
        static = dim.HasField("dim_value") and dim.dim_value >= 1
        if k == axis and (stepped or not static):
            file_steps = dim.dim_value if static else None
            if not stepped and sequence_length is None:
                raise ModelFileError(f"{path}: input {inputs[0].name!r} dimension {k} is the sequence of "
                                     f"{recurrent_layers[0]}, of dynamic length ({dim.dim_param or 'unknown'}): give "
                                     "its length (--sequence-length, compile(sequence_length=...)) or step it one "
                                     "time step per call (--recurrent step)")
            shape.append(1 if stepped else sequence_length)
        elif static:
            if k == axis and sequence_length not in (None, dim.dim_value):
                raise CompileError(f"{path}: sequence_length={sequence_length}, but input {inputs[0].name!r} has a "
                                   f"sequence of {dim.dim_value} time steps fixed in the file")
            shape.append(dim.dim_value)
        elif k == 0 and len(dims) > 1:  # a dynamic batch (PyTorch's dynamic_axes): one row at a time
            shape.append(1)
        else:
            raise ModelFileError(f"{path}: input {inputs[0].name!r} dimension {k} is dynamic "
                                 f"({dim.dim_param or 'unknown'}); export with a fixed shape (only the batch may "
                                 "be dynamic)")
    if sequence_length is not None and axis is None:
        raise CompileError(f"{path}: sequence_length is for a recurrent layer reading the network's input as its "
                           f"sequence; here {'; '.join(others)}")
    batch = dims[0].dim_param if len(dims) > 1 and dims[0].HasField("dim_param") else None
    states = [(i.name, state_shape(path, i, batch)) for i in inputs[1:]]
    dense = all(node.op_type in SUPPORTED_OPS for node in graph.node) and \
        inputs[0].type.tensor_type.elem_type == FLOAT32_TYPE
    if not dense or states or as_network or (len(shape) > 1 and any(s != 1 for s in shape[:-1])):
        opset = next((o.version for o in proto.opset_import if o.domain in ONNX_DOMAINS), None)
        network = network_graph(path, graph, weights, inputs[0].name, shape if axis == 0 else [1, *shape[1:]], opset,
                                tuple(states), axis, stepped, file_steps,
                                indices=inputs[0].type.tensor_type.elem_type in INDEX_TYPES)
        model = NetworkModel(network, path.name)
        if recurrent_layers:
            model.recurrent, model.recurrent_layers = recurrent, tuple(recurrent_layers)
            model.reimport = functools.partial(load_onnx, path)  # compile(model, recurrent=...) reads it again
        return model
    if not shape:
        raise ModelFileError(f"{path}: input {inputs[0].name!r} is a scalar; expected one vector "
                             "([features] or [1, features])")
    model = _chain(path, graph, weights, inputs[0].name, shape[-1], len(shape))
    model.network_form = functools.partial(load_onnx, path, as_network=True)  # compile's TFLite int8 of it
    return model


def state_shape(path: Path, value, batch: str | None) -> list[int]:
    """The shape of an input that is a state (the batch's dynamic dimension taken as 1)."""
    shape = []
    for k, dim in enumerate(value.type.tensor_type.shape.dim):
        if dim.HasField("dim_value") and dim.dim_value >= 1:
            shape.append(dim.dim_value)
        elif batch is not None and dim.HasField("dim_param") and dim.dim_param == batch:
            shape.append(1)
        else:
            raise ModelFileError(f"{path}: input {value.name!r} (a state) dimension {k} is dynamic "
                                 f"({dim.dim_param or 'unknown'}); export with a fixed shape")
    return shape


# the standard ops' input counts (min, max); a node with another count is one onnxruntime refuses
ARITY = {"Gemm": (2, 3), "MatMul": (2, 2), "Add": (2, 2), "Relu": (1, 1), "Tanh": (1, 1), "Sigmoid": (1, 1),
         "Softmax": (1, 1), "Flatten": (1, 1), "Identity": (1, 1), "Conv": (2, 3), "MaxPool": (1, 1),
         "AveragePool": (1, 1), "GlobalAveragePool": (1, 1), "ReduceMean": (1, 2), "BatchNormalization": (5, 5),
         "Clip": (1, 3), "Reshape": (2, 2), "Squeeze": (1, 2), "Unsqueeze": (1, 2), "Dropout": (1, 3),
         "Constant": (0, 0)}
# ops whose every operand is float arithmetic: their initializers must be float32, as the input is
FLOAT_OPERANDS = ("Gemm", "MatMul", "Add", "Conv", "BatchNormalization")
FLOAT32_TYPE = 1  # TensorProto.FLOAT
INDEX_TYPES = (6, 7)  # TensorProto.INT32, INT64: the indices an Embedding (Gather of a constant table) reads
FIRST_OPSET = 7  # older standard opsets define Gemm, BatchNormalization, ... otherwise
FIRST_IR_VERSION = 3  # the first with opset imports (0: a file that never said)


def check_like_onnxruntime(path: Path, proto, input_names: list[str]) -> None:
    """What onnxruntime checks before it runs a graph, so a file it refuses is refused here too (never read as
    some other network): the standard opset's version is one the onnx package defines (7 or later), every
    value is defined once, each op has its input count, and the weights of float arithmetic are float32."""
    import onnx
    from onnx import defs

    if not FIRST_IR_VERSION <= proto.ir_version <= onnx.IR_VERSION:
        raise ModelFileError(f"{path}: ONNX IR version {proto.ir_version}; versions {FIRST_IR_VERSION} to "
                             f"{onnx.IR_VERSION} are read")
    outputs = list(proto.graph.output)
    for value in [*[i for i in proto.graph.input if i.name in input_names], *outputs]:
        kind = value.type.tensor_type.elem_type
        if value.name == input_names[0] and kind in INDEX_TYPES:  # token indices: an Embedding's Gather reads them
            continue
        # an output with no type at all is left to inference; a tensor type of element type 0 is refused
        if kind != FLOAT32_TYPE and not (value in outputs and not value.type.HasField("tensor_type")):
            raise ModelFileError(f"{path}: {'output' if value in outputs else 'input'} {value.name!r} has ONNX "
                                 f"element type {kind}; float32 (type 1) is read"
                                 + (", and integers (int32, int64: indices) as the first input" if value.name in
                                    input_names else ""))
    versions = [o.version for o in proto.opset_import if o.domain in ONNX_DOMAINS]
    newest = defs.onnx_opset_version()
    if len(versions) != 1 or not FIRST_OPSET <= versions[0] <= newest:
        raise ModelFileError(f"{path}: standard ONNX opset {versions or 'missing'}; opsets {FIRST_OPSET} to {newest} "
                             "are read")
    graph = proto.graph
    types = {t.name: t.data_type for t in graph.initializer}
    defined = {*input_names, *types}
    for node in graph.node:
        what = f"node {node.name!r} ({node.op_type})"
        _check_attributes(path, node, versions[0], what)
        if set(node.output) & set(node.input):
            raise ModelFileError(f"{path}: {what} takes its own output as an input")
        low, high = ARITY.get(node.op_type, (0, 1 << 30))
        if not low <= len(node.input) <= high:
            words = dict(enumerate(("no input", "one", "two", "three", "four", "five")))
            takes = words[low] if low == high else f"{words[low]} to {words[high]}"
            raise ModelFileError(f"{path}: {node.op_type} node {node.name!r} has {len(node.input)} inputs; "
                                 f"{node.op_type} takes {takes}")
        for name in node.output:
            if name and name in defined:
                raise ModelFileError(f"{path}: {what} defines {name!r}, which is already defined")
            defined.add(name)
        if node.op_type in FLOAT_OPERANDS:
            for name in node.input:
                if name in types and types[name] != FLOAT32_TYPE:
                    raise ModelFileError(f"{path}: {what} takes initializer {name!r} of ONNX data type "
                                         f"{types[name]}; its operands must be float32 (type 1), as its input")


def _check_attributes(path: Path, node, version: int, what: str) -> None:
    """Every attribute of a standard op is one its schema (at the file's opset) defines, of its type."""
    from onnx import defs

    if node.domain not in ONNX_DOMAINS:
        return  # refused by the readers, naming the domain
    try:
        schema = defs.get_schema(node.op_type, version, "")
    except Exception:  # noqa: BLE001 - onnx's SchemaError: no such op at this opset
        if defs.has(node.op_type, ""):  # an op of a later opset (Mish at 17): onnxruntime refuses the file
            since = min(d.since_version for d in defs.get_all_schemas_with_history()
                        if d.name == node.op_type and d.domain in ONNX_DOMAINS)
            raise ModelFileError(f"{path}: {what} is an op of opset {since} on; the file's opset is {version} "
                                 "(onnxruntime refuses it)") from None
        return  # no such op at all: the readers name it
    for attribute in node.attribute:
        known = schema.attributes.get(attribute.name)
        if known is None:
            raise ModelFileError(f"{path}: {what} has attribute {attribute.name!r}, which {node.op_type} (opset "
                                 f"{version}) does not define")
        if attribute.type != known.type:
            raise ModelFileError(f"{path}: {what} attribute {attribute.name!r} is of ONNX attribute type "
                                 f"{attribute.type}, not {int(known.type)}")


def broadcasts_to_row(shape: tuple, out: int) -> bool:
    """Whether a constant of ``shape`` broadcasts onto a layer's output [1, ..., out] without changing its
    values' count (a (8, 1) bias on [1, 8] would make it (8, 8))."""
    if not shape:
        return True
    return all(s == 1 for s in shape[:-1]) and shape[-1] in (1, out)


def _attrs(node) -> dict:
    from onnx import helper

    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _const(path, weights: dict, name: str, node) -> np.ndarray:
    if name not in weights:
        raise ModelFileError(f"{path}: {node.op_type} node {node.name!r} takes {name!r}, which is computed; only "
                             "constant weights (initializers) are supported there")
    return check_array(weights[name], name, path)


def _chain(path, graph, weights: dict, current: str, dim: int, rank: int) -> MLPModel:
    layers: list[list[np.ndarray]] = []  # [W (out, in), b (out,)]
    chains: list[list[str]] = []  # after each layer: its activations in order
    final = None  # "Softmax" after the last layer
    for node in graph.node:
        op = node.op_type
        if op not in SUPPORTED_OPS:
            raise ModelFileError(f"{path}: op {op} (node {node.name!r}) is not supported; a dense network may use "
                                 f"{', '.join(SUPPORTED_OPS)}")
        if node.domain not in ONNX_DOMAINS:
            raise ModelFileError(f"{path}: node {node.name!r} is {op} of domain {node.domain!r}, not the standard "
                                 "ONNX op of that name")
        if set(node.output) & set(node.input):
            raise ModelFileError(f"{path}: node {node.name!r} ({op}) takes its own output as an input")
        if final is not None and op not in ("Flatten", "Identity"):
            raise ModelFileError(f"{path}: {op} after the final {final}; {final} must be the last op")
        data = [i for i in node.input if i and i not in weights]
        if current not in node.input or len(data) != 1 or len(node.output) != 1:
            raise ModelFileError(f"{path}: node {node.name!r} ({op}) does not continue the single chain from the "
                                 "input; branches and skip connections are not supported")
        attrs = _attrs(node)
        if op in ("Flatten", "Identity"):
            if op == "Flatten" and attrs.get("axis", 1) not in (0, 1):
                raise ModelFileError(f"{path}: Flatten node {node.name!r} with axis={attrs['axis']} on a vector")
            rank = 2 if op == "Flatten" else rank
        elif op in ("Gemm", "MatMul"):
            if op == "Gemm" and rank != 2:  # ONNX's Gemm takes matrices only
                raise ModelFileError(f"{path}: Gemm node {node.name!r} takes a rank-{rank} input; Gemm needs a "
                                     "matrix ([1, features]): Flatten first")
            W, b = _linear(path, node, attrs, weights, current)
            if W.shape[1] != (layers[-1][0].shape[0] if layers else dim):
                raise ModelFileError(f"{path}: {op} node {node.name!r} takes {W.shape[1]} inputs, the previous "
                                     f"layer gives {layers[-1][0].shape[0] if layers else dim}")
            layers.append([W, b])
            chains.append([])
        elif op == "Add":
            if not layers or chains[-1]:
                raise ModelFileError(f"{path}: Add node {node.name!r} does not follow a MatMul or Gemm (a bias "
                                     "after an activation is not supported)")
            others = [i for i in node.input if i != current]
            if len(node.input) != 2 or len(others) != 1:
                raise ModelFileError(f"{path}: Add node {node.name!r} has {len(node.input)} inputs; Add takes two")
            bias = _const(path, weights, others[0], node)
            out = layers[-1][0].shape[0]
            if not broadcasts_to_row(bias.shape, out):
                raise ModelFileError(f"{path}: Add node {node.name!r} adds shape {bias.shape} to {out} outputs")
            rank = max(rank, bias.ndim)
            layers[-1][1] = layers[-1][1] + np.broadcast_to(bias.reshape(-1), (out,))
        elif op == "BatchNormalization":  # BatchNorm1d after a Linear (the TorchScript exporter leaves it)
            if not layers or chains[-1] or rank != 2:
                raise ModelFileError(f"{path}: BatchNormalization node {node.name!r} does not follow a MatMul or "
                                     "Gemm of a (batch, features) input; only batch normalisation folded into the "
                                     "layer before it is supported")
            layers[-1] = list(fold_batch_norm(node, *layers[-1], [_const(path, weights, name, node)
                                                                  for name in node.input[1:5]], path))
        else:  # Relu, Tanh, Sigmoid, Softmax
            if not layers:
                raise ModelFileError(f"{path}: {op} node {node.name!r} does not follow a dense layer (it acts on "
                                     "the input)")
            if op == "Softmax":
                if attrs.get("axis", -1) not in (-1, 1):
                    raise ModelFileError(f"{path}: Softmax node {node.name!r} with axis={attrs['axis']} on a vector")
                final = op
            else:
                chains[-1].append(ACTIVATION_OF[op])
        current = node.output[0]
    if not layers:
        raise ModelFileError(f"{path}: no Gemm or MatMul layer")
    if current not in [o.name for o in graph.output]:
        raise ModelFileError(f"{path}: the chain ends at {current!r}, which is not the graph's output")
    if final == "Softmax":
        output = "softmax"
    elif chains[-1] and chains[-1][-1] == "logistic":
        output = "logistic"  # the probabilities: the logistic of the scores before the last Sigmoid
        chains[-1].pop()
        final = "Sigmoid"
    else:
        output = "softmax" if layers[-1][0].shape[0] >= 2 else "identity"
    model = MLPModel([w for w, _ in layers], [b for _, b in layers], chains, output, source=str(path))
    model.file_applies = final
    return model


def onnx_outputs(model, predictor, X) -> np.ndarray:
    """The file's first output as onnxruntime computes it, from ``predictor`` (a build of ``model``, which
    ``load_onnx`` read), (n, outputs): a dense network whose file ends in Softmax or Sigmoid keeps its scores before
    it (argmax and thresholds exact in fixed point) and gives the file's output as its probabilities (a Sigmoid on
    one output: the probability of class 1); any other network's scores are the file's outputs."""
    final = getattr(model, "file_applies", None)
    if final is None:
        return np.asarray(predictor.decision_function(X), dtype=np.float64)
    proba = np.asarray(predictor.predict_proba(X), dtype=np.float64)
    return proba[:, 1:] if final == "Sigmoid" and model.binary else proba


def _linear(path, node, attrs: dict, weights: dict, current: str) -> tuple[np.ndarray, np.ndarray]:
    """(W (out, in), b (out,)) of a Gemm or MatMul node whose data operand is ``current``."""
    if node.op_type == "MatMul":
        if node.input[0] != current:
            raise ModelFileError(f"{path}: MatMul node {node.name!r} multiplies the weights from the left; "
                                 "expected x @ W")
        B = _const(path, weights, node.input[1], node)
        if B.ndim != 2:
            raise ModelFileError(f"{path}: MatMul node {node.name!r} weights have shape {B.shape}, expected 2-D")
        return B.T, np.zeros(B.shape[1])
    if node.input[0] != current or attrs.get("transA", 0):
        raise ModelFileError(f"{path}: Gemm node {node.name!r} must take the input as A without transA")
    B = _const(path, weights, node.input[1], node)
    if B.ndim != 2:
        raise ModelFileError(f"{path}: Gemm node {node.name!r} weights have shape {B.shape}, expected 2-D")
    W = (B if attrs.get("transB", 0) else B.T) * float(attrs.get("alpha", 1.0))
    b = np.zeros(W.shape[0])
    if len(node.input) > 2 and node.input[2]:
        C = _const(path, weights, node.input[2], node)
        if not broadcasts_to_row(C.shape, W.shape[0]):
            raise ModelFileError(f"{path}: Gemm node {node.name!r} bias has shape {C.shape}, expected "
                                 f"({W.shape[0]},)")
        b = np.broadcast_to(C.reshape(-1), (W.shape[0],)) * float(attrs.get("beta", 1.0))
    return check_array(W, f"{node.name or 'Gemm'} weights", path), check_array(b, f"{node.name or 'Gemm'} bias", path)
