"""kNN's fused distance + vote (sqdist_kvote) on the ATmega328P and Cortex-M0 kernels: every segment of
the blocked scan (whole kernel calls, a short call, a partial block), both weight widths, bit-exact with
run_fixed; the static RAM is the same for 53 and 130 training rows."""

from __future__ import annotations

import numpy as np
import pytest

import tinycc_ml
from tests.backends.test_mcu import check_exact
from tests.conftest import require_target
from tinycc_ml.models.knn import KNNClassifier

# 53 = 2 calls of 20 + a call of 2 blocks + 3 rows (AVR); 5 blocks of 9 + 8 rows (M0)
CASES = [("avr", "int", 53), ("avr", "real", 53), ("avr", "real", 130),
         ("cortex-m0", "int", 53), ("cortex-m0", "real", 53), ("cortex-m0", "real", 130)]


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(5)
    y = np.arange(200) % 4
    X = rng.normal(size=(200, 6)) + y[:, None]
    return {"real": X, "int": np.round(np.abs(X) * 3)}, y


@pytest.fixture(scope="module")
def runs(data, tmp_path_factory):
    (Xs, y), out = data, {}
    for target, kind, m in CASES:
        require_target(target)
        X = Xs[kind]
        d = tmp_path_factory.mktemp(f"knn_{target}_{kind}_{m}")
        result = tinycc_ml.compile(KNNClassifier(k=3).fit(X[:m], y[:m]), target=target, precision="int16",
                                   calibration=X[m:], out_dir=d, name="knn")
        out[target, kind, m] = result, check_exact(result, d, X[150:182], target=target), (d / "knn.c").read_text()
    return out


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(map(str, c)))
def test_blocked_scan_is_bit_exact(runs, case):
    result, run, source = runs[case]
    assert [n.op for n in result.graph.nodes()].count("sqdist_kvote") == 1
    assert "knn_knn_acc" in source  # the kernel path, not the shared C
    width = 8 if case[1] == "int" else 16  # small integers have 8 significant bits: 8-bit weights
    assert f"knn{width}[" in source


@pytest.mark.parametrize("target", ["avr", "cortex-m0"])
def test_static_ram_does_not_grow_with_the_training_rows(runs, target):
    small, large = runs[target, "real", 53][1], runs[target, "real", 130][1]
    assert small.ram_bytes == large.ram_bytes
    assert large.flash_bytes > small.flash_bytes
