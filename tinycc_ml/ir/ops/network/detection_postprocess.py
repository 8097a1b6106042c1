"""detection_postprocess: TFLite's DETECTION_POSTPROCESS custom operator (SSD heads: box decoding and non-maximum
suppression), float32, as TFLite Micro's kernel (detection_postprocess.cc) computes it.

Boxes decoded from centre-size encodings against constant anchors in double (the kernel's casts), rounded to float32
corners; scores at or above the threshold kept and sorted decreasing, ties in index order (the kernel's stable merge
sort and its partial sort on (score, index)); greedy suppression by float32 intersection over union above the
threshold. Fast mode: each anchor's best classes (max_classes_per_detection) ranked by its best score; regular mode:
suppression per class, the best max_detections over all classes. One flat result holds the four outputs in order
(boxes, classes, scores, count); the reader slices them. Slots past the count are 0 (TFLite Micro's fast mode
leaves them as they were). TFLite Micro stops with an error on a decoded box of no extent (an anchor of zero size);
here such a box takes part with zero area. Fast mode with more than one class per anchor is refused: TFLite Micro's
kernel writes those detections at the wrong slots, past its output tensors.
"""

from __future__ import annotations

import math

import numpy as np

from tinycc_ml.ir.ops.c_primitives import c_helper
from tinycc_ml.ir.ops.convolution import NO_ACCUMULATOR, NO_RANGES
from tinycc_ml.ir.ops.frontends import tflite_custom
from tinycc_ml.ir.ops.registry import OpDef, need, register_op
from tinycc_ml.ir.types import F32, TensorType

F = np.float32
ATTRS = {"max_detections": "int", "max_classes_per_detection": "int", "detections_per_class": "int",
         "use_regular_nms": "int", "score_threshold": "float", "iou_threshold": "float", "num_classes": "int",
         "scales": "array", "slots": "int"}


def _infer(ts, attrs, declared):
    boxes, scores, anchors = ts
    need(all(t.dtype.is_float for t in ts), "DETECTION_POSTPROCESS takes float32 boxes, scores and anchors "
                                            "(TFLite Micro's kernel)")
    need(boxes.rank == 3 and boxes.shape[0] == 1 and boxes.shape[2] >= 4, f"boxes of shape {list(boxes.shape)}: "
                                                                           "(1, anchors, >= 4) expected")
    n = boxes.shape[1]
    classes = int(attrs["num_classes"])
    need(scores.rank == 3 and scores.shape[:2] == (1, n) and 0 <= scores.shape[2] - classes <= 1,
         f"scores of shape {list(scores.shape)} for {n} anchors and {classes} classes (one background column at most)")
    need(anchors.shape == (n, 4), f"anchors of shape {list(anchors.shape)}: ({n}, 4) expected")
    need(0.0 < float(attrs["iou_threshold"]) <= 1.0, f"iou threshold {attrs['iou_threshold']} outside (0, 1]")
    need(int(attrs["max_detections"]) >= 0 and int(attrs["max_classes_per_detection"]) > 0
         and int(attrs["detections_per_class"]) > 0, "max_detections, max_classes_per_detection and "
                                                     "detections_per_class must be positive")
    return TensorType((int(attrs["slots"]) * 6 + 1,), F32, "")


def decode(boxes: np.ndarray, anchors: np.ndarray, scales) -> np.ndarray:
    """(anchors, 4) float32 corners (ymin, xmin, ymax, xmax) of the centre-size encodings, in double as the kernel."""
    ys, xs, hs, ws = (float(F(s)) for s in scales)
    b, a = boxes[:, :4].astype(np.float64), anchors.astype(np.float64)
    ycenter = (b[:, 0] / ys * a[:, 2] + a[:, 0]).astype(F)
    xcenter = (b[:, 1] / xs * a[:, 3] + a[:, 1]).astype(F)
    half_h = (0.5 * np.exp(b[:, 2] / hs) * a[:, 2]).astype(F)
    half_w = (0.5 * np.exp(b[:, 3] / ws) * a[:, 3]).astype(F)
    return np.stack([ycenter - half_h, xcenter - half_w, ycenter + half_h, xcenter + half_w], axis=1).astype(F)


