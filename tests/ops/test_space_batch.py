"""SPACE_TO_BATCH_ND and BATCH_TO_SPACE_ND (tinycc_ml/ir/ops/network/space_batch.py) against tflite-micro: 4-D and
3-D tensors, blocks and paddings/crops, int8 (padding the integer 0, as TFLite Micro writes it) and float32; the
microcontrollers; shapes that cannot work refused by name."""

from __future__ import annotations

import numpy as np
import pytest

import tinycc_ml
from tests.conftest import require_target
from tests.ops.single_op import OPS, compiled, int32_constant, random_rows, simulated_scores, tflite_micro
from tests.tflite_models import TfliteBuilder
from tinycc_ml.errors import ModelFileError
from tinycc_ml.ir.ops.network.space_batch import space_to_batch_sources

Q = {"int8": {"scale": 0.05, "zero_point": -3}, "float32": {"scale": None}}


@pytest.fixture(autouse=True)
def host():
    require_target("host")


def moved(code, kind, in_shape, out_shape, block, edges) -> bytes:
    b = TfliteBuilder()
    x = b.tensor(in_shape, kind, name="x", **Q[kind])
    y = b.tensor(out_shape, kind, name="y", **Q[kind])
    b.op(code, [x, int32_constant(b, block, "block"), int32_constant(b, np.reshape(edges, (-1, 2)), "edges")], [y])
    return b.finish([x], [y])


CASES = {
    "space 4-D padded": (OPS.SPACE_TO_BATCH_ND, (1, 5, 4, 3), (6, 2, 2, 3), [3, 2], [1, 0, 0, 0]),
    "space 4-D": (OPS.SPACE_TO_BATCH_ND, (2, 4, 4, 2), (8, 2, 2, 2), [2, 2], [0, 0, 0, 0]),
    "space 3-D padded": (OPS.SPACE_TO_BATCH_ND, (1, 7, 3), (2, 4, 3), [2], [0, 1]),
    "batch 4-D cropped": (OPS.BATCH_TO_SPACE_ND, (6, 2, 2, 3), (1, 5, 4, 3), [3, 2], [1, 0, 0, 0]),
    "batch 3-D": (OPS.BATCH_TO_SPACE_ND, (4, 3, 2), (2, 6, 2), [2], [0, 0]),
}


@pytest.mark.parametrize("kind", ["int8", "float32"])
@pytest.mark.parametrize("case", list(CASES))
def test_equals_tflite_micro(case, kind, tmp_path):
    code, in_shape, out_shape, block, edges = CASES[case]
    data = moved(code, kind, in_shape, out_shape, block, edges)
    rng = np.random.default_rng(4)
    size = int(np.prod(in_shape))
    X = rng.normal(0, 3, size=(6, size)).astype(np.float32) if kind == "float32" else random_rows(rng, 6, size)
    want = tflite_micro(data, X, in_shape)
    model, result = compiled(data, tmp_path)
    got = result.load().scores(X) if kind == "float32" else result.load().run_raw(X)[0]
    got = np.asarray(got).reshape(len(X), -1).astype(want.dtype)
    padded = np.zeros(want.shape[1], dtype=bool)
    if code == OPS.SPACE_TO_BATCH_ND:  # where the padding goes: TFLite Micro writes an unset value there
        padded = space_to_batch_sources(in_shape, out_shape, block + [1] * (2 - len(block)),
                                        [edges[0], edges[2] if len(edges) == 4 else 0]) < 0
    np.testing.assert_array_equal(got[:, ~padded], want[:, ~padded])
    assert np.all(got[:, padded] == (0 if kind == "float32" else Q["int8"]["zero_point"]))  # real 0
    assert padded.any() == ("padded" in case)


@pytest.mark.toolchain
@pytest.mark.parametrize("target", ["avr", "cortex-m0", "cortex-m4"])
def test_the_microcontrollers_move_the_same(target, tmp_path):
    require_target(target)
    for k, case in enumerate(("space 4-D padded", "batch 4-D cropped")):
        code, in_shape, out_shape, block, edges = CASES[case]
        data = moved(code, "int8", in_shape, out_shape, block, edges)
        X = random_rows(np.random.default_rng(5), 2, int(np.prod(in_shape)))[:3]
        (tmp_path / str(k)).mkdir()
        _, host = compiled(data, tmp_path / str(k), "op")
        np.testing.assert_array_equal(simulated_scores(target, data, X, tmp_path / str(k)),
                                      host.load().run_raw(X)[0])  # the host's: tflite-micro's where it defines


@pytest.mark.parametrize("data, problem", [
    (moved(OPS.SPACE_TO_BATCH_ND, "int8", (1, 5, 4, 3), (6, 2, 2, 3), [3, 2], [0, 0, 0, 0]), "not multiples"),
    (moved(OPS.SPACE_TO_BATCH_ND, "int8", (1, 4, 4, 3), (4, 2, 2, 3), [2, 0], [0, 0, 0, 0]), "at least 1"),
], ids=["padded size not a multiple", "block of 0"])
def test_shapes_that_cannot_work_are_refused_by_name(data, problem, tmp_path):
    path = tmp_path / "bad.tflite"
    path.write_bytes(data)
    with pytest.raises(ModelFileError, match=rf"bad\.tflite.*{problem}"):
        tinycc_ml.load_model(path)
