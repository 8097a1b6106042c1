"""Hostile .tflite files (issue 35 item 1): each finding of the campaign (benchmarks/tflite_fuzz_campaign.py)
as a regression test on a small built model, and a fixed, derandomised slice of the campaign: every case
loads and compiles for the host, or ends in one ModelFileError naming the file (or one CompileError)."""

from __future__ import annotations

import random
import subprocess
import sys
from collections import Counter

import numpy as np
import pytest

from tests.fuzzing import Chooser
from tests.tflite_fuzzing import mutate_tflite, net_16x8, run_tflite_case, structure, tflite_seeds
from tests.tflite_models import add_net, conv_net, packed, pool_net, schema, unpacked
from tinycc_ml.errors import ModelFileError
from tinycc_ml.importers.tflite import load_tflite
from tinycc_ml.ir.ops.tensor_elementwise import relu6_bounds
from tinycc_ml.ir.ops.tflite_arith import activation_range
from tinycc_ml.ir.types import quantised

SEED = 35  # the number


def refused(tmp_path, data: bytes, match: str) -> None:
    path = tmp_path / "hostile.tflite"
    path.write_bytes(data)
    with pytest.raises(ModelFileError, match=match) as caught:
        load_tflite(path)
    assert str(caught.value).startswith(str(path))


def edited(make=conv_net):
    return unpacked(make())


def tensor(model, name: str):
    return next(t for t in model.subgraphs[0].tensors if t.name.decode() == name)


def test_the_small_models_load(tmp_path):
    for make in (conv_net, add_net):
        path = tmp_path / "m.tflite"
        path.write_bytes(make())
        load_tflite(path)


def test_an_operator_without_its_required_options_is_refused(tmp_path):
    model = edited()
    model.subgraphs[0].operators[0].builtinOptions = None  # CONV_2D: strides, padding
    model.subgraphs[0].operators[0].builtinOptionsType = 0
    refused(tmp_path, packed(model), r"operator 0 \(CONV_2D\) has no options")


def test_options_of_another_operator_are_refused(tmp_path):
    model = edited()
    model.subgraphs[0].operators[0].builtinOptionsType = schema.BuiltinOptions.Pool2DOptions
    refused(tmp_path, packed(model), r"CONV_2D\): options of union type 5, expected 1")


def test_fully_connected_without_options_takes_the_defaults(tmp_path):
    model = edited()
    fc = model.subgraphs[0].operators[4]
    fc.builtinOptions, fc.builtinOptionsType = None, 0
    path = tmp_path / "m.tflite"
    path.write_bytes(packed(model))
    assert load_tflite(path).node("logits").attrs["activation"] == "none"


@pytest.mark.parametrize("inputs", [[0], [0, -1, 2], [0, 1, 2, 3]])
def test_a_convolution_with_missing_or_extra_inputs_is_refused(tmp_path, inputs):
    model = edited()
    model.subgraphs[0].operators[0].inputs = np.asarray(inputs, np.int32)
    refused(tmp_path, packed(model), r"operator 0 \(CONV_2D\): inputs .*expected 2 to 3 tensors")


def test_a_missing_input_where_none_is_optional_is_refused(tmp_path):
    model = edited(pool_net)
    concatenation = next(op for op in model.subgraphs[0].operators if len(op.inputs) == 2
                         and model.operatorCodes[op.opcodeIndex].builtinCode == schema.BuiltinOperator.CONCATENATION)
    concatenation.inputs = np.asarray([concatenation.inputs[0], -1], np.int32)
    refused(tmp_path, packed(model), r"\(CONCATENATION\): inputs \[\d+, -1\], expected 2 to 64 tensors")


@pytest.mark.parametrize("shape", [[], [1] * 9])
def test_an_input_of_no_layout_is_refused(tmp_path, shape):
    model = edited()
    model.subgraphs[0].tensors[0].shape = np.asarray(shape, np.int32)
    refused(tmp_path, packed(model), "input tensor 'x': input: inputs are vectors or tensors with a layout")


@pytest.mark.parametrize("name,op,shape", [("t1", "CONV_2D", [4, 27]), ("t4", "DEPTHWISE_CONV_2D", [9, 8]),
                                           ("t10", "FULLY_CONNECTED", [5, 32, 1])])