def _iou(box_i, box_j) -> F:
    area_i = F(F(box_i[2] - box_i[0]) * F(box_i[3] - box_i[1]))
    area_j = F(F(box_j[2] - box_j[0]) * F(box_j[3] - box_j[1]))
    if area_i <= 0 or area_j <= 0:
        return F(0)
    height = max(F(min(box_i[2], box_j[2]) - max(box_i[0], box_j[0])), F(0))
    width = max(F(min(box_i[3], box_j[3]) - max(box_i[1], box_j[1])), F(0))
    intersection = F(height * width)
    return F(intersection / F(F(area_i + area_j) - intersection))


def _decreasing(values: np.ndarray) -> np.ndarray:
    """Indices by decreasing value, ties in index order."""
    return np.argsort(-np.asarray(values, F), kind="stable")


def _suppress(corners, scores, attrs, limit: int) -> list[int]:
    """NonMaxSuppressionSingleClassHelper: the anchors kept, best first."""
    threshold, iou = F(attrs["score_threshold"]), F(attrs["iou_threshold"])
    kept = np.flatnonzero(scores >= threshold)
    order = kept[_decreasing(scores[kept])]
    active = np.ones(len(order), bool)
    selected = []
    for i in range(len(order)):
        if not active.any() or len(selected) >= min(len(order), limit):
            break
        if not active[i]:
            continue
        selected.append(int(order[i]))
        active[i] = False
        for j in range(i + 1, len(order)):
            if active[j] and _iou(corners[order[i]], corners[order[j]]) > iou:
                active[j] = False
    return selected


def postprocess(boxes, scores, anchors, attrs) -> np.ndarray:
    """One row: the flat result (boxes, classes, scores of every slot, then the count)."""
    boxes, scores, anchors = (np.asarray(v, F) for v in (boxes, scores, anchors))
    boxes, scores = boxes.reshape(boxes.shape[-2:]), scores.reshape(scores.shape[-2:])
    corners = decode(boxes, anchors, attrs["scales"])
    classes = int(attrs["num_classes"])
    offset = scores.shape[1] - classes
    slots = int(attrs["slots"])
    out_boxes, out_classes, out_scores = np.zeros((slots, 4), F), np.zeros(slots, F), np.zeros(slots, F)
    if int(attrs["use_regular_nms"]):
        best_index, best_score = np.zeros(0, np.int64), np.zeros(0, F)
        limit = int(attrs["max_detections"])
        for c in range(classes):
            column = scores[:, c + offset]
            chosen = _suppress(corners, column, attrs, int(attrs["detections_per_class"]))
            index = np.concatenate([best_index, np.asarray(chosen, np.int64) * scores.shape[1] + c + offset])
            value = np.concatenate([best_score, column[chosen]]).astype(F)
            order = _decreasing(value)[:min(len(value), limit)]
            best_index, best_score = index[order], value[order]
        count = len(best_index)
        for k in range(min(count, slots)):
            anchor = int(best_index[k]) // scores.shape[1]
            out_boxes[k] = corners[anchor]
            out_classes[k] = best_index[k] - anchor * scores.shape[1] - offset
            out_scores[k] = best_score[k]
    else:
        per_anchor = min(int(attrs["max_classes_per_detection"]), classes)
        ranked = [_decreasing(row[offset:])[:per_anchor] for row in scores]
        best = np.asarray([scores[r, offset + ranked[r][0]] for r in range(len(scores))], F)
        chosen = _suppress(corners, best, attrs, int(attrs["max_detections"]))
        count = 0
        for anchor in chosen:
            for c in ranked[anchor]:
                if count < slots:
                    out_boxes[count], out_classes[count] = corners[anchor], c
                    out_scores[count] = scores[anchor, offset + c]
                count += 1
    return np.concatenate([out_boxes.reshape(-1), out_classes, out_scores, [F(count)]]).astype(F)


