"""The Cortex-M4 network kernels' arithmetic (tinycc_ml/arm/m4_network.py) against TFLite's, instruction by
instruction in numpy: paired channels' weight words (one SXTB16 and two SMLAD per word and column) and the
SMMLAR requantisation epilogue; and their cycles on the cycle model."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tinycc_ml
from tests.backends.test_network_mcu import check_network
from tests.conftest import require_target
from tests.tflite_builder import NetBuilder
from tinycc_ml.arm.m4_network import PAIRED_ACC, accumulator_bound, fold_zero_point, paired_rows
from tinycc_ml.codegen.backend import get_backend
from tinycc_ml.ir.ops.registry import node_macs
from tinycc_ml.ir.ops.tflite_arith import multiply_by_quantized_multiplier
from tinycc_ml.runtime.profile import function_cycles


def wrap(v):
    return ((np.asarray(v, np.int64) + 2**31) % 2**32) - 2**31


def halves(word: int) -> tuple[int, int]:
    """A word's halves read as int16 (SMLAD's operands)."""
    lo, hi = word & 0xFFFF, (word >> 16) & 0xFFFF
    return lo - (lo >> 15 << 16), hi - (hi >> 15 << 16)


def sxtb16(word: int) -> tuple[int, int]:
    b0, b2 = word & 0xFF, (word >> 16) & 0xFF
    return b0 - (b0 >> 7 << 8), b2 - (b2 >> 7 << 8)


def smlad(acc: int, a: tuple[int, int], b: tuple[int, int]) -> int:
    return int(wrap(acc + a[0] * b[0] + a[1] * b[1]))


def run_1x4p(words: np.ndarray, kw4: int, x: np.ndarray, n_groups: int) -> np.ndarray:
    """The 1x4p kernel's steps (_step_1x4p) on the paired words: per group of 4 channels, per 4 inputs, the
    input word split by SXTB16 into (x0, x2), (x1, x3), the four words [pair 0 even, pair 1 even, pair 0 odd,
    pair 1 odd]: raw word into the raw accumulator, its SXTB16 into the even one; the odd channel (raw - even) / 256."""
    u = np.asarray(words, "<i4").view("<u4").astype(np.int64)
    xs = np.zeros(4 * kw4, np.int64)
    xs[:len(x)] = x
    out = []
    for g in range(n_groups):
        acc = {"e0": 0, "r0": 0, "e1": 0, "r1": 0}
        for j in range(kw4):
            even, odd = (int(xs[4 * j]), int(xs[4 * j + 2])), (int(xs[4 * j + 1]), int(xs[4 * j + 3]))
            for k, lanes in enumerate((even, even, odd, odd)):
                w = int(u[(g * kw4 + j) * 4 + k])
                acc[f"r{k % 2}"] = smlad(acc[f"r{k % 2}"], halves(w), lanes)
                acc[f"e{k % 2}"] = smlad(acc[f"e{k % 2}"], sxtb16(w), lanes)
        out += [acc["e0"], int(wrap(acc["r0"] - acc["e0"])) >> 8, acc["e1"], int(wrap(acc["r1"] - acc["e1"])) >> 8]
    return np.array(out)


@settings(max_examples=60, deadline=None)
@given(out_c=st.integers(1, 9), k=st.integers(1, 23), seed=st.integers(0, 2**32 - 1), full=st.booleans())
def test_paired_words_give_each_channels_sum(out_c, k, seed, full):
    """A contract of paired_rows: the kernel's instruction sequence on its words computes every channel's
    sum of products exactly (int32 arithmetic wrapping in the raw accumulators) wherever the odd channels'
    sums stay below 2^23; None exactly where a weight pair cannot be stored (c1 = -128 under a negative c0)."""
    rng = np.random.default_rng(seed)
    W = rng.integers(-128 if full else -127, 128, size=(out_c, k)).astype(np.int8)
    x = rng.integers(-128, 128, size=k)
    arranged = paired_rows(W)
    rows = np.zeros((-(-out_c // 4) * 4, k), np.int16)
    rows[:out_c] = W
    borrow = (rows[1::2] == -128) & (rows[0::2] < 0)
    assert (arranged is None) == bool(borrow.any())
    if arranged is None:
        return
    words, kw4 = arranged
    assert kw4 == -(-k // 4) and words.size == rows.shape[0] * kw4
    assert np.all(accumulator_bound(np.zeros(out_c), W, 128) < PAIRED_ACC)  # 23 inputs of 128 x 128
    got = run_1x4p(words, kw4, x, rows.shape[0] // 4)
    np.testing.assert_array_equal(got[:out_c], W.astype(np.int64) @ x)


def smmlar(a: np.ndarray, m: np.ndarray, t: np.ndarray) -> np.ndarray:
    return wrap(((t.astype(np.int64) << 32) + a.astype(np.int64) * m + (1 << 31)) >> 32)


@settings(max_examples=200, deadline=None)
@given(acc=hnp.arrays(np.int64, 64, elements=st.integers(-(2**29), 2**29)),
       multiplier=st.integers(0, 2**31 - 1), shift=st.integers(-31, 0), left=st.integers(0, 4),
       zp=st.integers(-128, 127), fold=st.booleans())
def test_the_smmlar_epilogue_is_tflites_requantisation(acc, multiplier, shift, left, zp, fold):
    """The epilogue's arithmetic (m4_rq, m4_rq_fold): a2 = acc 2^(left + 1), SMMLAR(a2, m, nudge + [acc < 0]
    correction) >> r is MultiplyByQuantizedMultiplier(acc, m, shift) (+ zp where folded into the nudge) for
    every accumulator proven small (|acc| 2^left < 2^30): the sign of acc stands for the high product's."""
    shift = shift if shift < 0 or not left else left
    left, right = max(shift, 0), max(-shift, 0)
    acc = acc >> left
    a2 = wrap(acc << (left + 1))
    want = multiply_by_quantized_multiplier(acc, multiplier, shift)
    bound = np.abs(acc).max(initial=0)[None]
    if fold and fold_zero_point(bound, np.array([multiplier]), np.array([shift]), zp):  # as the kernels decide
        nudge = (1 << (right - 1)) + (zp << right)
        got = smmlar(a2, multiplier, wrap(nudge + (a2 >> 31))) >> right
        np.testing.assert_array_equal(got, want + zp)
    else:
        nudge, negmask = ((1 << (right - 1)), -1) if right else (0, 0)
        got = smmlar(a2, multiplier, wrap(nudge + ((a2 >> 31) & negmask))) >> right
        np.testing.assert_array_equal(got, want)


