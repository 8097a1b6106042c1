"""The task-specific entry points of the generated C: <prefix>_predict_value (regression) and
<prefix>_predict_labels (multilabel, threshold and top-k rules), float and int16, built with gcc
and run on the host against the Python rule applied to the C build's own scores."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

import tinycc_ml
from tinycc_ml.errors import ModelFileError
from tinycc_ml.host.build import HOST_CFLAGS
from tinycc_ml.ir.fixed import quantise
from tinycc_ml.models.base import multilabel_indicator
from tinycc_ml.models.protonn import ProtoNNModel

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not installed")

HARNESS = """
#include <stdio.h>
#include "{p}.h"
static const {x_t} rows[{n}][{d}] = {{ {rows} }};
int main(void)
{{
    int r, l;
    uint8_t out[{L}];
    for (r = 0; r < {n}; r++) {{
#ifdef WANT_LABELS
        {p}_predict_labels(rows[r], out);
        for (l = 0; l < {L}; l++) printf("%d ", out[l]);
#else
        (void)out; (void)l;
        printf("%.9g", (double){p}_predict_value(rows[r]));
#endif
        printf("\\n");
    }}
    return 0;
}}
"""


def run_entry_point(result, X, tmp_path, want_labels: bool) -> np.ndarray:
    out = result.output
    if out.input_scale is not None:
        rows = quantise(X, out.input_scale, 16).astype(np.int16)
        text = ", ".join("{" + ", ".join(str(int(v)) for v in row) + "}" for row in rows)
    else:
        text = ", ".join("{" + ", ".join(f"{float(v)!r}f" for v in np.float32(row)) + "}" for row in X)
    for name, body in result.files.items():
        (tmp_path / name).write_text(body)
    (tmp_path / "main.c").write_text(HARNESS.format(p=result.prefix, x_t=out.input_ctype, n=len(X), d=X.shape[1],
                                                    L=out.n_scores, rows=text))
    exe = tmp_path / "run"
    flags = [*HOST_CFLAGS, *(["-DWANT_LABELS"] if want_labels else [])]
    subprocess.run(["gcc", *flags, "-o", str(exe), str(tmp_path / "main.c"), str(tmp_path / f"{result.prefix}.c"),
                    "-lm"], check=True, capture_output=True, text=True)
    lines = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.splitlines()
    return np.array([[float(v) for v in line.split()] for line in lines])


def random_protonn(n_scores, offset=None, seed=0):
    rng = np.random.default_rng(seed)
    return ProtoNNModel(rng.normal(size=(4, 6)), rng.normal(size=(4, 9)), rng.normal(size=(n_scores, 9)), 0.4,
                        offset=offset)


@pytest.mark.parametrize("precision", ["float", "int16"])
@pytest.mark.parametrize("task", [{"kind": "multilabel", "rule": "top_k", "k": 3},
                                  {"kind": "multilabel", "rule": "threshold", "threshold": 0.25}])
def test_predict_labels_applies_the_rule_to_the_c_scores(task, precision, tmp_path):
    model = random_protonn(7).with_task(task)
    X = np.random.default_rng(1).normal(size=(60, 6))
    result = tinycc_ml.compile(model, precision=precision, calibration=X, name="ml")
    labels = run_entry_point(result, X, tmp_path, want_labels=True)
    scores = result.load().scores(X).astype(np.float64)
    if precision == "int16":
        scores = scores * 2.0 ** -int(result.files["ml.h"].split("ML_SCORE_SCALE ")[1].split()[0])
    np.testing.assert_array_equal(labels, multilabel_indicator(scores, task))
    if task["rule"] == "top_k":
        assert np.all(labels.sum(axis=1) == 3)
    agree = np.mean(np.all(labels == model.predict(X), axis=1))
    assert agree >= (1.0 if precision == "float" else 0.9)


@pytest.mark.parametrize("precision", ["float", "int16"])
def test_predict_value_is_the_regression_output(precision, tmp_path):
    model = random_protonn(1, offset=[40.0]).with_task({"kind": "regression"})
    X = np.random.default_rng(2).normal(size=(40, 6))
    result = tinycc_ml.compile(model, precision=precision, calibration=X, name="rg")
    values = run_entry_point(result, X, tmp_path, want_labels=False)[:, 0]
    header = result.files["rg.h"]
    assert "rg_predict_value" in header and "rg_predict_labels" not in header
    if precision == "int16":
        scale = int(header.split("RG_SCORE_SCALE ")[1].split()[0])
        np.testing.assert_array_equal(values, result.load().scores(X)[:, 0])
        values = values * 2.0**-scale
        np.testing.assert_allclose(values, model.predict(X), atol=0.05)
    else:
        assert "RG_SCORE_SCALE" not in header
        np.testing.assert_allclose(values, model.predict(X), rtol=1e-5)
    assert result.report["task"] == {"kind": "regression"}


def test_task_survives_save_and_load(tmp_path):
    model = random_protonn(5).with_task({"kind": "multilabel", "rule": "threshold", "threshold": 0.5})
    loaded = tinycc_ml.load_model(model.save(tmp_path / "m.npz"))
    assert loaded.task == model.task
    X = np.random.default_rng(3).normal(size=(10, 6))
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))


@pytest.mark.parametrize("task", [{"kind": "ranking"}, {"kind": "multilabel", "rule": "top_k", "k": 0},
                                  {"kind": "multilabel", "rule": "threshold", "threshold": float("nan")}])
def test_bad_task_is_refused(task):
    with pytest.raises(ModelFileError, match="task"):
        random_protonn(3).with_task(task)
