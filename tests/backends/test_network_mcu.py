"""TFLite int8 networks on the microcontroller targets: the shared network C (codegen/c_network.py) built for
the ATmega328P (simavr), the Cortex-M0 (QEMU microbit, unicorn) and the Cortex-M4 / M33 (QEMU MPS2), every
output byte equal to tflite-micro's (TFLite Micro's reference kernels) on small networks built here
(tests/tflite_builder.py) and on the four MLPerf Tiny models; the weights in flash (the model's RAM is its
activation arena alone), the stack measured; networks that cannot fit a chip refused before anything is
built, with the sizes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import tinycc_ml
from tests.conftest import require_target
from tests.tflite_builder import NetBuilder, tflm_outputs
from tests.tflite_models import ds_cnn_1d, pool_net
from tinycc_ml.codegen.backend import get_backend
from tinycc_ml.codegen.mcu import COUNT_PER_MAC_BOUND, McuBackend
from tinycc_ml.errors import FitError
from tinycc_ml.runtime.simulate import DEFAULT_MAX_CYCLES, run_on_target

REPO = Path(__file__).resolve().parents[2]
MODELS = REPO / "data" / "mlperf-tiny"  # MLPerf Tiny's int8 models (data/mlperf-tiny/README.md)
# TFLite Micro's arena for kws is 24,272 bytes, 16,000 of them its activations (data/mlperf-tiny/README.md); ours:
# planned across layers, each written over its dying input where its op allows (benchmarks/network_arena.py)
MLPERF_ARENA = {"kws_ref_model": 10560, "ad01_int8": 256, "pretrainedResnet_quant": 33328, "vww_96_int8": 36912}
STACK_LIMIT = {"avr": 160, "cortex-m0": 256, "cortex-m4": 384, "cortex-m33": 384}  # bytes, measured per call


# ---------------------------------------------------------------- small networks


def convolutions(seed: int = 1) -> bytes:
    """Strided, dilated, VALID and SAME windows, a depth multiplier, relu and relu6, per-tensor and
    per-channel requantisation, SAME average pooling clipped at the border, a dense layer and softmax."""
    n = NetBuilder(seed)
    x = n.input((9, 7, 3))
    y = n.conv(x, 4, (3, 3), stride=(2, 1), activation="relu6")
    y = n.depthwise(y, 2, (3, 2), dilation=(2, 1), padding="valid", activation="relu")
    y = n.conv(y, 5, (1, 1), per_channel=False)
    y = n.average_pool(y, (2, 2), (2, 2), padding="same")
    return n.finish(n.softmax(n.fc(n.flatten(y), 6, activation="relu")))


def residual(seed: int = 2) -> bytes:
    """Two branches added (relu), a strided per-tensor depthwise, a wide VALID conv, pooling, softmax."""
    n = NetBuilder(seed)
    x = n.input((6, 6, 4))
    a = n.conv(x, 4, (3, 3), activation="relu")
    b = n.conv(x, 4, (1, 1), per_channel=False)
    y = n.add(a, b, activation="relu")
    y = n.depthwise(y, 1, (3, 3), stride=(2, 2), per_channel=False)
    y = n.conv(y, 3, (2, 3), stride=(1, 2), padding="valid")
    y = n.average_pool(y, (2, 1), (1, 1))
    return n.finish(n.softmax(n.fc(n.flatten(y), 5), spread=4.0))


def dense(seed: int = 3) -> bytes:
    """Fully connected layers only, the last one's int8 values the scores (no softmax)."""
    n = NetBuilder(seed)
    y = n.fc(n.input((24,)), 16, activation="relu")
    return n.finish(n.fc(n.fc(y, 8, activation="relu6"), 4))


# tests/tflite_models.py's: PAD, MAX_POOL_2D, RELU, RELU6, CONCATENATION and MEAN (issue 35)
NETS = {"convolutions": convolutions, "residual": residual, "dense": dense, "pool_net": pool_net}


