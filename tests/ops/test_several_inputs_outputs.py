""".tflite networks of several inputs and outputs against tflite-micro: the build takes one input vector (the
file's inputs in order, each with its own quantisation) and gives one score vector (the outputs in order), on the
interpreter, the host C and the microcontrollers; types that cannot share one vector refused by name."""

from __future__ import annotations

import numpy as np
import pytest

import tinycc_ml
from tests.conftest import require_target
from tests.ops.single_op import OPS, OPTIONS, compiled
from tests.tflite_builder import tflm_joined_outputs
from tests.tflite_models import TfliteBuilder, options
from tinycc_ml.errors import CompileError
from tinycc_ml.ir.fixed import quantise_affine

SHAPES = [(1, 3, 4), (1, 3, 4), (1, 5)]


@pytest.fixture(autouse=True)
def host():
    require_target("host")


def tensor(b, shape, kind, q, name=None):
    if kind == "float32":
        return b.tensor(shape, "float32", scale=None, name=name)
    if kind == "int16":
        return b.tensor(shape, "int16", scale=q[0] / 256, zero_point=0, name=name)
    return b.tensor(shape, kind, scale=q[0], zero_point=q[1], name=name)


def three_in_two_out(kind: str = "int8", same_q: bool = False) -> bytes:
    """a + b -> (ADD) y; c -> RELU -> z; outputs (z, y): the outputs in another order than the operators."""
    qs = [(0.05, -3)] * 3 if same_q else [(0.05, -3), (0.03, 10), (0.08, 2)]
    b = TfliteBuilder()
    xs = [tensor(b, shape, kind, q, f"in{k}") for k, (shape, q) in enumerate(zip(SHAPES, qs))]
    y = tensor(b, (1, 3, 4), kind, (0.06, 4) if not same_q else qs[0], "sum")
    b.op(OPS.ADD, [xs[0], xs[1]], [y], OPTIONS.AddOptions, options("AddOptions"))
    z = tensor(b, (1, 5), kind, (0.08, 2) if not same_q else qs[0], "relu")
    b.op(OPS.RELU, [xs[2]], [z])
    return b.finish(xs, [z, y])


def random_inputs(kind: str, n: int, seed: int = 0) -> list[list[np.ndarray]]:
    rng = np.random.default_rng(seed)
    if kind == "float32":
        return [[rng.normal(0, 3, size=s).astype(np.float32) for s in SHAPES] for _ in range(n)]
    top = 32768 if kind == "int16" else 128
    return [[rng.integers(-top, top, size=s).astype(kind) for s in SHAPES] for _ in range(n)]


def flat(rows: list[list[np.ndarray]]) -> np.ndarray:
    return np.stack([np.concatenate([x.reshape(-1) for x in inputs]) for inputs in rows])


@pytest.mark.parametrize("kind, same_q", [("int8", False), ("int8", True), ("int16", False), ("float32", False)])
def test_one_input_vector_and_one_score_vector_equal_tflite_micro(kind, same_q, tmp_path):
    data = three_in_two_out(kind, same_q)
    rows = random_inputs(kind, 30)
    want = tflm_joined_outputs(data, rows)
    model, result = compiled(data, tmp_path)
    assert [t.shape for _, _, t in model.input_parts] == SHAPES
    assert model.n_outputs == 5 + 12
    X = flat(rows)
    if kind == "float32":
        np.testing.assert_allclose(model.scores(X), want, rtol=1e-6)
        np.testing.assert_allclose(result.load().scores(X), want, rtol=1e-6)
        return
    np.testing.assert_array_equal(model.run_quantised(X), want)
    np.testing.assert_array_equal(result.load().run_raw(X)[0], want)


def test_real_rows_quantise_each_input_with_its_own_scale(tmp_path):
    data = three_in_two_out("int8")
    model, _ = compiled(data, tmp_path)
    rng = np.random.default_rng(2)
    reals = [rng.normal(0, 2, size=s) for s in SHAPES]
    codes = model.quantise_input(np.concatenate([r.reshape(-1) for r in reals])[None])
    scales = [(0.05, -3), (0.03, 10), (0.08, 2)]
    want = [quantise_affine(r.reshape(1, -1), s, z, 8) for r, (s, z) in zip(reals, scales)]
    np.testing.assert_array_equal(codes, np.concatenate(want, axis=1))
    # the scores: each output dequantised with its own scale
    parts = [c.reshape(s).astype(np.int8) for c, s in zip(np.split(codes[0], [12, 24]), SHAPES)]
    out = tflm_joined_outputs(data, [parts])
    real = np.concatenate([(out[0, :5] - 2) * np.float32(0.08), (out[0, 5:] - 4) * np.float32(0.06)])
    np.testing.assert_allclose(model.scores(np.concatenate([r.reshape(-1) for r in reals])[None])[0], real)


@pytest.mark.toolchain
@pytest.mark.parametrize("target", ["avr", "cortex-m0", "cortex-m4"])
def test_the_microcontrollers_compute_the_same_values(target, tmp_path):
    require_target(target)
    from tinycc_ml.codegen.backend import get_backend

    data = three_in_two_out("int8")
    rows = random_inputs("int8", 3, seed=1)
    _, result = compiled(data, tmp_path, target=target)
    assert result.output.input_quantisation is None  # the inputs' codes: plain int8, no one scale
    run = get_backend(target).simulate(tmp_path / target, result.output, flat(rows).astype(np.float64))
    np.testing.assert_array_equal(np.asarray(run.scores).reshape(3, -1), tflm_joined_outputs(data, rows))


