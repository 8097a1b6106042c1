"""Networks as users ship them: the imported IR graph itself is the model. A TFLite int8 ``.tflite``
file's graph is int8 already; an ONNX network's (PyTorch) or a float ``.tflite``'s is float, and compiles

- at precision "float": float C for every op (the float interpreter's arithmetic in float32);
- at precision "int8" (the default dialect, int8_dialect="tflite"): ``quantise`` turns it, from calibration rows,
  into TFLite's int8 dialect (``network_quantise``), whose integer semantics are TFLite's int8 kernels bit for bit;
- at precision "int16", or "int8" with int8_dialect="pow2": the project's own fixed point (power-of-two scales
  from calibration rows, int32 accumulators with overflow proofs: ``network_fixed``).

``compile`` emits C for them on the targets that generate network ops (``Backend.network_ops``: the host and the
microcontrollers), whose outputs equal the fixed-point interpreter's on every byte."""

from __future__ import annotations

from collections import Counter

import numpy as np

from tinycc_ml.codegen.float_input import offset_text
from tinycc_ml.errors import CompileError, DataError, ModelFileError
from tinycc_ml.ir.fixed import quantise_affine, run_fixed
from tinycc_ml.ir.graph import Graph
from tinycc_ml.ir.interp import run_float
from tinycc_ml.ir.types import TensorType, integer
from tinycc_ml.models.base import Model
from tinycc_ml.models.network_quantise import quantise_network

NETWORK_PRECISIONS = ("float", "int8")  # "float", compile's default, takes the file's int8 as it is
# a float network's C: float; the project's int16; int8 (TFLite's, or the project's with int8_dialect="pow2")
FLOAT_NETWORK_PRECISIONS = ("float", "int16", "int8")