def rows(n_rows: int, dim: int, seed: int) -> np.ndarray:
    """int8 rows: both extremes, zeros, uniform noise, and smooth ramps (nearby inputs alike, as in images)."""
    rng = np.random.default_rng(seed)
    X = rng.integers(-128, 128, size=(n_rows, dim))
    X[0], X[1] = -128, 127
    if n_rows > 2:
        X[2] = 0
    for r in range(3, n_rows, 2):
        X[r] = np.clip(np.round(100 * np.sin(np.arange(dim) * rng.uniform(0.01, 0.3) + rng.uniform(0, 6))), -128, 127)
    return X.astype(np.int8)


def run_network(result: tinycc_ml.CompileResult, X: np.ndarray, method: str = "auto"):
    """The build's firmware run on the int8 rows X in the target's simulator (model warnings fatal)."""
    o, out = result.output, result.out_dir
    backend = get_backend(result.target)
    return run_on_target(backend.simulator, [str(out / f"{o.prefix}.c")], str(out / f"{o.prefix}.h"), o.prefix, X,
                         o.n_scores, o.input_ctype, o.score_ctype, extra_cflags=("-Werror",), method=method,
                         max_cycles_per_inference=DEFAULT_MAX_CYCLES + COUNT_PER_MAC_BOUND * o.macs,
                         chip=backend.chip)


