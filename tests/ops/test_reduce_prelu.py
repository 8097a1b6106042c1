"""reduce_sum, reduce_max and prelu in the project's fixed point (ir/ops/network/reduce.py, prelu.py): each result is
the exact real result rounded to the result's scale (halves up) wherever it does not saturate; and ONNX's Slice,
whose indices the importer clamps as onnxruntime does, against onnxruntime on random starts, ends and steps."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tinycc_ml.ir.fixed import run_fixed
from tinycc_ml.ir.graph import Graph
from tinycc_ml.ir.types import TensorType, fixed

PROPERTY = settings(max_examples=40, deadline=None)


def rounded(real: np.ndarray, scale: int) -> np.ndarray:
    return np.floor(real * 2.0**scale + 0.5)


@PROPERTY
@given(seed=st.integers(0, 2**16), axes=st.sets(st.integers(0, 2), min_size=1), keep=st.integers(0, 1),
       drop=st.integers(0, 6), data=st.data())
def test_a_fixed_point_sum_is_the_exact_sum_rounded(seed, axes, keep, drop, data):
    rng = np.random.default_rng(seed)
    shape = (2, 3, 4)
    x_scale = data.draw(st.integers(4, 12))
    values = rng.integers(-2**12, 2**12, size=(5, *shape))
    g = Graph("sum")
    flat = g.add("input", [], {"name": "x"}, type=TensorType((24,), fixed(16, x_scale)), name="x")
    x = g.add("reshape", [flat], {"shape": list(shape)}, name="x3")
    attrs = {"axes": sorted(axes), "keep_dims": keep}
    for op in ("reduce_sum", "reduce_max"):
        out_scale = x_scale - drop if op == "reduce_sum" else x_scale
        y = g.add(op, [x], attrs, type=TensorType((), fixed(16, out_scale)), name=op)
        g.set_output(op, y)
    got = run_fixed(g, values.reshape(5, -1))
    lead = tuple(a + 1 for a in sorted(axes))
    exact = rounded(values.sum(axis=lead, keepdims=bool(keep)) * 2.0**-x_scale, x_scale - drop)
    inside = np.abs(exact) < 2**15
    np.testing.assert_array_equal(got["reduce_sum"].reshape(exact.shape)[inside], exact[inside])
    np.testing.assert_array_equal(got["reduce_max"].reshape(exact.shape), values.max(axis=lead, keepdims=bool(keep)))


@PROPERTY
@given(seed=st.integers(0, 2**16), slope_scale=st.integers(0, 14), bits=st.sampled_from([8, 16]))
def test_a_fixed_point_prelu_is_the_exact_product_rounded(seed, slope_scale, bits):
    rng = np.random.default_rng(seed)
    top = 2 ** (bits - 1)
    values = rng.integers(-top, top, size=(6, 1, 3, 4))
    slope = rng.integers(-top, top, size=(1, 1, 1, 4))
    g = Graph("prelu")
    x = g.add("input", [], {"name": "x"}, type=TensorType((12,), fixed(bits, 5)), name="x")
    x4 = g.add("reshape", [x], {"shape": [1, 1, 3, 4]}, type=TensorType((1, 1, 3, 4), fixed(bits, 5), "NHWC"))
    alpha = g.add("const", [], {"value": slope}, type=TensorType((1, 1, 1, 4), fixed(bits, slope_scale), "NHWC"))
    g.set_output("y", g.add("prelu", [x4, alpha], {}, name="p"))
    got = run_fixed(g, values.reshape(6, -1))["y"].reshape(values.shape)
    want = np.where(values >= 0, values, np.clip(rounded(values * slope * 2.0**-slope_scale, 0), -top, top - 1))
    np.testing.assert_array_equal(got, want)


@PROPERTY
@given(starts=st.integers(-12, 12), ends=st.integers(-12, 12), step=st.sampled_from([-3, -2, -1, 1, 2, 3]),
       axis=st.sampled_from([1, 2, -1]))
def test_slices_clamp_their_indices_as_onnxruntime_does(starts, ends, step, axis, tmp_path_factory):
    onnxruntime = pytest.importorskip("onnxruntime")
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    import tinycc_ml
    from tinycc_ml.errors import ModelFileError

    inits = [numpy_helper.from_array(np.array([v]), k) for k, v in (("s", starts), ("e", ends), ("a", axis),
                                                                      ("t", step))]
    nodes = [helper.make_node("Slice", ["x", "s", "e", "a", "t"], ["y"], name="slice")]
    graph = helper.make_graph(nodes, "net", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 9])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    path = tmp_path_factory.mktemp("slice") / "s.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    X = np.arange(27, dtype=np.float32).reshape(1, 1, 3, 9) - 13
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    want = session.run(None, {"x": X[0]})[0]
    if want.size == 0:
        with pytest.raises(ModelFileError, match="takes no element of axis"):
            tinycc_ml.load_model(path)
        return
    model = tinycc_ml.load_model(path)
    np.testing.assert_array_equal(model.scores(X.reshape(1, -1)).reshape(-1), want.reshape(-1))