class NetworkModel(Model):
    """An imported network: its IR graph (int8 tensors, TFLite's quantisation in the types; or float, from
    ONNX, until ``quantise``)."""

    family = "network"
    recurrent: str | None = None  # an ONNX network's recurrent layers: "unroll" or "step" (importers/onnx.py)
    reimport = None  # for those: the file read again with other options (recurrent=, sequence_length=)
    recurrent_layers: tuple[str, ...] = ()  # those layers, each as "GRU node 'name'"

    def __init__(self, graph: Graph, source: str = "network"):
        self.graph, self.source = graph, source
        (self.input_name,) = graph.inputs()

    def arrays(self) -> dict[str, np.ndarray]:
        raise ModelFileError(f"{self.source}: an imported network is its .tflite or .onnx file; it has no .npz form")

    @property
    def input_parts(self) -> list[tuple[str, int, TensorType]]:
        """The network's inputs as parts of its one input vector: (node, offset, type) in the file's order; a
        network of one input is one part, the whole vector."""
        parts = [(u, int(self.graph.node(u).attrs["offset"]), self.graph.type(u))
                 for u in self.graph.users(self.input_name) if self.graph.op(u) == "retyped_slice"]
        return sorted(parts, key=lambda p: p[1]) or [(self.input_name, 0, self.graph.type(self.input_name))]

    @property
    def output_parts(self) -> list[tuple[str, str, TensorType]]:
        """The network's outputs (label, node, type), in the file's order: the score vector joins them."""
        return [(label, n, self.graph.type(n)) for label, n in self.graph.result_outputs()]

    @property
    def n_classes(self) -> int:
        """The prediction is the argmax of the first output (of a network of several, the others are more scores)."""
        return self.output_parts[0][2].size

    def input_tensors(self) -> list[tuple[str, int, int]]:
        """(name, offset, size) of each input in the input vector, in the file's order."""
        return [(name, offset, t.size) for name, offset, t in self.input_parts]

    def input_ctypes(self) -> list[str]:
        """Each input's C element type, in the file's order (they differ where integer inputs of several widths
        share a vector of the widest)."""
        return ["float" if t.dtype.is_float else f"{'' if t.dtype.integer_range[0] < 0 else 'u'}int{t.dtype.bits}_t"
                for _, _, t in self.input_parts]

    def output_tensors(self) -> list[tuple[str, int, int]]:
        """(name, offset, size) of each output in the score vector, in the file's order."""
        return [(name, offset, t.size) for name, offset, t in self._output_offsets()]

    def join_inputs(self, inputs) -> np.ndarray:
        """Rows of the input vector from one array per input (a sequence in the file's order, or a dict by tensor
        name), each of shape (n, *its shape) or (n, its size)."""
        parts = self.input_parts
        if isinstance(inputs, dict):
            missing = [name for name, _, _ in parts if name not in inputs]
            if missing or len(inputs) != len(parts):
                raise DataError(f"{self.source}: inputs {sorted(inputs)}; the network's are "
                                f"{[name for name, _, _ in parts]}")
            inputs = [inputs[name] for name, _, _ in parts]
        if len(inputs) != len(parts):
            raise DataError(f"{self.source}: {len(inputs)} inputs given, the network has {len(parts)}")
        arrays = []
        for (name, _, t), value in zip(parts, inputs):
            value = np.asarray(value)
            if value.size % t.size:
                raise DataError(f"{self.source}: input {name!r} of {value.size} values is not rows of {t.size}")
            arrays.append(value.reshape(-1, t.size))
        if len({len(a) for a in arrays}) != 1:
            raise DataError(f"{self.source}: inputs of {[len(a) for a in arrays]} rows")
        return np.concatenate(arrays, axis=1)

    def split_outputs(self, scores) -> dict[str, np.ndarray]:
        """Score-vector rows split into one array per output, by tensor name, each of shape (n, *its shape)."""
        scores = np.asarray(scores).reshape(-1, self.n_outputs)
        return {name: scores[:, offset:offset + t.size].reshape(len(scores), *t.shape)
                for name, offset, t in self._output_offsets()}

    def run_tensors(self, inputs) -> dict[str, np.ndarray]:
        """``run_quantised`` tensor by tensor: one integer array per input in, one per output out (by name)."""
        return self.split_outputs(self.run_quantised(self.join_inputs(inputs).reshape(-1, *self.input_shape)))

    def interface_lines(self) -> list[str]:
        """The header's words on the input vector and the score vector: each input's and output's place in them
        and its quantisation."""
        lines = []
        for what, parts in (("Input", [(name, offset, t) for name, offset, t in self.input_parts]),
                            ("Scores", self._output_offsets())):
            if len(parts) == 1:
                lines.append(f"{what}: {_real_text(parts[0][2].dtype)}.")
                continue
            lines.append(f"{what}: {len(parts)} tensors in one vector, in the file's order:")
            lines.extend(f"  [{offset}, {offset + t.size}) {name} {list(t.shape)}: {_real_text(t.dtype)}."
                         for name, offset, t in parts)
        return lines + self.recurrent_lines()

    def integer_refusal(self, precision: str, dialect: str | None) -> str | None:
        """Why a float network that keeps state (recurrent layers, or inputs carried from call to call) has no
        build at this precision; None for any other network. The project's fixed point (int16, pow2 int8) gives a
        state its next value's scale (passes/network_scales.py); TFLite's int8 has no such quantisation."""
        if self.index_input and precision == "int8" and dialect == "pow2":
            return (f"{self.describe()}: its input is integer indices (an Embedding's); int8_dialect='pow2' is not "
                    "implemented for such a network: compile it at precision float or int8 (TFLite's dialect)")
        states = [n for n, _ in self.graph.states()]
        if self.is_quantised or precision == "float" or not states or precision == "int16" or dialect == "pow2":
            return None
        what = ", ".join(self.recurrent_layers) or f"the state {states[0]!r} (an input carried from call to call)"
        return (f"{self.source}: {what}: no int8 quantisation (TFLite's dialect): a state kept between calls has no "
                "range the calibration rows could give it; compile it at precision int16, int8 with "
                "int8_dialect='pow2', or float")

    def recurrent_lines(self) -> list[str]:
        """The header's words on how the recurrent layers run (none without them)."""
        if self.recurrent == "step":
            return ["Recurrent layers: stepped, one time step per call (the input is one time step); their states "
                    "stay in static RAM between calls, <name>_reset() starts a new sequence."]
        if self.recurrent == "unroll":
            return ["Recurrent layers: unrolled, the whole sequence per call."]
        return []

    def _output_offsets(self) -> list[tuple[str, int, TensorType]]:
        offsets, offset = [], 0
        for _, node, t in self.output_parts:
            offsets.append((node, offset, t))
            offset += t.size
        return offsets

    @property
    def _input_dtype(self):
        """The element type of the network's (first) input: the parts share their storage."""
        return self.input_parts[0][2].dtype

    @property
    def is_quantised(self) -> bool:
        """Whether the file fixes the arithmetic: TFLite's int8 (a quantised input), or plain integers in (an
        audio front end's samples), which compile as they are."""
        dtype = self._input_dtype
        return dtype.is_quantised or (dtype.is_integer and not self.index_input)

    @property
    def index_input(self) -> bool:
        """A float network whose input is integer indices (an ONNX Embedding's): integers in, float everywhere after
        (a .tflite file's int32 ids into an int8 table compute in its integers instead)."""
        return self._input_dtype.is_integer and not any(self.graph.type(n).dtype.is_quantised for n in self.graph.nx) \
            and all(t.dtype.is_float for _, _, t in self.output_parts)

    @property
    def integer_input(self) -> bool:
        """The input is plain integers (no quantisation: rows are taken as the integers they hold)."""
        return self._input_dtype.is_integer

    @property
    def reference(self) -> str:
        """What the network computes: "float", or the file's integers: "int16" (TFLite's 16x8: int16 activations,
        int8 weights; or 16-bit plain integers in, an audio front end's samples), "int8" otherwise."""
        if not self.is_quantised:
            return "float"
        return "int16" if self._input_dtype.bits == 16 else "int8"

    def quantise(self, calibration) -> NetworkModel:
        """The int8 network of a float one, its activations' ranges from the calibration rows (each row the
        input tensor's elements in order)."""
        rows = np.asarray(calibration, dtype=np.float64).reshape(-1, *self.input_shape)
        return NetworkModel(quantise_network(self.graph, rows), self.source)

    def describe(self) -> str:
        ops = Counter(self.graph.op(n) for n in self.graph.order() if self.graph.op(n) not in ("input", "const"))
        return f"network {self.source} ({', '.join(f'{op} x{n}' for op, n in sorted(ops.items()))})"

    @property
    def input_shape(self) -> tuple[int, ...]:
        return self.graph.type(self.input_name).shape

    @property
    def input_dim(self) -> int:
        return self.graph.type(self.input_name).size

    @property
    def n_outputs(self) -> int:
        return sum(t.size for _, _, t in self.output_parts)

    def lower(self) -> Graph:
        return self.graph.copy()

    def lower_for(self, precision: str) -> Graph:
        """The graph the C computes: the input a flat int8 vector (reshaped, free, to the network's input
        tensor), the scores the flat output tensor, the prediction their argmax (the first on ties)."""
        graph = self.graph.copy()
        x = graph.type(self.input_name)
        flat = graph.add("input", [], {"name": "x"}, type=TensorType((x.size,), x.dtype), name="x_flat")
        shaped = graph.add("reshape", [flat], {"shape": list(x.shape)}, type=TensorType(x.shape, x.dtype, x.layout),
                           name="x_shaped")
        graph.replace_uses(self.input_name, shaped, keep=(shaped,))
        graph.remove(self.input_name)
        flats = []
        for label, node, t in self.output_parts:
            flats.append(graph.add("reshape", [node], {"shape": [t.size]}, type=TensorType((t.size,), t.dtype),
                                   name="scores" if len(self.output_parts) == 1 else f"{label}_flat"))
        graph.set_output("prediction", graph.add("argmax", [flats[0]], name="prediction"))  # of the first output
        graph.set_output("scores", joined_outputs(graph, flats) if len(flats) > 1 else flats[0])
        states = {label for label, _ in graph.outputs} - {label for label, _ in graph.result_outputs()}
        graph.outputs = [(label, n) for label, n in graph.outputs if label in ("scores", "prediction", *states)]
        return graph

    def size_advice(self, room_bytes: int, constant_bytes: int, value_bytes: int) -> str | None:
        """A network's weights are its file's int8, one byte each: only a smaller network fits."""
        return (f"the weights are the .tflite file's own int8: a network with at most about {room_bytes} bytes of "
                f"weights ({100 * room_bytes / max(constant_bytes, 1):.0f}% of these: fewer or narrower layers, "
                "retrained and exported again) would fit, or a target with more flash")

    def check_precision(self, precision: str) -> None:
        if self.index_input and precision not in ("float", "int8"):
            raise CompileError(f"{self.describe()}: its input is integer indices (an Embedding's); precision "
                               f"{precision!r} is not implemented for such a network: compile it at precision float "
                               "or int8 (TFLite's dialect)")
        if not self.is_quantised:
            if precision not in FLOAT_NETWORK_PRECISIONS:
                raise CompileError(f"{self.describe()}: a float network compiles at precision "
                                   f"{', '.join(FLOAT_NETWORK_PRECISIONS)}, not {precision!r}")
            return
        own = self.reference
        if precision not in ("float", own):
            raise CompileError(f"{self.describe()}: a TFLite network computes in the {own} arithmetic its file "
                               f"defines; precision {precision!r} is not one of float, {own} (float: the default, "
                               f"meaning the file's own {own})")

    def run_quantised(self, Xq) -> np.ndarray:
        """The integer outputs of integer input rows (shape (n, *input_shape); int8, or int16 for a 16x8 file):
        TFLite's kernels' results."""
        Xq = np.asarray(Xq)
        lo, hi = self.input_range
        if not np.issubdtype(Xq.dtype, np.integer) or Xq.size and (Xq.min() < lo or Xq.max() > hi):
            raise DataError(f"{self.source}: inputs must be integers in [{lo}, {hi}]")
        out = run_fixed(self.graph, Xq)
        if len(self.output_parts) == 1:
            return out["scores"]
        return np.concatenate([out[label].reshape(len(out[label]), -1) for label, _, _ in self.output_parts], axis=1)

    @property
    def input_range(self) -> tuple[int, int]:
        flat = self.graph.type(self.input_name).dtype
        if len(self.input_parts) > 1 and flat.is_integer:  # inputs of several widths: the widest vector's range
            return flat.integer_range
        dtype = self._input_dtype
        return dtype.integer_range if dtype.is_integer or dtype.is_quantised else (-128, 127)

    def run_int8(self, Xq) -> np.ndarray:
        """``run_quantised`` of an int8 network."""
        return self.run_quantised(Xq)

    def quantise_input(self, X) -> np.ndarray:
        """Real input rows as the integer rows the C takes (the input tensor's quantisation), flat; plain integer
        inputs: the rows rounded to nearest (halves to even) and saturated to the input's type."""
        X = np.asarray(X, dtype=np.float64).reshape(-1, self.input_dim)
        parts = []
        for _, offset, t in self.input_parts:  # each input with its own quantisation
            x_type, rows = t.dtype, X[:, offset:offset + t.size]
            if x_type.is_integer:
                parts.append(np.clip(np.round(rows), *x_type.integer_range).astype(np.int64))
            else:
                parts.append(quantise_affine(rows, x_type.qscales[0], x_type.zero_point, x_type.bits)
                             .astype(f"int{x_type.bits}"))
        return np.concatenate(parts, axis=1) if len(parts) > 1 else parts[0]

    def scores(self, X) -> np.ndarray:
        """Real inputs quantised as the input tensor says, run in int8, the outputs dequantised (a float
        network: its float outputs)."""
        X = np.asarray(X, dtype=np.float64).reshape(-1, *self.input_shape)
        if not self.is_quantised:
            out = run_float(self.graph, X)
            return np.concatenate([out[label].reshape(len(X), -1) for label, _, _ in self.output_parts], axis=1)
        q = self.run_quantised(self.quantise_input(X).astype(np.int64).reshape(X.shape)).reshape(len(X), -1)
        reals, offset = [], 0
        for _, _, t in self.output_parts:  # each output with its own quantisation
            part = q[:, offset:offset + t.size]
            out = t.dtype
            reals.append((part - out.zero_point) * out.qscales[0] if out.is_quantised else part.astype(np.float64))
            offset += t.size
        return np.concatenate(reals, axis=1)