def pointwise_network(seed: int = 5) -> bytes:
    """A pointwise convolution of 64 channels over 6 x 7 positions (a matrix product of 64-input columns), a
    pooling to 2 positions, a fully connected layer of one row (128 inputs: its sums always below 2^23)."""
    n = NetBuilder(seed)
    y = n.conv(n.input((6, 7, 64)), 64, (1, 1), activation="relu")
    y = n.average_pool(y, (3, 7), (3, 7), "valid")
    return n.finish(n.fc(n.flatten(y), 16))


def test_the_matrix_kernels_take_the_cycles_of_paired_channels(tmp_path):
    """The default build's matrix products on pairs of channels: the pointwise convolution (two columns by four
    channels, 16 SMLAD per 32 multiply-accumulates, 2 SXTB16 of weights; the epilogue in SMMLAR) within 1.45
    modelled cycles per multiply-accumulate (1.65 before, a word of int8 weights split whole for two channels),
    the fully connected layer of one row (four channels a step) within 1.55 (1.75 before)."""
    require_target("cortex-m4")
    path = tmp_path / "net.tflite"
    path.write_bytes(pointwise_network())
    result = tinycc_ml.compile(path, target="cortex-m4", name="net", out_dir=tmp_path / "out")
    source = (tmp_path / "out" / "net.c").read_text()
    assert source.count("2x4p (int8 weights)") == 1 and source.count("1x4p (int8 weights)") == 1
    backend = get_backend("cortex-m4")
    x = np.random.default_rng(0).integers(-128, 128, size=(1, result.output.input_dim)).astype(np.int8)
    count = function_cycles(backend.simulator, [str(tmp_path / "out" / "net.c")], str(tmp_path / "out" / "net.h"),
                            "net", x, result.output.n_scores, "int8_t", "int8_t", chip=backend.chip)
    per_mac = {}
    for node in result.graph.nodes():
        if node.op in ("conv2d", "fully_connected"):
            per_mac[node.op] = count.per_function[f"net_m4_mm_{node.name}"] / node_macs(result.graph, node.name)
    assert per_mac["conv2d"] <= 1.45 and per_mac["fully_connected"] <= 1.55, per_mac


class Pruning:
    """A NetBuilder's generator whose next layer has the channels ``dead`` pruned as in MobileNet VWW's
    pointwise layers: zero weights, biases of +-2^30 (accumulators no SMMULR epilogue may take)."""

    def __init__(self, rng, dead: list[int], reach: int):
        self.rng, self.dead, self.reach, self.armed = rng, dead, reach, True

    def integers(self, low, high, size=None):
        values = self.rng.integers(low, high, size=size)
        if self.armed and low == -127:
            values[self.dead] = 0
        elif self.armed and high == self.reach:
            values = values.astype(np.int64)
            values[self.dead] = [(-1) ** i << 30 for i in range(len(self.dead))]
            self.armed = False
        return values

    def __getattr__(self, name):
        return getattr(self.rng, name)


