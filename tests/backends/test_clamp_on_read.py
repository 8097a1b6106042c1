"""The input clamp applied where x is read (no RAM copy of the input): the MCU backend's last resort when
the copy would not fit the chip's RAM. A 784-feature logistic regression is refused without it on the
ATmega328P and now fits 2 KB with its stack; forced on small models (global and per-feature bounds) on
the AVR and the Cortex-M0, batch and streaming are bit-exact with run_fixed and the clamp's vector takes
no arena."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

import tinycc_ml
from tests.backends.test_mcu import check_exact
from tests.conftest import require_target
from tinycc_ml.codegen.backend import get_backend
from tinycc_ml.codegen.emitter import input_clamp
from tinycc_ml.codegen.mcu import emit_mcu
from tinycc_ml.testing import random_model


def test_784_feature_logistic_regression_fits_2kb_of_ram(tmp_path):
    require_target("avr")
    rng = np.random.default_rng(0)
    X = np.clip(rng.normal(100, 60, size=(300, 784)), 0, 255)  # pixel-like
    y = (X[:, :392].mean(axis=1) > X[:, 392:].mean(axis=1)).astype(int) + 2 * (X[:, ::2].mean(axis=1) > 100)
    est = LogisticRegression(max_iter=200).fit(X / 255, y)
    result = tinycc_ml.compile(est, target="avr", precision="int16", calibration=X[:200] / 255, out_dir=tmp_path,
                               name="lr")
    assert [k["kernel"] for k in result.report["kernels"] if k.get("matrix") == "input"] == ["clamp on read"]
    assert "lr_xclamp(" in result.files["lr.c"] and "lr_xchunk" in result.files["lr.c"]  # the on-read kernel
    run = check_exact(result, tmp_path, X[200:204] / 255 * 1.5, target="avr")  # beyond the range: clamped
    assert run.ram_bytes + run.stack_bytes <= 2048


@pytest.mark.parametrize("target, family, clamp", [("avr", "protonn", "per_feature"), ("avr", "knn", "global"),
                                                    ("cortex-m0", "protonn", "per_feature"),
                                                    ("cortex-m0", "linear", "global")])
def test_forced_clamp_on_read_is_bit_exact(target, family, clamp, tmp_path):
    require_target(target)
    rng = np.random.default_rng(3)
    model = random_model(family, rng)
    X = rng.normal(size=(40, model.input_dim))
    result = tinycc_ml.compile(model, target=target, precision="int16", calibration=X, input_clamp=clamp)
    graph = result.graph
    clamp_node = input_clamp(graph)
    assert clamp_node is not None
    backend = get_backend(target)
    out = emit_mcu(graph, "cr", backend.c_target(graph), ["forced clamp on read"], own_x_pages=False,
                   clamp_on_read=True)
    assert f"v_{clamp_node}" not in out.files["cr.c"]  # no copy of the clamped input
    for name, text in out.files.items():
        (tmp_path / name).write_text(text)
    result.output = out  # check_exact reads the prefix, scales and types from here
    check_exact(result, tmp_path, 3 * X[:6], target=target)
    if "cr_feed" in out.files["cr.c"]:
        check_exact(result, tmp_path, 3 * X[:6], target=target, stream=True)