def joined_outputs(graph: Graph, flats: list[str]) -> str:
    """The flat outputs joined into one score vector: concatenated as they are where they share one type, else each
    retyped to the plain integers of their width first (the header says each output's quantisation)."""
    types = [graph.type(f).dtype for f in flats]
    if any(t != types[0] for t in types):
        if any(t.is_float for t in types) or len({t.integer_range for t in types}) != 1:
            raise CompileError(f"outputs of types {', '.join(sorted({str(t) for t in types}))}: the outputs of a "
                               "network must share one element type to fill one score vector")
        plain = integer(types[0].bits, types[0].integer_range[0] < 0)
        flats = [graph.add("retyped_slice", [f], {"offset": 0, "shape": [graph.type(f).size]},
                           type=TensorType((graph.type(f).size,), plain), name=f"{f}_codes") for f in flats]
    joined, size = flats[0], graph.type(flats[0]).size
    for k, f in enumerate(flats[1:], start=1):
        size += graph.type(f).size
        joined = graph.add("concatenation", [joined, f], {"axis": 0}, name="scores" if k == len(flats) - 1
                           else f"scores_part{k}", type=TensorType((size,), graph.type(f).dtype))
    return joined


def _real_text(dtype) -> str:
    """How a tensor's values read: float32, plain integers, or TFLite's quantisation."""
    if dtype.is_float:
        return "float32"
    if not dtype.is_quantised:
        return f"{dtype} integers"
    offset = offset_text("q", -dtype.zero_point)
    return (f"int{dtype.bits}, TFLite's quantisation: real = {dtype.qscales[0]!r} * "
            f"{offset if dtype.zero_point == 0 else f'({offset})'}")