def test_pruned_channels_are_constants_beside_paired_live_ones(tmp_path):
    """Channels of zero weights leave the matrix product (their output a constant: TFLite's requantisation of
    the bias, stored by the kernel at each position); the live channels, their accumulators small, run on pairs
    (before: the whole layer on the int64 epilogue, every zero weight multiplied). Every byte equals
    tflite-micro's."""
    require_target("cortex-m4")
    from tests.backends.test_network_mcu import check_network

    n = NetBuilder(11)
    x = n.input((5, 6, 16))
    n.rng = Pruning(n.rng, [1, 2, 6, 9, 10, 11, 17], n.bias_reach)
    y = n.conv(x, 20, (1, 1), activation="relu")
    y = n.conv(y, 8, (3, 3), stride=(2, 2))  # im2col: the pruned channels' constants are columns' inputs
    result, _ = check_network(n.finish(n.fc(n.flatten(y), 4)), "cortex-m4", tmp_path, n_rows=6)
    source = (tmp_path / "out" / "net.c").read_text()
    assert "13x16 int8 weights" in source
    assert source.count("2x4p (int8 weights)") == 2


class Rescaled(NetBuilder):
    """A NetBuilder whose next layers' outputs take ``factor`` times the scale it would choose and the zero point
    ``zp`` (None: its own choice): requantisation shifts across TFLite's range, outputs saturating at either end."""

    factor, zp = 1.0, None

    def activation_tensor(self, shape, scale):
        if self.zp is None:
            return super().activation_tensor(shape, scale)
        return self.tensor(shape, float(np.float32(scale * self.factor)), self.zp)


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 10_000), log2_factor=st.integers(-7, 16), zp=st.integers(-128, 127),
       activation=st.sampled_from(["none", "relu", "relu6"]), per_channel=st.booleans(),
       channels=st.sampled_from([8, 12, 20]), bias_reach=st.sampled_from([3000, 1 << 21]), pruned=st.booleans(),
       width=st.sampled_from([5, 6]))
def test_the_asm_epilogue_equals_tflite_micro(tmp_path_factory, seed, log2_factor, zp, activation, per_channel,
                                              channels, bias_reach, pruned, width):
    """The 2x4p kernels' requantisation written in their asm (``asm_epilogue``: per output LSL or SUB + ASR,
    ADD of the nudge and the sign's correction, SMMLAR, ASR or SSAT's shift, the zero point, the activation's
    bounds; STRB at the group's offsets, at a pruned layer's "dst" offsets with its padding channels stored
    first, or for an odd last column twice at one place): every byte tflite-micro's, whatever the shift (the
    output scale 2^-7 to 2^16 times the builder's), the zero point, the activation, per-tensor or per-channel
    constants (literals or loaded), accumulators up to 2^21 from the bias; a 3x3 convolution on widened rows
    (an even width) or widened im2col columns (an odd one), then a pointwise one in place."""
    require_target("cortex-m4")
    n = Rescaled(seed, bias_reach)
    n.factor, n.zp = 2.0 ** log2_factor, zp
    y = n.conv(n.input((5, width, 8)), channels, (3, 3), activation=activation, per_channel=per_channel)
    if pruned:
        n.rng = Pruning(n.rng, [1, 2, 6], n.bias_reach)
    y = n.conv(y, 12, (1, 1), activation=activation, per_channel=per_channel)
    n.zp = None
    check_network(n.finish(n.fc(n.flatten(y), 3)), "cortex-m4", tmp_path_factory.mktemp("net"), 4)


def test_the_2x4p_blocks_requantise_in_their_asm(tmp_path):
    """The default build's 2x4p blocks (the widened rows' 3x3 convolution, the pointwise one in place) carry
    their requantisation and stores in the block's asm statement (no C epilogue after it); bytes as
    tflite-micro's."""
    require_target("cortex-m4")
    from tests.backends.test_network_mcu import check_network

    n = NetBuilder(3)  # 12 channels into the pointwise layer (8, 16 or 32: m4_pointwise_narrow's)
    y = n.conv(n.conv(n.input((5, 6, 8)), 12, (3, 3), activation="relu"), 12, (1, 1))
    check_network(n.finish(n.fc(n.flatten(y), 3)), "cortex-m4", tmp_path, 4)
    source = (tmp_path / "out" / "net.c").read_text()
    blocks = [f.split("\n}\n")[0] for f in source.split("\n/* %")[1:] if "2x4p (int8 weights)" in f.split("\n")[0]]
    assert len(blocks) == 2
    for text in blocks:
        assert text.count("smmlar") == 8 and "m4_rq" not in text and "strb" in text


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 10_000), log2_factor=st.integers(-3, 6), zp=st.integers(-128, 127),
       activation=st.sampled_from(["none", "relu"]))
def test_the_asm_add_equals_tflite_micro(tmp_path_factory, seed, log2_factor, zp, activation):
    """TFLite's int8 ADD inside a network (arm/m4_add.py's asm loop where the int8 ranges prove its high product
    exact, else the C): every byte tflite-micro's whatever the output scale (2^-3 to 2^6 times the builder's) and
    zero point."""
    require_target("cortex-m4")
    n = Rescaled(seed)
    x = n.input((4, 6, 8))
    a, b = n.conv(x, 8, (1, 1)), n.conv(x, 8, (3, 3))
    n.factor, n.zp = 2.0 ** log2_factor, zp
    y = n.add(a, b, activation)
    n.zp = None
    check_network(n.finish(n.fc(n.flatten(y), 3)), "cortex-m4", tmp_path_factory.mktemp("net"), 4)
