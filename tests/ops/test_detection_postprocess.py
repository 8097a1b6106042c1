"""DETECTION_POSTPROCESS from .tflite files (ir/ops/network/detection_postprocess.py) against tflite-micro: SSD-style
box encodings and class scores as the model's two inputs, constant anchors, fast and regular suppression, with and
without a background column; every detection tflite-micro reports (boxes, classes, scores, count) equal bit for bit
on the host (C and interpreter within float32 rounding) and the M4."""

from __future__ import annotations

import numpy as np
import pytest

import tinycc_ml
from tests.conftest import require_target
from tests.ops.single_op import compiled
from tests.tflite_builder import tflm_joined_outputs
from tests.tflite_models import TfliteBuilder
from tinycc_ml.codegen.backend import get_backend
from tinycc_ml.errors import ModelFileError

N, CLASSES = 24, 3


@pytest.fixture(autouse=True)
def host():
    require_target("host")


def anchors() -> np.ndarray:
    """A 4 x 6 grid of anchors (y, x, h, w), two sizes, overlapping."""
    ys, xs = np.meshgrid((np.arange(4) + 0.5) / 4, (np.arange(6) + 0.5) / 6, indexing="ij")
    size = np.where((np.arange(N) % 2) == 0, 0.3, 0.45)
    return np.stack([ys.ravel(), xs.ravel(), size, size], axis=1).astype(np.float32)


def model(regular: bool, background: bool = True, max_detections: int = 5, per_anchor: int = 1,
          constant_scores: bool = False) -> bytes:
    """Boxes and scores as the model's inputs (``constant_scores``: the scores a constant, one input)."""
    b = TfliteBuilder()
    columns = CLASSES + int(background)
    boxes = b.tensor((1, N, 4), "float32", name="boxes")
    data = np.random.default_rng(2).uniform(0, 1, size=(1, N, columns)).astype(np.float32) if constant_scores \
        else None
    scores = b.tensor((1, N, columns), "float32", name="scores", data=data)
    anchor = b.tensor((N, 4), "float32", data=anchors(), name="anchors")
    slots = max_detections * (1 if regular else per_anchor)
    outs = [b.tensor((1, slots, 4), "float32", name="detection_boxes"),
            b.tensor((1, slots), "float32", name="detection_classes"),
            b.tensor((1, slots), "float32", name="detection_scores"),
            b.tensor((1,), "float32", name="num_detections")]
    b.custom_op("TFLite_Detection_PostProcess", [boxes, scores, anchor], outs,
                {"max_detections": max_detections, "max_classes_per_detection": per_anchor,
                 "detections_per_class": 4, "use_regular_nms": regular, "nms_score_threshold": 0.3,
                 "nms_iou_threshold": 0.5, "num_classes": CLASSES, "y_scale": 10.0, "x_scale": 10.0,
                 "h_scale": 5.0, "w_scale": 5.0})
    return b.finish([boxes] if constant_scores else [boxes, scores], outs)


def inputs(n: int, columns: int, seed: int = 1) -> list[list[np.ndarray]]:
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(n):
        boxes = rng.normal(0, 1.5, size=(1, N, 4)).astype(np.float32)
        scores = rng.uniform(0, 1, size=(1, N, columns)).astype(np.float32)
        scores[0, :4] = 0.8  # ties: decided by index, as the kernel's sorts
        rows.append([boxes, scores])
    return rows


def detections(flat: np.ndarray, slots: int) -> list[tuple]:
    """What tflite-micro reports per row: (count, boxes, classes, scores) of the counted slots."""
    out = []
    for row in flat:
        count = int(row[-1])
        shown = min(count, slots)
        out.append((count, row[:4 * slots].reshape(slots, 4)[:shown].tolist(),
                    row[4 * slots:5 * slots][:shown].tolist(), row[5 * slots:6 * slots][:shown].tolist()))
    return out


@pytest.mark.parametrize("regular, background, per_anchor", [(False, True, 1), (True, True, 1), (False, False, 1),
                                                             (True, False, 1), (True, True, 2)])
def test_detections_equal_tflite_micro(regular, background, per_anchor, tmp_path):
    data = model(regular, background, per_anchor=per_anchor)
    rows = inputs(12, CLASSES + int(background))
    want = tflm_joined_outputs(data, rows)
    slots = 5 * (1 if regular else per_anchor)
    X = np.stack([np.concatenate([x.reshape(-1) for x in r]) for r in rows])
    model_, result = compiled(data, tmp_path, precision="float")
    got = np.asarray(result.load().scores(X), np.float32)
    assert detections(got, slots) == detections(want, slots)
    counts = want[:, -1]
    assert counts.min() >= 1 and len(set(counts)) >= 1
    np.testing.assert_allclose(model_.scores(X)[:, -1], counts)


def test_fast_suppression_of_several_classes_per_anchor_is_refused_by_name(tmp_path):
    """TFLite Micro's fast path writes an anchor's second class past the slots (its own bug): nothing to reproduce."""
    path = tmp_path / "ssd.tflite"
    path.write_bytes(model(False, per_anchor=2))
    with pytest.raises(ModelFileError, match="max_classes_per_detection 2"):
        tinycc_ml.load_model(path)


def test_the_m4_detects_the_same(tmp_path):
    require_target("cortex-m4")
    data = model(True)
    rows = inputs(3, CLASSES + 1, seed=4)
    X = np.stack([np.concatenate([x.reshape(-1) for x in r]) for r in rows])
    _, result = compiled(data, tmp_path, target="cortex-m4", precision="float")
    run = get_backend("cortex-m4").simulate(tmp_path / "cortex-m4", result.output, X.astype(np.float64))
    got = np.asarray(run.scores, np.float32).reshape(len(X), -1)
    assert detections(got, 5) == detections(tflm_joined_outputs(data, rows), 5)