def test_filters_and_inputs_of_the_wrong_rank_are_refused(tmp_path, name, op, shape):
    model = edited()
    tensor(model, name).shape = np.asarray(shape, np.int32)
    refused(tmp_path, packed(model), f"{op}: .* '{name}' has shape .*, expected . dimensions")


def test_an_output_that_is_a_constant_is_refused(tmp_path):
    model = edited()
    model.subgraphs[0].outputs = np.asarray([1], np.int32)  # the first filter
    refused(tmp_path, packed(model), "output tensor 't1' is computed by no operator")


def test_scales_too_far_apart_for_the_requantisation_are_refused(tmp_path):
    model = edited()
    tensor(model, "conv").quantization.scale = np.asarray([1e-37], np.float32)  # normal floats: not refused alone
    refused(tmp_path, packed(model), "conv.*requantisation multiplier .* left shift over 31 bits")
    model = edited(add_net)
    tensor(model, "sum").quantization.scale = np.asarray([1e-37], np.float32)
    refused(tmp_path, packed(model), "sum: the requantisation multiplier")


@pytest.mark.parametrize("scale", [1e-40, 1.4e-45, 0.0, -0.5, float("inf"), float("nan")])
def test_a_scale_that_is_not_a_positive_normal_float32_is_refused(tmp_path, scale):
    """A denormal scale: tflite-micro flushes every multiplier that reads it to zero (the campaign of issue 49: a
    RESHAPE's output at 1e-40 made the next layer's outputs all its zero point)."""
    model = edited()
    tensor(model, "flat").quantization.scale = np.asarray([scale], np.float32)
    refused(tmp_path, packed(model), "tensor 'flat': scale .* is not a positive normal float32")


def test_relu6_at_a_denormal_scale_clamps_at_the_top_of_the_range():
    assert activation_range("relu6", 1e-45, 3) == (3, 127)
    assert relu6_bounds(quantised(8, 3e-45, -5)) == (-5, 127)


def test_a_relu_whose_multiplier_overflows_float32_is_refused(tmp_path):
    """Found by seed 37, case 257: the scales' float32 quotient (TFLite's) is inf; a normal float32 scale gives a
    finite one, the denormal is refused as such."""
    model = edited(pool_net)
    tensor(model, "relu").quantization.scale = np.asarray([2.8e-45], np.float32)
    refused(tmp_path, packed(model), "tensor 'relu': scale 2.8e-45 is not a positive normal float32")


@pytest.mark.parametrize("beta", [float("inf"), float("nan"), 0.0, -1.0])
def test_a_softmax_beta_that_is_not_positive_and_finite_is_refused(tmp_path, beta):
    model = edited()
    model.subgraphs[0].operators[-1].builtinOptions.beta = beta
    refused(tmp_path, packed(model), "beta must be positive and finite")


def test_an_int8_softmax_beta_too_small_for_tflites_multiplier_is_refused(tmp_path):
    """TFLite's int8 softmax takes beta x input scale x 2^26 as a multiplier above 1 and aborts below (fuzzer
    seed 4910 case 122: beta 1e-30 accepted, tflite-micro crashed on the file)."""
    model = edited()
    model.subgraphs[0].operators[-1].builtinOptions.beta = 1e-30
    refused(tmp_path, packed(model), r"needs beta x input scale x 2\^26 above 1")


def test_the_structure_walk_finds_every_offset_of_the_small_model():
    spots = structure(conv_net())
    kinds = Counter(s.kind for s in spots)
    # 18 tensors, 6 operators, 5 opcodes, 12 buffers (one empty): a uoffset to each table, and more
    assert kinds["soffset"] >= 1 + 1 + 18 + 6 + 5 + 12 and kinds["count"] >= 18 * 2
    assert any(s.what == "model.subgraphs[0].tensors[0].quantization.zero_point[0]" for s in spots)