def _rows(ins, batched):
    return [np.asarray(v) if b else np.asarray(v)[None] for v, b in zip(ins, batched)]


def _evaluate_rows(ins, batched, attrs, n, rank):
    boxes, scores, anchors = _rows(ins, batched)
    rows = max(len(boxes), len(scores))
    return np.stack([postprocess(boxes[r if len(boxes) > 1 else 0], scores[r if len(scores) > 1 else 0],
                                 anchors[0], attrs) for r in range(rows)]).astype(np.float64)


C_HELPERS = """\
static float @dpp_iou(const float *a, const float *b)
{
    const float area_a = (a[2] - a[0]) * (a[3] - a[1]), area_b = (b[2] - b[0]) * (b[3] - b[1]);
    float h, w, inter;
    if (area_a <= 0.0f || area_b <= 0.0f)
        return 0.0f;
    h = (a[2] < b[2] ? a[2] : b[2]) - (a[0] > b[0] ? a[0] : b[0]);
    w = (a[3] < b[3] ? a[3] : b[3]) - (a[1] > b[1] ? a[1] : b[1]);
    h = h > 0.0f ? h : 0.0f;
    w = w > 0.0f ? w : 0.0f;
    inter = h * w;
    return inter / (area_a + area_b - inter);
}

/* indices[0..n) by decreasing values[indices[k]], ties in the order given: a stable merge sort through scratch */
static void @dpp_sort(const float *values, int *indices, int *scratch, int n)
{
    int width, lo, i;
    for (width = 1; width < n; width *= 2) {
        for (lo = 0; lo < n; lo += 2 * width) {
            const int mid = lo + width < n ? lo + width : n, hi = lo + 2 * width < n ? lo + 2 * width : n;
            int l = lo, r = mid, k = lo;
            while (k < hi)
                scratch[k++] = (l < mid && (r >= hi || !(values[indices[r]] > values[indices[l]]))) ? indices[l++]
                                                                                                  : indices[r++];
        }
        for (i = 0; i < n; ++i)
            indices[i] = scratch[i];
    }
}

/* NonMaxSuppressionSingleClassHelper: the anchors kept (best first) into selected; their count */
static int @dpp_suppress(const float *corners, const float *scores, int n, float threshold, float iou, int limit,
                         int *order, int *scratch, unsigned char *active, int *selected)
{
    int kept = 0, chosen = 0, live, i, j;
    for (i = 0; i < n; ++i)
        if (scores[i] >= threshold)
            order[kept++] = i;
    @dpp_sort(scores, order, scratch, kept);
    for (i = 0; i < kept; ++i)
        active[i] = 1;
    live = kept;
    for (i = 0; i < kept; ++i) {
        if (live == 0 || chosen >= (kept < limit ? kept : limit))
            break;
        if (!active[i])
            continue;
        selected[chosen++] = order[i];
        active[i] = 0;
        --live;
        for (j = i + 1; j < kept; ++j)
            if (active[j] && @dpp_iou(corners + 4 * order[i], corners + 4 * order[j]) > iou) {
                active[j] = 0;
                --live;
            }
    }
    return chosen;
}
"""