def test_inputs_of_several_integer_widths_share_the_widest_and_outputs_that_differ_are_refused(tmp_path):
    """An int8 and an int16 input share one int16 input vector (each input's codes as they are: the interpreter
    equals tflite-micro on both outputs); the int8 and int16 outputs cannot fill one score vector: refused by name."""
    b = TfliteBuilder()
    a = tensor(b, (1, 4), "int8", (0.05, 0), "a")
    c = tensor(b, (1, 4), "int16", (0.05, 0), "c")
    y = tensor(b, (1, 4), "int8", (0.05, 0), "y")
    b.op(OPS.RELU, [a], [y])
    z = tensor(b, (1, 4), "int16", (0.05, 0), "z")
    b.op(OPS.RELU, [c], [z])
    path = tmp_path / "mixed.tflite"
    data = b.finish([a, c], [y, z])
    path.write_bytes(data)
    model = tinycc_ml.load_model(path)
    rng = np.random.default_rng(0)
    rows = [[rng.integers(-128, 128, (1, 4)).astype(np.int8), rng.integers(-32768, 32768, (1, 4)).astype(np.int16)]
            for _ in range(8)]
    got = model.run_tensors([np.stack([r[0] for r in rows]), np.stack([r[1] for r in rows])])
    want = tflm_joined_outputs(data, rows)
    np.testing.assert_array_equal(np.concatenate([got["y"].reshape(8, -1), got["z"].reshape(8, -1)], axis=1), want)
    with pytest.raises(CompileError, match="outputs of types .*share one element type"):
        tinycc_ml.compile(path, name="mixed")


def test_outputs_of_integer_and_float_types_are_refused_by_name(tmp_path):
    b = TfliteBuilder()
    x = tensor(b, (1, 4), "int8", (0.05, 0), "x")
    y = tensor(b, (1, 4), "int8", (0.05, 0), "y")
    b.op(OPS.RELU, [x], [y])
    z = b.tensor((1, 4), "float32", scale=None, name="z")
    b.op(OPS.DEQUANTIZE, [y], [z])
    path = tmp_path / "two.tflite"
    path.write_bytes(b.finish([x], [y, z]))
    with pytest.raises(CompileError, match="outputs of types .*share one element type"):
        tinycc_ml.compile(path, target="host", out_dir=tmp_path / "out")


def test_the_header_says_where_each_input_and_output_lies_and_how_it_reads(tmp_path):
    _, result = compiled(three_in_two_out("int8"), tmp_path, name="three")
    header = (tmp_path / "host" / "three.h").read_text()
    assert "Input: 3 tensors in one vector, in the file's order:" in header
    assert "[12, 24) in1 [1, 3, 4]: int8, TFLite's quantisation: real = 0.029999999329447746 * (q - 10)." in header
    assert "[5, 17) sum [1, 3, 4]: int8, TFLite's quantisation: real = 0.05999999865889549 * (q - 4)." in header
    assert "#define THREE_N_CLASSES 5" in header  # the prediction: the argmax of the first output
    assert "#define THREE_INPUT_DIM 29" in header and "#define THREE_N_SCORES 17" in header


def test_tensors_go_in_and_come_out_one_array_each(tmp_path):
    data = three_in_two_out("int8")
    rows = random_inputs("int8", 6)
    want = tflm_joined_outputs(data, rows)
    model, _ = compiled(data, tmp_path)
    by_name = {"in0": np.stack([r[0] for r in rows]), "in1": np.stack([r[1] for r in rows]),
               "in2": np.stack([r[2] for r in rows])}
    outputs = model.run_tensors(by_name)
    assert list(outputs) == ["relu", "sum"] and outputs["sum"].shape == (6, 1, 3, 4)
    np.testing.assert_array_equal(np.concatenate([outputs["relu"].reshape(6, -1), outputs["sum"].reshape(6, -1)], 1),
                                  want)
    assert np.array_equal(model.join_inputs(list(by_name.values())), model.join_inputs(by_name))
    with pytest.raises(ValueError, match="inputs \\['in0', 'in1'\\]; the network's are"):
        model.join_inputs({"in0": by_name["in0"], "in1": by_name["in1"]})


def test_the_c_takes_one_pointer_per_tensor(tmp_path):
    """<name>_invoke, called from a C program, gives each output what tflite-micro gives."""
    import subprocess

    data = three_in_two_out("int8")
    rows = random_inputs("int8", 1, seed=4)
    want = tflm_joined_outputs(data, rows)[0]
    _, result = compiled(data, tmp_path, name="three")
    folder = tmp_path / "host"
    values = [", ".join(str(int(v)) for v in r.reshape(-1)) for r in rows[0]]
    main = "\n".join(['#include <stdio.h>', '#include "three.h"', "int main(void) {",
                      f"    const int8_t a[] = {{{values[0]}}}, b[] = {{{values[1]}}}, c[] = {{{values[2]}}};",
                      "    int8_t relu[THREE_RELU_SIZE], sum[THREE_SUM_SIZE];", "    int k;",
                      "    three_invoke(a, b, c, relu, sum);",
                      '    for (k = 0; k < THREE_RELU_SIZE; ++k) printf("%d ", relu[k]);',
                      '    for (k = 0; k < THREE_SUM_SIZE; ++k) printf("%d ", sum[k]);', "    return 0;", "}"])
    (folder / "main.c").write_text(main)
    subprocess.run(["gcc", "-Wall", "-Wextra", "-Werror", "-o", str(folder / "run"), str(folder / "main.c"),
                    str(folder / "three.c"), "-lm"], check=True, capture_output=True)
    printed = subprocess.run([str(folder / "run")], check=True, capture_output=True, text=True).stdout.split()
    np.testing.assert_array_equal(np.asarray(printed, dtype=np.int64), want)