def test_a_derandomised_slice_of_the_campaign(tmp_path):
    """80 cases of ``scripts/fuzz.py --target tflite --seed 35`` (the same generator)."""
    tflite_seeds()
    outcomes = Counter()
    for case in range(80):
        mutated = mutate_tflite(Chooser(rng=random.Random(f"{SEED}-tflite-{case}")))
        outcome = run_tflite_case(mutated.data)
        assert outcome.kind in ("ok", "error"), f"case {case} ({mutated.seed}, {mutated.mutation}): {outcome.detail}"
        outcomes[outcome.kind] += 1
    assert outcomes["ok"] >= 5 and outcomes["error"] >= 40  # both ends are reached


def test_the_command_line_prints_one_line_and_exits_2_on_hostile_files(tmp_path):
    cases = [(b"\x00" * 64, "not a TFLite flatbuffer")]
    model = edited()
    model.subgraphs[0].tensors[0].shape = np.asarray([2**31 - 1, 2**31 - 1], np.int32)
    cases.append((packed(model), "elements, over the limit"))
    data = bytearray(conv_net())
    data[0:4] = (len(data) + 100).to_bytes(4, "little")  # the root offset past the end
    cases.append((bytes(data), "runs past the end of the file"))
    for k, (data, message) in enumerate(cases):
        path = tmp_path / f"hostile{k}.tflite"
        path.write_bytes(data)
        run = subprocess.run([sys.executable, "-m", "tinycc_ml", "compile", str(path), "-o", str(tmp_path / "out")],
                             capture_output=True, text=True)
        lines = run.stderr.splitlines()
        assert run.returncode == 2 and len(lines) == 1, run.stderr
        assert lines[0].startswith(f"tinycc-ml: error: {path}: ") and message in lines[0]


@pytest.mark.parametrize("axis", [-2147483647, 4, -5, 2**15 + 1])
def test_a_mean_axis_outside_the_rank_is_refused(tmp_path, axis):
    """TFLite's ResolveAxis refuses an axis outside [-rank, rank) (tflite-micro's MEAN stores axes as int16, so
    -2^31 + 1 reads as axis 1): found by seed 4911 case 1476, where the reader took the axis modulo the rank and
    computed another mean than tflite-micro's."""
    model = edited(pool_net)
    buffer = model.buffers[tensor(model, "axes").buffer]
    buffer.data = np.frombuffer(np.array([axis, 2], "<i4").tobytes(), np.uint8).copy()
    refused(tmp_path, packed(model), rf"MEAN: axis {axis} is outside \[-4, 3\]")


def test_an_int16_softmax_whose_input_multiplier_needs_a_shift_over_31_bits_is_refused(tmp_path):
    """Found by seed 4920 case 7937: a 16x8 SOFTMAX with beta 1e30 was accepted; its input multiplier (input scale x
    beta / (10/65535)) needs a left shift of about 100 bits, which tflite-micro's int32 shift cannot make (its
    outputs differed from the reader's)."""
    model = unpacked(net_16x8())
    model.subgraphs[0].operators[-1].builtinOptions.beta = 1e30
    refused(tmp_path, packed(model), "softmax input: the requantisation multiplier .* needs a left shift over 31 bits")


def test_an_operator_output_holding_constant_data_is_refused(tmp_path):
    """Found by seed 4920 case 4894: the 16x8 seed's RESHAPE output pointed at a buffer of its size (the first
    filter's bytes); the reader read the buffer where tflite-micro's RESHAPE writes over it (12 bytes differed)."""
    model = unpacked(net_16x8())
    tensor(model, "t12").buffer = tensor(model, "t1").buffer
    refused(tmp_path, packed(model), "'t12': the tensor holds constant data .* but an operator writes it")


@pytest.mark.parametrize("dilation", [65536, 2**31 - 1])
def test_a_filter_dilated_past_any_input_is_refused_by_name(dilation, tmp_path):
    """Seed 4920 cases 2699, 4694, 5432, 10698: tflite-micro accepts such dilations; the interpreter padded its input
    by the span and ran out of memory."""
    model = unpacked(conv_net())
    conv = next(op for op in model.subgraphs[0].operators if isinstance(op.builtinOptions, schema.Conv2DOptionsT))
    conv.builtinOptions.dilationHFactor = dilation
    path = tmp_path / "dilated.tflite"
    path.write_bytes(packed(model))
    with pytest.raises(ModelFileError, match=rf"dilated\.tflite.*dilated by {dilation} spans .* rows, over the 4096"):
        load_tflite(path)