def _c(em, node) -> list[str]:
    boxes_name, scores_name, anchors_name = node.inputs
    boxes, scores = em.graph.type(boxes_name), em.graph.type(scores_name)
    n, depth, columns = boxes.shape[1], boxes.shape[2], scores.shape[2]
    a = node.attrs
    classes, slots = int(a["num_classes"]), int(a["slots"])
    offset = columns - classes
    ys, xs, hs, ws = (repr(float(F(s))) for s in a["scales"])
    threshold, iou = f"{float(F(a['score_threshold'])):.9g}f", f"{float(F(a['iou_threshold'])):.9g}f"
    c_helper(em, "dpp_helpers", C_HELPERS)
    sort_fn, suppress_fn = em.sym("dpp_sort"), em.sym("dpp_suppress")
    y = em.var(node.name)
    box, score, anchor = (lambda k: em.at(boxes_name, k)), (lambda k: em.at(scores_name, k)), \
        (lambda k: em.at(anchors_name, k))
    limit = int(a["max_detections"])
    wide = max(n + limit, classes, 1)  # the sorts' arrays: anchors, classes, or the best so far and a class's
    lines = ["{",
             f"    static float corners[{4 * n}], column[{max(n, limit)}], values[{wide}];",
             f"    static int order[{wide}], scratch[{wide}], selected[{max(n, limit)}], "
             f"ranked[{max(n * classes, n + limit)}];",
             f"    static unsigned char active[{n}];",
             "    int count = 0, chosen, i, k, e;",
             f"    for (i = 0; i < {slots * 6 + 1}; ++i)",
             f"        {y}[i] = 0.0f;",
             f"    for (i = 0; i < {n}; ++i) {{  /* decode in double, as the kernel */",
             f"        const double ah = (double){anchor('4 * i + 2')}, aw = (double){anchor('4 * i + 3')};",
             f"        const float yc = (float)((double){box(f'{depth} * i')} / {ys} * ah + "
             f"(double){anchor('4 * i')});",
             f"        const float xc = (float)((double){box(f'{depth} * i + 1')} / {xs} * aw + "
             f"(double){anchor('4 * i + 1')});",
             f"        const float hh = (float)(0.5 * exp((double){box(f'{depth} * i + 2')} / {hs}) * ah);",
             f"        const float hw = (float)(0.5 * exp((double){box(f'{depth} * i + 3')} / {ws}) * aw);",
             "        corners[4 * i] = yc - hh;",
             "        corners[4 * i + 1] = xc - hw;",
             "        corners[4 * i + 2] = yc + hh;",
             "        corners[4 * i + 3] = xc + hw;",
             "    }"]
    store = [f"            for (e = 0; e < 4; ++e) {y}[4 * count + e] = corners[4 * anchor_index + e];",
             f"            {y}[{4 * slots} + count] = (float)class_index;",
             f"            {y}[{5 * slots} + count] = value;"]
    if int(a["use_regular_nms"]):
        lines += ["    {",
                  "        int best = 0, c;",
                  f"        for (c = 0; c < {classes}; ++c) {{",
                  f"            for (i = 0; i < {n}; ++i) column[i] = {score(f'{columns} * i + c + {offset}')};",
                  f"            chosen = {suppress_fn}(corners, column, {n}, {threshold}, {iou}, "
                  f"{int(a['detections_per_class'])}, order, scratch, active, selected);",
                  "            for (i = 0; i < chosen; ++i) {",
                  f"                ranked[best + i] = selected[i] * {columns} + c + {offset};",
                  "                values[best + i] = column[selected[i]];",
                  "            }",
                  "            for (i = 0; i < best + chosen; ++i) order[i] = i;",
                  f"            {sort_fn}(values, order, scratch, best + chosen);",
                  f"            best = best + chosen < {limit} ? best + chosen : {limit};",
                  "            for (i = 0; i < best; ++i) {",
                  "                selected[i] = ranked[order[i]];",
                  "                column[i] = values[order[i]];",
                  "            }",
                  "            for (i = 0; i < best; ++i) {",
                  "                ranked[i] = selected[i];",
                  "                values[i] = column[i];",
                  "            }",
                  "        }",
                  "        for (count = 0; count < best; ++count) {",
                  f"            const int anchor_index = ranked[count] / {columns};",
                  f"            const int class_index = ranked[count] - anchor_index * {columns} - {offset};",
                  "            const float value = values[count];",
                  f"            if (count >= {slots}) continue;",
                  *["    " + line for line in store],
                  "        }",
                  "    }"]
    else:
        per_anchor = min(int(a["max_classes_per_detection"]), classes)
        lines += [f"    for (i = 0; i < {n}; ++i) {{  /* each anchor's best classes */",
                  f"        for (k = 0; k < {classes}; ++k) {{",
                  f"            values[k] = {score(f'{columns} * i + {offset} + k')};",
                  "            order[k] = k;",
                  "        }",
                  f"        {sort_fn}(values, order, scratch, {classes});",
                  f"        for (k = 0; k < {per_anchor}; ++k) ranked[{per_anchor} * i + k] = order[k];",
                  "        column[i] = values[order[0]];",
                  "    }",
                  f"    chosen = {suppress_fn}(corners, column, {n}, {threshold}, {iou}, {limit}, order, scratch, "
                  "active, selected);",
                  "    for (i = 0; i < chosen; ++i)",
                  f"        for (k = 0; k < {per_anchor}; ++k, ++count) {{",
                  "            const int anchor_index = selected[i];",
                  f"            const int class_index = ranked[{per_anchor} * anchor_index + k];",
                  f"            const float value = {score(f'{columns} * anchor_index + {offset} + class_index')};",
                  f"            if (count >= {slots}) continue;",
                  *store,
                  "        }"]
    lines += [f"    {y}[{6 * slots}] = (float)count;", "    (void)k;", "}"]
    return lines


