"""Hostile .tflite files (issue 35 item 1): mutations of valid TFLite flatbuffers (the four MLPerf Tiny models
and the tests' small models, tests/tflite_models.py), shared by the test suite and ``scripts/fuzz.py --target
tflite`` (benchmarks/tflite_fuzz_campaign.py records a campaign's figures).

Two kinds of mutation:

- on the bytes, aimed where they hurt: the flatbuffer's structure is walked (``structure``) to find every
  offset (uoffset to a table, vector or string; a table's soffset to its field table; the field tables'
  entries), vector length and scalar field the reader follows, and those are pointed out of the file, at
  themselves (cycles), at other tables, or given boundary values; plus bit flips, byte overwrites with
  boundary values and truncation anywhere;
- on the meaning (flatbuffers' object API, repacked): absurd shapes (2^31 dimensions, products overflowing
  int32/int64), per-tensor vs per-channel mismatches, zero points out of range, scales 0/NaN/inf/negative,
  quantized_dimension out of range, unsupported operators, options and tensor types, tensor indices out of
  range, buffers of the wrong size; and the kinds tflite-micro accepts with outputs no kernel defines (issue
  49): window fields left out at the schema's default (strides and windows 0, dilations 1) or 0, a
  data-movement operator's output quantised otherwise (RESHAPE, pools, PAD, CONCATENATION, RELU6) or at a
  denormal scale, an operator's output declared with another shape, int32 biases near +-2^31.

A case ends in ``ok`` (the file loads, compiles for the host, and computes tflite-micro's outputs: the
interpreter on every file, the host C on those whose C is built), ``error`` (one ModelFileError on loading or
one CompileError on compiling; the detail starts with the class's name) or ``crash`` (anything else, an
accepted file whose outputs differ from tflite-micro's among them).
"""

from __future__ import annotations

import functools
import multiprocessing
import struct
import tempfile
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import tinycc_ml
from tests.fuzzing import Chooser, Outcome, c_builds_clean, exception_and_place
from tests.tflite_builder import NetBuilder, tflm_raw_outputs
from tests.tflite_models import MLPERF, MLPERF_MODELS, add_net, conv_net, packed, pool_net, schema, unpacked
from tinycc_ml.errors import CompileError, ModelFileError

MAX_C_BUILT = 400_000  # generated C up to this size is also built with gcc (the MLPerf models' C is only emitted)

# the tables and fields the reader follows (schema.fbs): field index -> (name, kind, what it holds)
_OPTIONS = ("options", "options", None)
OPERATOR = {0: ("opcode_index", "scalar", "I"), 1: ("inputs", "vector", 4), 2: ("outputs", "vector", 4),
            3: ("builtin_options_type", "scalar", "B"), 4: _OPTIONS}
QUANTISATION = {2: ("scale", "vector", 4), 3: ("zero_point", "vector", 8), 6: ("quantized_dimension", "scalar", "i")}
TENSOR = {0: ("shape", "vector", 4), 1: ("type", "scalar", "b"), 2: ("buffer", "scalar", "I"),
          3: ("name", "vector", 1), 4: ("quantization", "table", QUANTISATION)}
SUBGRAPH = {0: ("tensors", "tables", TENSOR), 1: ("inputs", "vector", 4), 2: ("outputs", "vector", 4),
            3: ("operators", "tables", OPERATOR)}
OPCODE = {0: ("deprecated_builtin_code", "scalar", "b"), 1: ("custom_code", "vector", 1),
          3: ("builtin_code", "scalar", "i")}
BUFFER = {0: ("data", "vector", 1), 1: ("offset", "scalar", "Q"), 2: ("size", "scalar", "Q")}
MODEL = {1: ("operator_codes", "tables", OPCODE), 2: ("subgraphs", "tables", SUBGRAPH),
         4: ("buffers", "tables", BUFFER)}


@dataclass(frozen=True)
class Spot:
    """A place in the file the reader follows: ``kind`` is uoffset (a uint32 offset forward from the spot),
    soffset (a table's int32 offset back to its field table), vtable (a field table's uint16 entry), count (a
    vector's uint32 length), or scalar (a field of ``fmt``); ``pos`` its byte."""

    pos: int
    kind: str
    fmt: str
    what: str


