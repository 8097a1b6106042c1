"""Forests on the Cortex-M4/M33 in Thumb-2 assembly (arm/m4_forest.py, kernel trees-asm): predictions and scores
bit for bit the interpreters' in QEMU on rows at every threshold (T - 1, T, T + 1), the missing code and the
extremes, for each form of the sums (words in registers, words in stack slots past 12 outputs, saturated results,
vote counts in bit fields) and for an input that is not word-aligned; the layout's size is the linked
function's."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest
from sklearn.datasets import load_digits, make_classification
from sklearn.ensemble import ExtraTreesClassifier, RandomForestClassifier

import tinycc_ml
from tests.backends.test_forest_asm import edge_rows, kernels
from tests.conftest import require_target
from tinycc_ml.arm import m4_forest
from tinycc_ml.ir.fixed import quantise, run_fixed
from tinycc_ml.runtime.simulate import run_on_target
from tinycc_ml.testing import check_model


@pytest.fixture(scope="module")
def digits():
    X, y = load_digits(return_X_y=True)
    return X[:1200], y[:1200], X[1200:]


def sums_text(result) -> str:
    text = result.files[f"{result.prefix}.c"]
    return text[text.index("__asm__("):]


def test_fifty_trees_in_assembly_on_the_cortex_m4(digits, tmp_path):
    require_target("cortex-m4")
    X, y, X_te = digits
    clf = RandomForestClassifier(n_estimators=50, max_depth=6, random_state=0).fit(X, y)
    r = tinycc_ml.compile(clf, target="cortex-m4", precision="int16", calibration=X, name="m")
    assert kernels(r) == {"trees-asm"}
    text = sums_text(r)
    assert "uadd16" in text and "ldrsh.w r1, [sp, #" in text  # missing values going right: the copy of x - 1
    rows = np.vstack([X_te[:60], edge_rows(clf, X, np.random.default_rng(7), 60)])
    check_model("cortex-m4", clf, rows, "int16", tmp_path, calibration=X)


def test_every_form_of_the_sums(digits, tmp_path):
    """Words in registers, saturated results (SSAT), 20 outputs (8 in stack slots), vote counts in bit fields
    (pure leaves: every value 2^14), two outputs; on the Cortex-M4 and one on the M33."""
    require_target("cortex-m4")
    X, y, X_te = digits
    Xm, ym = make_classification(n_samples=1500, n_features=12, n_informative=10, n_classes=20,
                                 n_clusters_per_class=1, random_state=0)
    Xm = np.round(Xm * 4) / 4
    models = {
        "words": (RandomForestClassifier(n_estimators=10, max_depth=8, random_state=0).fit(X, y), X, X_te, "add"),
        "saturated": (ExtraTreesClassifier(n_estimators=4, max_depth=6, random_state=3).fit(X, y), X, X_te, "ssat"),
        "slots": (RandomForestClassifier(n_estimators=5, max_depth=6, random_state=0).fit(Xm[:1200], ym[:1200]),
                  Xm[:1200], Xm[1200:], "str.n r1, [sp, #"),
        "lanes": (RandomForestClassifier(n_estimators=6, random_state=0).fit(Xm[:1200], ym[:1200]), Xm[:1200],
                  Xm[1200:], "ubfx"),
        "binary": (RandomForestClassifier(n_estimators=3, max_depth=6, random_state=2).fit(X, y % 2), X, X_te,
                   "add"),
    }
    rng = np.random.default_rng(3)
    for name, (clf, A, A_te, mark) in models.items():
        r = tinycc_ml.compile(clf, target="cortex-m4", precision="int16", calibration=A, name="m")
        assert kernels(r) == {"trees-asm"}, name
        assert mark in sums_text(r), name
        rows = np.vstack([A_te[:40], edge_rows(clf, A, rng, 60)])
        check_model("cortex-m4", clf, rows, "int16", tmp_path / name, case=name, calibration=A)
    require_target("cortex-m33")
    clf, A, A_te, _ = models["words"]
    check_model("cortex-m33", clf, np.vstack([A_te[:30], edge_rows(clf, A, rng, 30)]), "int16", tmp_path / "m33",
                case="m33", calibration=A)


def test_odd_width_input_and_int8(digits, tmp_path):
    """Five features, the last tested where missing values go right: its copy a halfword of its own (no word read
    past x's end); an int8 build (int16 inputs) of a digits forest."""
    require_target("cortex-m4")
    rng = np.random.default_rng(0)
    A = np.round(rng.normal(size=(600, 5)) * 4) / 4
    a = (A[:, 4] > 0).astype(int) + (A[:, 0] > 0.5) + 2 * (A[:, 2] > 0)
    clf = RandomForestClassifier(n_estimators=4, max_depth=5, random_state=0).fit(A, a)
    r = tinycc_ml.compile(clf, target="cortex-m4", precision="int16", calibration=A, name="m")
    assert kernels(r) == {"trees-asm"} and "ldrh.w r2, [r0, #8]" in sums_text(r)
    check_model("cortex-m4", clf, np.vstack([A[:30], edge_rows(clf, A, rng, 60)]), "int16", tmp_path / "odd",
                calibration=A)
    X, y, X_te = digits
    forest = RandomForestClassifier(n_estimators=6, max_depth=7, random_state=4).fit(X, y)
    assert kernels(tinycc_ml.compile(forest, target="cortex-m4", precision="int8", calibration=X)) == {"trees-asm"}
    check_model("cortex-m4", forest, np.vstack([X_te[:30], edge_rows(forest, X, rng, 40)]), "int8", tmp_path / "i8",
                calibration=X)


MISALIGNED_H = """#include <stdint.h>
int w_predict(const int16_t *x);
void w_scores(const int16_t *x, int16_t *scores);
"""
MISALIGNED_C = """#include <string.h>
#include "w.h"
#include "m.h"
static int16_t buf[{n} + 2] __attribute__((aligned(4)));
int w_predict(const int16_t *x) {{ memcpy(buf + 1, x, sizeof(int16_t) * {n}); return m_predict(buf + 1); }}
void w_scores(const int16_t *x, int16_t *scores)
{{ memcpy(buf + 1, x, sizeof(int16_t) * {n}); m_scores(buf + 1, scores); }}
"""


def test_input_not_word_aligned(digits, tmp_path):
    """x at 2 mod 4: the copy of x - 1 a word at a time (LDM would fault), the same results."""
    require_target("cortex-m4")
    X, y, X_te = digits
    clf = RandomForestClassifier(n_estimators=8, max_depth=7, random_state=1).fit(X, y)
    r = tinycc_ml.compile(clf, target="cortex-m4", precision="int16", calibration=X, name="m", out_dir=tmp_path)
    assert kernels(r) == {"trees-asm"}
    o = r.output
    (tmp_path / "w.h").write_text(MISALIGNED_H)
    (tmp_path / "w.c").write_text(MISALIGNED_C.format(n=o.input_dim))
    rows = np.vstack([X_te[:30], edge_rows(clf, X, np.random.default_rng(5), 40)])
    x = quantise(rows, o.input_scale, 16).astype(np.int16)
    run = run_on_target("cortex-m4", [str(tmp_path / "m.c"), str(tmp_path / "w.c")], str(tmp_path / "w.h"), "w",
                        x, o.n_scores, o.input_ctype, o.score_ctype)
    want = run_fixed(r.graph, x)
    np.testing.assert_array_equal(np.asarray(run.predictions), want["prediction"])
    np.testing.assert_array_equal(np.asarray(run.scores), want["scores"])


def test_size_is_the_linked_functions(digits, tmp_path):
    """The layout's bytes (the cost model's flash) are the assembled function's, branch forms included."""
    require_target("cortex-m4")
    X, y, _ = digits
    clf = RandomForestClassifier(n_estimators=12, max_depth=8, random_state=0).fit(X, y)
    r = tinycc_ml.compile(clf, target="cortex-m4", precision="int16", calibration=X, name="m", out_dir=tmp_path)
    (report,) = [k for k in r.report["kernels"] if k.get("op") == "tree_ensemble"]
    obj = tmp_path / "m.o"
    subprocess.run(["arm-none-eabi-gcc", "-mcpu=cortex-m4", "-mthumb", "-Os", "-c", str(tmp_path / "m.c"), "-o",
                    str(obj), "-Wall", "-Wextra", "-Werror"], check=True)
    symbols = subprocess.run(["arm-none-eabi-nm", "-S", str(obj)], check=True, capture_output=True, text=True).stdout
    (size,) = [int(line.split()[1], 16) for line in symbols.splitlines() if line.endswith(" m_trees_sums")]
    assert size == report["flash_bytes"]
    assert "b.w" in sums_text(r) and "bgt.n" in sums_text(r)  # both forms taken


def test_immediates():
    assert m4_forest.modified_immediate(0x2E00) and m4_forest.modified_immediate(0xAB00AB00)
    assert not m4_forest.modified_immediate(0x273D) and not m4_forest.modified_immediate(0x1FF01)
    for v in (10045, -10045, 0x7FFF, 65535, 1 << 20 | 3, -1, 255, 4095, 0x12345678):
        ins = m4_forest.add_constant("r8", v)
        total = 0
        for text, _ in ins:
            op, imm = text.split()[0], int(text.split("#")[1])
            total += imm if op.startswith("add") else -imm
        assert (total - v) % 2 ** 32 == 0, v
        assert len(ins) <= (1 if m4_forest.modified_immediate(v) or 0 <= v < 4096 else 4), v
    for u in (-32769, -32768, -5000, -1, 0, 255, 4097, 11775, 32766):
        ins, cond, _ = m4_forest.compare(u)
        assert cond in ("gt", "ge") and 1 <= len(ins) <= 2