register_op(OpDef(
    "detection_postprocess", 3, _infer, lambda xs, attrs: postprocess(*xs, attrs).astype(np.float64), ATTRS,
    "TFLite's DETECTION_POSTPROCESS (SSD box decoding and non-maximum suppression, fast or regular), float32: one "
    "flat result of boxes, classes, scores and the count",
    evaluate_rows=_evaluate_rows,
    c={"float": _c},
    unsupported={"interval": NO_RANGES, "acc_bound": NO_ACCUMULATOR, "fixed": "float32 only",
                 "c_fixed": "float32 only"}))


@tflite_custom("TFLite_Detection_PostProcess", inputs=(3, 3), outputs=(4, 4))
def lower_tflite(low, options, ins, outs) -> None:
    anchors = low.tensors[ins[2]]
    need(anchors.data is not None, "DETECTION_POSTPROCESS: the anchors must be a constant tensor")
    for key in ("max_detections", "max_classes_per_detection", "num_classes", "nms_score_threshold",
                "nms_iou_threshold", "y_scale", "x_scale", "h_scale", "w_scale"):
        need(key in options, f"DETECTION_POSTPROCESS: custom option {key!r} is missing")
    need(bool(options.get("use_regular_nms")) or int(options["max_classes_per_detection"]) == 1,
         "DETECTION_POSTPROCESS: fast suppression with max_classes_per_detection "
         f"{options['max_classes_per_detection']}: TFLite Micro's kernel places an anchor's further classes at "
         "slots past them (writing outside its output tensors), so no result can be reproduced; 1 is supported")
    boxes_out = low.tensors[outs[0]]
    slots = math.prod(boxes_out.shape) // 4
    attrs = {"max_detections": int(options["max_detections"]),
             "max_classes_per_detection": int(options["max_classes_per_detection"]),
             "detections_per_class": int(options.get("detections_per_class") or 100),
             "use_regular_nms": int(bool(options.get("use_regular_nms") or False)),
             "score_threshold": float(options["nms_score_threshold"]),
             "iou_threshold": float(options["nms_iou_threshold"]), "num_classes": int(options["num_classes"]),
             "scales": np.asarray([options[k] for k in ("y_scale", "x_scale", "h_scale", "w_scale")], np.float64),
             "slots": slots}
    flat = low.step("detection_postprocess", [low.value(i) for i in ins], attrs, (slots * 6 + 1,), boxes_out,
                    f"{low.name_of(boxes_out)}_all")
    offset = 0
    for o in outs:
        t = low.tensors[o]
        size = math.prod(t.shape)
        low.add("retyped_slice", [flat], {"offset": offset, "shape": list(t.shape)}, t)
        offset += size
    need(offset == slots * 6 + 1, f"DETECTION_POSTPROCESS: outputs of {offset} values for {slots} detection slots")