def structure(data: bytes) -> list[Spot]:
    """Every offset, field-table entry, vector length and scalar the reader follows in a valid file."""
    spots: list[Spot] = [Spot(0, "uoffset", "I", "root")]

    def u32(pos):
        return struct.unpack_from("<I", data, pos)[0]

    def table(pos: int, fields: dict | None, what: str) -> None:
        spots.append(Spot(pos, "soffset", "i", f"{what} field table"))
        vtable = pos - struct.unpack_from("<i", data, pos)[0]
        vsize = struct.unpack_from("<H", data, vtable)[0]
        spots.append(Spot(vtable, "vtable", "H", f"{what} field table size"))
        for k in range((vsize - 4) // 2):
            entry = vtable + 4 + 2 * k
            offset = struct.unpack_from("<H", data, entry)[0]
            if not offset:
                continue
            spots.append(Spot(entry, "vtable", "H", f"{what} field {k}"))
            if fields is None:  # an operator's options: their fields' types vary; int32 and byte reads both
                spots.append(Spot(pos + offset, "scalar", "i" if k and offset % 4 == 0 else "b",
                                  f"{what} option {k}"))
                continue
            if k not in fields:
                continue
            name, kind, held = fields[k]
            field = pos + offset
            if kind == "scalar":
                spots.append(Spot(field, "scalar", held, f"{what}.{name}"))
                continue
            spots.append(Spot(field, "uoffset", "I", f"{what}.{name}"))
            target = field + u32(field)
            if kind in ("table", "options"):
                table(target, held, f"{what}.{name}")
                continue
            spots.append(Spot(target, "count", "I", f"{what}.{name} length"))
            if kind == "vector":
                count = u32(target)
                if name in ("shape", "inputs", "outputs", "scale", "zero_point"):
                    size = struct.calcsize("<" + ("q" if held == 8 else "i"))
                    spots.extend(Spot(target + 4 + size * i, "scalar", "q" if held == 8 else "i",
                                      f"{what}.{name}[{i}]") for i in range(min(count, 8)))
                continue
            for i in range(u32(target)):
                slot = target + 4 + 4 * i
                spots.append(Spot(slot, "uoffset", "I", f"{what}.{name}[{i}]"))
                table(slot + u32(slot), held, f"{what}.{name}[{i}]")

    table(u32(0), MODEL, "model")
    return spots


SMALL_SEEDS = 4


def net_16x8(seed: int = 3) -> bytes:
    """A small 16x8 network (int16 activations, int8 weights, int64 biases) so the int16 kernels are fuzzed too:
    CONV_2D (stride 2, relu6) -> DEPTHWISE_CONV_2D -> MAX_POOL_2D -> ADD -> RESHAPE -> FULLY_CONNECTED -> SOFTMAX."""
    net = NetBuilder(seed=seed, activation_bits=16, bias_bits=64)
    x = net.input((6, 6, 2))
    y = net.conv(x, 3, (3, 3), stride=(2, 2), padding="same", activation="relu6")
    y = net.depthwise(y, 1, (3, 3), padding="same")
    y = net.max_pool(y, (2, 2), (1, 1), padding="same")
    y = net.add(y, net.conv(y, 3, (1, 1), per_channel=False))
    y = net.fc(net.flatten(y), 4)
    return net.finish(net.softmax(y))


@functools.cache
def tflite_seeds() -> tuple[tuple[str, bytes, tuple[Spot, ...]], ...]:
    """(name, bytes, structure) of each seed: the small models first, then the MLPerf Tiny models found."""
    seeds = [("conv_net", conv_net()), ("add_net", add_net()), ("pool_net", pool_net()), ("net_16x8", net_16x8())]
    seeds += [(name, (MLPERF_MODELS / f"{name}.tflite").read_bytes()) for name in MLPERF
              if (MLPERF_MODELS / f"{name}.tflite").is_file()]
    return tuple((name, data, tuple(structure(data))) for name, data in seeds)


BYTE_VALUES = [0x00, 0x01, 0x7F, 0x80, 0xFF, 0xFE, 0x40]
U32_VALUES = [0, 1, 2, 4, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 0xFFFFFFFC, 0x10000, 0x40000000]
I32_VALUES = [0, -1, 1, 2, 3, -2**31, 2**31 - 1, 2**16, 2**30, 127, 128, 255, 256, -128, -129]
SHAPES = [[2**31 - 1], [2**31 - 1, 2**31 - 1], [1, 65536, 65536, 65536], [1, 2**16, 2**15], [0], [-1],
          [1, -1, 4, 4], [1, 0, 0, 1], [], [1] * 9, [2**31 - 1, 2, 2, 2], [46341, 46341], [1, 1 << 24]]
SCALES = [0.0, -0.0, float("nan"), float("inf"), -float("inf"), -0.05, 1e-45, 3.4e38, 1e-30, 1e30, 1.0]
ZERO_POINTS = [128, -129, 255, 300, -1000, 2**31, -(2**40), 2**62, -(2**63)]
AXES = [-1, -5, 1, 2, 3, 4, 7, 2**31 - 1, -(2**31)]
OPCODES = [0, 1, 2, 3, 4, 5, 6, 9, 14, 17, 18, 19, 21, 22, 25, 28, 32, 34, 39, 40, 41, 49, 60, 114, 127, 150, 200,
           -1, -128, 2**31 - 1]
MUTATIONS = ["bits", "bytes", "truncate", "offset", "offset", "count", "scalar", "vtable", "shape", "quantisation",
             "quantisation", "opcode", "options", "tensor_type", "indices", "buffer", "graph", "defaults",
             "requantise", "declared_shape", "bias"]
# the options' fields of strides, dilations, windows and depth multipliers (schema defaults: 0, dilations 1)
WINDOW_FIELDS = ("strideH", "strideW", "dilationHFactor", "dilationWFactor", "filterHeight", "filterWidth",
                 "depthMultiplier")
# operators whose int8 kernels copy or compare integers (tflite-micro reads the output's quantisation downstream)
DATA_MOVEMENT = {22: "RESHAPE", 17: "MAX_POOL_2D", 1: "AVERAGE_POOL_2D", 34: "PAD", 2: "CONCATENATION", 21: "RELU6"}
NEAR_INT32 = [0, 1, 100, 10_000, 2**20, 2**24]  # distances of a mutated bias from +-2^31
ORACLE_ROWS = 4  # rows (int8, int16) each accepted file is run on by tflite-micro (the extremes, then random ones)


@dataclass
class TfliteCase:
    data: bytes
    seed: str
    mutation: str


def _put(out: bytearray, pos: int, fmt: str, value: int) -> None:
    size = struct.calcsize("<" + fmt)
    if 0 <= pos and pos + size <= len(out):
        lo, hi = (0, 2 ** (8 * size) - 1) if fmt.isupper() else (-(2 ** (8 * size - 1)), 2 ** (8 * size - 1) - 1)
        struct.pack_into("<" + fmt, out, pos, min(hi, max(lo, value)))


def _byte_mutation(kind: str, data: bytes, spots: tuple[Spot, ...], pick: Chooser) -> tuple[bytes, str]:
    out = bytearray(data)
    if kind == "truncate":
        cut = pick.choice([pick.integer(0, 64), pick.integer(0, len(data) - 1), len(data) - pick.integer(1, 16)])
        return data[:cut], f"truncate to {cut} of {len(data)} bytes"
    if kind in ("bits", "bytes"):
        structural = pick.integer(0, 2) > 0  # mostly where the offsets are, else anywhere (weights)
        notes = []
        for _ in range(pick.integer(1, 8)):
            pos = pick.choice(spots).pos + pick.integer(0, 3) if structural else pick.integer(0, len(out) - 1)
            pos = min(pos, len(out) - 1)
            if kind == "bits":
                out[pos] ^= 1 << pick.integer(0, 7)
            else:
                out[pos] = pick.choice(BYTE_VALUES)
            notes.append(pos)
        return bytes(out), f"{kind} at {notes}"
    wanted = {"offset": ("uoffset", "soffset"), "count": ("count",), "scalar": ("scalar",), "vtable": ("vtable",)}[kind]
    candidates = [s for s in spots if s.kind in wanted]
    spot = pick.choice(candidates)
    if spot.kind == "uoffset":
        others = [s.pos for s in spots if s.kind == "soffset"]
        value = pick.choice([
            0,  # the field points at itself: a table whose field table is itself, a vector its own length
            len(data) - spot.pos, len(data) - spot.pos - 2, len(data) + 4096 - spot.pos,  # at or past the end
            (pick.choice(others) - spot.pos) % 2**32,  # another table (backwards: a cycle through the root)
            (-spot.pos) % 2**32, 2**32 - 4, 2**31, pick.integer(1, 64)])
    elif spot.kind == "soffset":
        value = pick.choice([0, 4, -4, spot.pos, spot.pos + 1, -(len(data)), 2**31 - 1, -(2**31), spot.pos - len(data),
                             pick.integer(-64, 64)])
    elif spot.kind == "vtable":
        value = pick.choice([0, 1, 2, 3, 4, 5, 0xFFFF, 0x8000, 0xFFFE, pick.integer(0, 255)])
    elif spot.kind == "count":
        value = pick.choice([0, 1, 0xFFFFFFFF, 0x7FFFFFFF, 0x3FFFFFFF, len(data), len(data) // 4 + 1,
                             pick.integer(2, 1000)])
    else:
        value = pick.choice(I32_VALUES if spot.fmt in "iqI" else [v - 256 if v > 127 else v for v in BYTE_VALUES])
    _put(out, spot.pos, spot.fmt, value)
    return bytes(out), f"{spot.kind} {spot.what} at {spot.pos} := {value}"


def _quantised_tensors(model) -> list:
    return [t for t in model.subgraphs[0].tensors if t.quantization is not None and t.quantization.scale is not None]


def _object_mutation(kind: str, data: bytes, pick: Chooser) -> tuple[bytes, str]:
    model = unpacked(data)
    sub = model.subgraphs[0]
    tensors = sub.tensors
    t = pick.choice(tensors)
    name = t.name.decode(errors="replace") if t.name else "?"
    if kind == "shape":
        shape = pick.choice(SHAPES)
        t.shape = np.asarray(shape, dtype=np.int64).astype(np.int32)
        note = f"tensor {name} shape := {shape}"
    elif kind == "quantisation":
        quantised = _quantised_tensors(model)
        t = pick.choice(quantised) if quantised else t
        name = t.name.decode(errors="replace") if t.name else "?"
        q = t.quantization or schema.QuantizationParametersT()
        t.quantization = q
        how = pick.choice(["scale", "zero_point", "axis", "per_channel", "per_tensor", "count", "drop"])
        if how == "scale":
            value = pick.choice(SCALES)
            scale = np.array(q.scale if q.scale is not None else [0.1], dtype=np.float32)
            scale[pick.integer(0, max(0, scale.size - 1))] = value
            q.scale = scale
            note = f"{name} scale := {value}"
        elif how == "zero_point":
            value = pick.choice(ZERO_POINTS)
            zp = np.array(q.zeroPoint if q.zeroPoint is not None else [0], dtype=np.int64)
            zp[pick.integer(0, max(0, zp.size - 1))] = value
            q.zeroPoint = zp
            note = f"{name} zero point := {value}"
        elif how == "axis":
            q.quantizedDimension = pick.choice(AXES)
            note = f"{name} quantized_dimension := {q.quantizedDimension}"
        elif how == "per_channel":  # per-channel scales where one is expected, or of the wrong count
            n = pick.choice([2, 3, int(t.shape[-1]) if len(t.shape) else 1, int(t.shape[0]) if len(t.shape) else 1])
            q.scale = np.full(max(1, n), 0.05, dtype=np.float32)
            q.zeroPoint = np.zeros(max(1, n), dtype=np.int64) if pick.integer(0, 1) else np.arange(max(1, n))
            q.quantizedDimension = pick.integer(0, 3)
            note = f"{name} per-channel: {n} scales on axis {q.quantizedDimension}"
        elif how == "per_tensor":
            q.scale = np.asarray(q.scale[:1] if q.scale is not None else [0.1], dtype=np.float32)
            note = f"{name} per-tensor (first scale only)"
        elif how == "count":  # scales and zero points of different lengths
            q.zeroPoint = np.zeros(pick.choice([0, 1, 2, 5, 64]), dtype=np.int64)
            note = f"{name} {len(q.zeroPoint)} zero points for {0 if q.scale is None else len(q.scale)} scales"
        else:
            t.quantization = None
            note = f"{name} quantisation dropped"
    elif kind == "opcode":
        code = pick.choice(model.operatorCodes)
        value = pick.choice(OPCODES)
        if pick.integer(0, 1):
            code.builtinCode = value
        code.deprecatedBuiltinCode = max(-128, min(127, value))
        if value == 32:
            code.customCode = pick.choice([b"", b"TFLite_Detection_PostProcess", b"\xff\xfe"])
        note = f"opcode := {value}"
    elif kind == "options":
        op = pick.choice(sub.operators)
        how = pick.choice(["drop", "field", "type"])
        if how == "drop" or op.builtinOptions is None:
            op.builtinOptions, op.builtinOptionsType = None, 0
            note = "options dropped"
        elif how == "type":  # options of another operator's kind (the reader reads them as its own)
            op.builtinOptionsType = pick.choice([1, 2, 5, 8, 9, 10, 13, 19, 27])
            note = f"options type := {op.builtinOptionsType}"
        else:
            fields = [k for k, v in vars(op.builtinOptions).items() if isinstance(v, (int, float))]
            if fields:
                key = pick.choice(fields)
                value = pick.choice([0, -1, 1, 2, 3, 4, 5, 7, 127, -128, 2**31 - 1, -(2**31), 65536])
                if isinstance(getattr(op.builtinOptions, key), bool):
                    value = not getattr(op.builtinOptions, key)
                elif isinstance(getattr(op.builtinOptions, key), float):
                    value = pick.choice([0.0, -1.0, float("nan"), float("inf"), 1e30, 1e-30])
                setattr(op.builtinOptions, key, value)
                try:
                    packed(model)
                except (TypeError, struct.error):  # a byte-wide field (padding, activation): a byte's extremes
                    value = max(-128, min(127, value))
                    setattr(op.builtinOptions, key, value)
                note = f"option {key} := {value}"
            else:
                note = "options without fields"
    elif kind == "tensor_type":
        t.type = pick.choice([0, 1, 2, 3, 4, 6, 7, 9, 10, 11, 16, 17, 100, -1])
        note = f"tensor {name} type := {t.type}"
    elif kind == "indices":
        op = pick.choice(sub.operators)
        field = pick.choice(["inputs", "outputs"])
        values = np.array(getattr(op, field), dtype=np.int64)
        value = pick.choice([-1, -2, len(tensors), len(tensors) + 5, 2**31 - 1, -(2**31), 0,
                             int(op.outputs[0]), pick.integer(0, len(tensors) - 1)])
        how = pick.choice(["set", "append", "empty"])
        if how == "set" and values.size:
            values[pick.integer(0, values.size - 1)] = value
        elif how == "append":
            values = np.append(values, value)
        else:
            values = values[:0]
        setattr(op, field, values.astype(np.int32))
        note = f"operator {field} := {values.tolist()[:6]}"
    elif kind == "buffer":
        with_data = [k for k, b in enumerate(model.buffers) if b.data is not None and len(b.data)]
        k = pick.choice(with_data) if with_data else 0
        buffer = model.buffers[k]
        how = pick.choice(["shorter", "longer", "empty", "odd", "external", "index"])
        raw = np.asarray(buffer.data if buffer.data is not None else [], dtype=np.uint8)
        if how == "shorter":
            buffer.data = raw[: max(0, raw.size - pick.integer(1, 8))]
        elif how == "longer":
            buffer.data = np.concatenate([raw, np.zeros(pick.choice([1, 4, 4096, 1 << 20]), np.uint8)])
        elif how == "empty":
            buffer.data = None
        elif how == "odd":
            buffer.data = raw[:1]
        elif how == "external":
            buffer.offset, buffer.size = pick.choice([(1, 1), (2**40, 16), (len(data) - 4, 2**20)])
        else:
            t.buffer = pick.choice([len(model.buffers), 2**31, 0, pick.integer(0, len(model.buffers) - 1)])
        note = f"buffer {k} {how}"
    elif kind == "defaults":  # a window field at its schema default (left out of the file) or 0
        with_fields = [op for op in sub.operators if op.builtinOptions is not None
                       and any(hasattr(op.builtinOptions, f) for f in WINDOW_FIELDS)]
        if not with_fields:
            return packed(model), "defaults: no window fields"
        op = pick.choice(with_fields)
        key = pick.choice([f for f in WINDOW_FIELDS if hasattr(op.builtinOptions, f)])
        value = pick.choice([0, 0, 1])  # 0: absent (strides, windows) or written (dilations); 1: the reverse
        setattr(op.builtinOptions, key, value)
        note = f"option {key} := {value}"
    elif kind == "requantise":  # a data-movement operator's output quantised otherwise than its input
        moving = [op for op in sub.operators if _builtin(model, op) in DATA_MOVEMENT] or sub.operators
        op = pick.choice(moving)
        out = tensors[int(op.outputs[0])] if len(op.outputs) and 0 <= op.outputs[0] < len(tensors) else t
        q = out.quantization
        if q is None or q.scale is None or not len(q.scale):
            return packed(model), "requantise: an output without quantisation"
        how = pick.choice(["scale", "zero_point", "both", "denormal"])
        if how in ("scale", "both"):
            q.scale = np.asarray(q.scale, np.float32) * np.float32(pick.choice([2.0, 0.5, 1.001, 1.5]))
        if how in ("zero_point", "both"):
            q.zeroPoint = np.clip(np.asarray(q.zeroPoint, np.int64) + pick.choice([-5, 1, 7]), -128, 127)
        if how == "denormal":
            q.scale = np.full(len(q.scale), pick.choice([1e-40, 1e-45, 1e-38]), np.float32)
        note = f"{DATA_MOVEMENT.get(_builtin(model, op), 'operator')} output {out.name!r} {how}"
    elif kind == "declared_shape":  # an operator's output declared with another shape
        op = pick.choice(sub.operators)
        out = tensors[int(op.outputs[0])] if len(op.outputs) and 0 <= op.outputs[0] < len(tensors) else t
        shape = [int(d) for d in out.shape] if out.shape is not None else [1]
        how = pick.choice(["grow", "shrink", "lead", "drop"])
        if how in ("grow", "shrink") and shape:
            axis = pick.integer(0, len(shape) - 1)
            shape[axis] = max(1, shape[axis] + (1 if how == "grow" else -1))
        elif how == "lead":
            shape = [1, *shape]
        elif len(shape) > 1:
            shape = shape[1:]
        out.shape = np.asarray(shape, np.int32)
        note = f"output {out.name!r} declared {shape} ({how})"
    elif kind == "bias":  # an int32 constant (a bias) near the accumulator's limits
        biases = [x for x in tensors if x.type == 2 and 0 < x.buffer < len(model.buffers)
                  and model.buffers[x.buffer].data is not None and len(model.buffers[x.buffer].data) >= 4]
        if not biases:
            return packed(model), "bias: no int32 constants"
        bias = pick.choice(biases)
        values = np.asarray(model.buffers[bias.buffer].data, np.uint8).view("<i4").copy()
        at = pick.integer(0, values.size - 1)
        distance = pick.choice(NEAR_INT32)
        values[at] = 2**31 - 1 - distance if pick.integer(0, 1) else -(2**31) + distance
        model.buffers[bias.buffer].data = values.view(np.uint8)
        note = f"bias {bias.name!r}[{at}] := {int(values[at])}"
    else:  # the graph: inputs/outputs, subgraphs, operator order
        how = pick.choice(["no_inputs", "two_inputs", "output", "subgraphs", "reverse", "drop_op", "duplicate_op",
                           "no_ops"])
        if how == "no_inputs":
            sub.inputs = np.zeros(0, np.int32)
        elif how == "two_inputs":
            sub.inputs = np.asarray([int(sub.inputs[0]), pick.integer(0, len(tensors) - 1)], np.int32)
        elif how == "output":
            sub.outputs = np.asarray([pick.choice([-1, len(tensors), pick.integer(0, len(tensors) - 1)])], np.int32)
        elif how == "subgraphs":
            model.subgraphs = pick.choice([[], [sub, sub]])
        elif how == "reverse":
            sub.operators = sub.operators[::-1]
        elif how == "drop_op":
            del sub.operators[pick.integer(0, len(sub.operators) - 1)]
        elif how == "duplicate_op":
            sub.operators.insert(pick.integer(0, len(sub.operators)), pick.choice(sub.operators))
        else:
            sub.operators = []
        note = f"graph {how}"
    return packed(model), note


def _builtin(model, op) -> int:
    codes = model.operatorCodes
    if not 0 <= op.opcodeIndex < len(codes):
        return -1
    return max(codes[op.opcodeIndex].builtinCode, codes[op.opcodeIndex].deprecatedBuiltinCode)


def mutate_tflite(pick: Chooser) -> TfliteCase:
    """One hostile variant of a seed .tflite file."""
    seeds = tflite_seeds()
    # the small models half the time (fast), the MLPerf ones (real converter output) the other half
    small = SMALL_SEEDS - 1
    name, data, spots = seeds[pick.integer(0, small)] if pick.integer(0, 1) or len(seeds) == SMALL_SEEDS else \
        seeds[pick.integer(SMALL_SEEDS, len(seeds) - 1)]
    kind = pick.choice(MUTATIONS)
    if kind in ("bits", "bytes", "truncate", "offset", "count", "scalar", "vtable"):
        mutated, note = _byte_mutation(kind, data, spots, pick)
    else:
        mutated, note = _object_mutation(kind, data, pick)
    return TfliteCase(mutated, name, f"{kind}: {note}")


def run_tflite_case(data: bytes) -> Outcome:
    """Load one .tflite file and compile it for the host (building the C when it is small), an accepted int8 file
    run against tflite-micro: ok, one ModelFileError on loading / CompileError on compiling (error), or anything
    else (crash: outputs other than tflite-micro's among them)."""
    with tempfile.TemporaryDirectory(prefix="tinycc-ml-fuzz-tflite-") as tmp:
        path = Path(tmp) / "case.tflite"
        path.write_bytes(data)
        try:
            model = tinycc_ml.load_model(path)
        except ModelFileError as exc:
            if not str(exc).startswith(str(path)):
                return Outcome("crash", f"ModelFileError not naming the file: {exc}")
            return Outcome("error", f"ModelFileError: {exc}"[:400])
        except Exception as exc:  # noqa: BLE001 - the fuzzer's job is to catch exactly these
            return Outcome("crash", f"loading: {exception_and_place(exc)}")
        try:
            result = tinycc_ml.compile(model, target="host")
        except CompileError as exc:
            return Outcome("error", f"CompileError: {exc}"[:400])
        except Exception as exc:  # noqa: BLE001
            return Outcome("crash", f"compiling: {exception_and_place(exc)}")
        built = sum(len(text) for text in result.files.values()) <= MAX_C_BUILT
        if built:
            problem = c_builds_clean(result.files)
            if problem:
                return Outcome("crash", f"C does not compile: {problem}")
        difference = tflite_micro_difference(data, model, result if built else None)
        if difference:
            return Outcome("crash", difference)
    return Outcome("ok")


def _in_child(function, *args):
    """``function(*args)`` in a forked process: tflite-micro may crash on a file (a segmentation fault), which
    must end the case, not the fuzzer."""
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork")) as pool:
        return pool.submit(function, *args).result()


def tflite_micro_difference(data: bytes, model, result=None) -> str | None:
    """How an accepted integer file's outputs differ from tflite-micro's (its reference kernels) on a few rows of
    its input's type (int8, or int16 for a 16x8 file):
    the interpreter's, and the host C's when ``result`` is given; None when they are equal (or the file is a
    float network, quantised by the project, which tflite-micro's float kernels do not define bit for bit)."""
    if not getattr(model, "is_quantised", False):
        return None
    rng = np.random.default_rng(len(data))
    lo, hi = model.input_range
    X = rng.integers(lo, hi + 1, size=(ORACLE_ROWS, *model.input_shape)).astype(np.int16 if hi > 127 else np.int8)
    X[0], X[1] = lo, hi
    try:
        want = _in_child(tflm_raw_outputs, data, X).reshape(len(X), -1)
    except BrokenProcessPool:
        return "tflite-micro crashes on an accepted file"
    except RuntimeError as exc:  # its Prepare refusing a file the reader accepts is a finding too
        return f"tflite-micro refuses an accepted file: {str(exc)[:200]}"
    except (struct.error, ValueError, IndexError):  # its Python wrapper cannot parse a field the reader never reads
        return None
    try:
        ours = np.asarray(model.run_quantised(X)).reshape(len(X), -1)
    except Exception as exc:  # noqa: BLE001 - an accepted file the interpreter cannot run (an overflow)
        return f"the interpreter fails on an accepted file: {exception_and_place(exc)}"
    if ours.shape != want.shape or not np.array_equal(ours, want):
        return f"differs from tflite-micro: {ours.shape[1]} outputs vs {want.shape[1]}, " \
               f"{int((ours != want).sum()) if ours.shape == want.shape else 'all'} bytes differ"
    if result is not None:
        scores, _ = result.load().run_raw(X.reshape(len(X), -1))
        if not np.array_equal(np.asarray(scores).reshape(len(X), -1), want):
            return "the host C differs from tflite-micro"
    return None