def check_network(data: bytes, target: str, tmp_path: Path, n_rows: int = 6, method: str = "auto", **options):
    """Compile the .tflite ``data`` for ``target`` (compile ``options``), run it on int8 rows, compare every byte
    with tflite-micro's."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "net.tflite"
    path.write_bytes(data)
    result = tinycc_ml.compile(path, target=target, name="net", out_dir=tmp_path / "out", **options)
    X = rows(n_rows, result.output.input_dim, seed=len(data))
    run = run_network(result, X, method)
    want = tflm_outputs(data, X)
    assert run.scores.dtype == np.int8 and run.scores.shape == want.shape
    np.testing.assert_array_equal(run.scores, want)
    np.testing.assert_array_equal(run.predictions, np.argmax(want, axis=1))  # the first of equal scores
    return result, run


# the Cortex-M4's two weight layouts: int8 in flash (the default), widened to int16 (optimize="speed")
BUILDS = [("avr", "size"), ("cortex-m0", "size"), ("cortex-m4", "size"), ("cortex-m4", "speed")]


@pytest.mark.parametrize("target, optimize", BUILDS)
@pytest.mark.parametrize("net", sorted(NETS))
def test_small_networks_equal_tflite_micro_in_the_simulators(net, target, optimize, tmp_path):
    require_target(target)
    result, run = check_network(NETS[net](), target, tmp_path, optimize=optimize)
    arena = result.report["arena_bytes"]
    assert result.output.ram_bytes >= arena > 0  # and a kernel's scratch (the Cortex-M4's im2col columns)
    assert f"Activation arena: {arena} bytes" in result.files["net.h"]
    # the weights stay in flash (PROGMEM on the AVR): the model's RAM is the arena and scratch, nothing copied
    assert run.model_ram_bytes == result.output.ram_bytes
    assert run.model_flash_bytes >= result.output.const_bytes
    assert 0 < run.stack_bytes <= STACK_LIMIT[target]
    assert result.report["fit"]["ram_bytes"] >= arena


def test_the_cortex_m0_under_unicorn_and_the_cortex_m33_agree(tmp_path):
    require_target("cortex-m0", "unicorn")
    check_network(residual(), "cortex-m0", tmp_path / "m0", method="unicorn")
    require_target("cortex-m33")
    check_network(convolutions(), "cortex-m33", tmp_path / "m33")


@pytest.mark.parametrize("target, optimize", [("cortex-m4", "size"), ("cortex-m4", "speed"), ("avr", "size"),
                                              ("cortex-m0", "size")])
@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 10_000), stride=st.tuples(st.integers(1, 3), st.integers(1, 3)),
       dilation=st.tuples(st.integers(1, 2), st.integers(1, 2)), padding=st.sampled_from(["same", "valid"]),
       activation=st.sampled_from(["none", "relu", "relu6"]), multiplier=st.integers(1, 2),
       kernel=st.tuples(st.integers(1, 3), st.integers(1, 3)), per_channel=st.booleans(),
       channels=st.sampled_from([3, 4, 8]), bias_reach=st.sampled_from([3000, 1 << 29]))
def test_any_window_on_the_microcontrollers_equals_tflite_micro(target, optimize, tmp_path_factory, seed, stride,
                                                                 dilation, padding, activation, multiplier, kernel,
                                                                 per_channel, channels, bias_reach):
    """A contract of the compiler: whatever the windows' attributes, the firmware's bytes are the interpreter's
    (the Cortex-M4's kernels: im2col and pointwise convolutions, depthwise on 4 channels at a time, either
    requantisation epilogue: biases near 2^29 make accumulators too large for the SMMULR form; the AVR's and
    the Cortex-M0's: im2col columns, the zero point folded into the bias where the sums stay in int32, else
    the shared C)."""
    require_target(target)
    n = NetBuilder(seed, bias_reach)
    x = n.input((11, 12, 4) if target == "cortex-m4" else (6, 7, 3))  # within the ATmega328P's 2 KB
    y = n.conv(x, channels, kernel, stride, dilation, padding, activation, per_channel)
    assume(min(n.shapes[y]) >= 1)  # a VALID window larger than its input has no output
    y = n.depthwise(y, multiplier, kernel[::-1], stride[::-1], dilation, padding, activation, per_channel)
    assume(min(n.shapes[y]) >= 1)
    y = n.conv(y, 5, (1, 1), activation=activation)  # pointwise: each position's inputs are a column
    y = n.average_pool(y, (2, 2), (1, 1), "same")
    check_network(n.finish(n.fc(n.flatten(y), 3, activation)), target, tmp_path_factory.mktemp("net"), 4,
                  optimize=optimize)


@pytest.mark.parametrize("per_channel, bias_reach", [(False, 1 << 29), (True, 3000)])
def test_a_small_depthwise_layer_whose_function_gcc_clones_builds_on_the_cortex_m4(per_channel, bias_reach,
                                                                                   tmp_path_factory):
    """Found by the hypothesis test above: GCC's constant-propagated clone of this layer's depthwise function had
    no registers for its two-position asm block (the firmware did not build; refused as not fitting)."""
    test_any_window_on_the_microcontrollers_equals_tflite_micro.hypothesis.inner_test(
        target="cortex-m4", optimize="size", tmp_path_factory=tmp_path_factory, seed=1, stride=(1, 2),
        dilation=(2, 2), padding="same", activation="none", multiplier=1, kernel=(3, 2), per_channel=per_channel,
        channels=4, bias_reach=bias_reach)


@pytest.mark.parametrize("target", ["cortex-m4", "cortex-m0"])
def test_a_1d_ds_cnn_written_over_its_inputs_equals_tflite_micro(target, tmp_path):
    """Each depthwise and pointwise layer a few positions below the input it still reads (the Cortex-M4's pairs of
    positions, the Cortex-M0's im2col columns): 4,416 bytes of arena against TFLite Micro's 6,272."""
    require_target(target)
    result, _ = check_network(ds_cnn_1d(), target, tmp_path)
    assert result.report["arena_bytes"] == 4416


# ---------------------------------------------------------------- the MLPerf Tiny models


@pytest.mark.parametrize("name", sorted(MLPERF_ARENA))
def test_mlperf_tiny_models_on_the_cortex_m4_equal_tflite_micro(name, tmp_path):
    require_target("cortex-m4")
    data = (MODELS / f"{name}.tflite").read_bytes()
    result, run = check_network(data, "cortex-m4", tmp_path, n_rows=4)
    assert result.report["arena_bytes"] == MLPERF_ARENA[name]
    # + the widest convolution's im2col columns (2 K bytes) and the pair the matrix product reads (4 K bytes)
    assert run.model_ram_bytes == result.output.ram_bytes <= MLPERF_ARENA[name] + 4096
    # predict() holds the scores on its stack (ad01: 640 of them)
    assert run.stack_bytes <= STACK_LIMIT["cortex-m4"] + result.output.n_scores
    # constants: the weights (1 byte each, padded to words), biases and the requantisation fields that differ
    # between channels; then the code (the Cortex-M4's functions, one per layer: a matrix product, or a
    # depthwise convolution, its border rows and columns unrolled over their taps inside, about 30 K bytes of
    # VWW's; VWW's pruned channels' constant outputs, stored by its matrix kernels as literals, about 8 K bytes;
    # VWW's three narrow pointwise layers unrolled per channel by m4_pointwise_narrow, about 15 K bytes);
    # within 1.1x the .tflite file
    assert result.output.const_bytes <= run.model_flash_bytes <= result.output.const_bytes + 64 * 1024
    assert run.model_flash_bytes <= 1.1 * len(data)
    assert set(result.report["weights"]["layers"].values()) == {"int8"}


def test_the_speed_layout_of_kws_equals_tflite_micro_in_fewer_instructions(tmp_path):
    """optimize="speed": the convolutions' weights widened to int16 in flash; the same bytes as tflite-micro's, in
    fewer instructions than the default build's and more flash."""
    require_target("cortex-m4")
    data = (MODELS / "kws_ref_model.tflite").read_bytes()
    size, size_run = check_network(data, "cortex-m4", tmp_path / "size", n_rows=2)
    speed, speed_run = check_network(data, "cortex-m4", tmp_path / "speed", n_rows=2, optimize="speed")
    assert np.mean(speed_run.instructions) < 0.9 * np.mean(size_run.instructions)
    # KWS: 22,016 weights, 20,480 of them widened (the default build's code on pairs of channels is larger)
    assert speed.output.const_bytes >= size.output.const_bytes + 20480
    # (61,100 against 46,380 bytes: the default build's code on pairs of channels, unrolled, is the larger)
    assert speed_run.model_flash_bytes > size_run.model_flash_bytes + 12288
    assert list(speed.report["weights"]["layers"].values()).count("int16") == 9  # the fully connected layer: int8


# ---------------------------------------------------------------- the weights' layout in flash


def wide_network(seed: int = 7) -> bytes:
    """Convolutions whose weights are most of the file: im2col (3x3), depthwise, pointwise, strided; one fully
    connected layer after a pooling to one position."""
    n = NetBuilder(seed)
    y = n.conv(n.input((12, 12, 16)), 32, (3, 3), activation="relu")
    y = n.depthwise(y, 1, (3, 3), activation="relu6")
    y = n.conv(y, 64, (1, 1))
    y = n.conv(y, 64, (3, 3), stride=(2, 2), activation="relu")
    y = n.average_pool(y, (6, 6), (6, 6))
    return n.finish(n.fc(n.flatten(y), 10))


def constant_bytes(graph) -> int:
    """Bytes of a graph's constants: a .tflite network's weights and biases as the file holds them."""
    return sum(graph.node(k).attrs["value"].nbytes for k in graph.order() if graph.op(k) == "const")


@pytest.mark.parametrize("target", ["cortex-m4", "cortex-m33"])
def test_a_default_build_keeps_int8_weights_within_a_tenth_of_the_files_bytes(target, tmp_path):
    """The default build's weights stay int8 in flash (each layer's array: its weights, rows padded to words), its
    channels' constants only what differs between channels: all its constants within 1.1x the file's weights and
    biases; optimize="speed" widens the layers that read each weight more than once (not the fully connected
    layer of one row) to int16, and the report says which layout each layer has and why."""
    path = tmp_path / "net.tflite"
    path.write_bytes(wide_network())
    size = tinycc_ml.compile(path, target=target, name="net")
    speed = tinycc_ml.compile(path, target=target, name="net", optimize="speed")
    weights = {k: v for k, v in size.output.const_arrays.items() if k.endswith("_m4w")}
    assert sorted(weights.values()) == [288, 768, 2048, 4608, 36864]  # 10 x 64 padded to 12 x 64 (4 channels a word)
    assert size.output.const_bytes <= 1.1 * constant_bytes(size.graph)
    widened = {k: v for k, v in speed.output.const_arrays.items() if k.endswith("_m4w")}
    assert {k: widened[k] // weights[k] for k in weights} == {k: 1 if v == 768 else 2 for k, v in weights.items()}
    assert speed.output.const_bytes > 1.8 * constant_bytes(speed.graph)
    assert size.report["weights"]["optimize"] == "size"
    assert list(size.report["weights"]["layers"].values()) == ["int8"] * 5
    assert list(speed.report["weights"]["layers"].values()) == ["int16"] * 4 + ["int8"]
    assert "int16 on 4 of 5 layers (optimize='speed'" in speed.report["weights"]["summary"]
    assert "int8 on 1 of 5 layers (each weight read once" in speed.report["weights"]["summary"]


@pytest.mark.parametrize("optimize", ["size", "speed"])
def test_both_weight_layouts_equal_tflite_micro_on_the_cortex_m4(optimize, tmp_path):
    require_target("cortex-m4")
    check_network(wide_network(), "cortex-m4", tmp_path, n_rows=4, optimize=optimize)


def test_a_per_tensor_layer_stores_its_biases_alone(tmp_path):
    """Requantisation fields every channel shares are literals in the code: a per-tensor layer's channel
    constants are its biases (int32 each); a per-channel layer's also its multipliers and shifts. (12 and 20
    input channels: the matrix kernels', not m4_pointwise_narrow's, which takes 8, 16 or 32.)"""
    n = NetBuilder(3)
    y = n.conv(n.input((6, 6, 12)), 20, (1, 1), per_channel=False)
    path = tmp_path / "net.tflite"
    path.write_bytes(n.finish(n.conv(y, 8, (1, 1), per_channel=True)))
    result = tinycc_ml.compile(path, target="cortex-m4", name="net")
    per_tensor, per_channel = (f"net_{k}_m4q" for k in result.graph.order() if result.graph.op(k) == "conv2d")
    assert result.output.const_arrays[per_tensor] == 20 * 4
    assert result.output.const_arrays[per_channel] >= 8 * 4 * 3  # bias, multiplier, the rounding nudge at least



# ---------------------------------------------------------------- refusals


@pytest.fixture
def no_emit(monkeypatch):
    """Any emission fails the test: a refusal must come before the C is generated."""
    def emit(*args, **kwargs):
        raise AssertionError("emitted a build that was to be refused first")
    monkeypatch.setattr(McuBackend, "emit", emit)


def test_a_network_over_the_flash_is_refused_before_emitting_with_advice(no_emit):
    for name, target, chip in (("vww_96_int8", "avr", "ATmega328P"), ("ad01_int8", "cortex-m0", "nRF51822")):
        with pytest.raises(FitError, match=f"does not fit the {chip}.*its constants alone need at least") as info:
            tinycc_ml.compile(MODELS / f"{name}.tflite", target=target)
        message = str(info.value)
        assert "the weights are the .tflite file's own int8" in message and "fewer or narrower layers" in message
        assert "tinycc-ml fit" not in message  # fit cannot shrink a file's network
        assert info.value.constant_bytes > get_backend(target).chip.flash


def test_a_network_over_the_ram_is_refused_naming_its_arena():
    # the intermediates: the 10,560-byte arena and the kernels' small im2col column
    with pytest.raises(FitError, match=r"does not fit the ATmega328P: .*intermediates 106\d\d bytes.*activation arena"):
        tinycc_ml.compile(MODELS / "kws_ref_model.tflite", target="avr")
    with pytest.raises(FitError, match="limited to .* 9000 B RAM.*activation arena"):
        tinycc_ml.compile(MODELS / "kws_ref_model.tflite", target="cortex-m4", max_ram=9000)
