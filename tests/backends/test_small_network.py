"""The microcontrollers' TFLite layers (codegen/small_network.py): their requantisation, in 32-bit word
operations, gives TFLite's integers (``tflite_arith.multiply_by_quantized_multiplier``) on every edge: the
extremes of int32, multipliers of 0 and near 2^31, every shift from -31 to 31, products of either sign that
are and are not multiples of 2^31. (The layers themselves are held to tflite-micro in the simulators:
tests/backends/test_network_mcu.py.)"""

from __future__ import annotations

import subprocess

import numpy as np

from tests.conftest import require_target
from tinycc_ml.codegen.small_network import requantise_words
from tinycc_ml.ir.ops.tflite_arith import multiply_by_quantized_multiplier


class _Emitter:
    """What requantise_words asks of an emitter."""

    prefix = "t"

    def __init__(self):
        self.helpers: dict[str, str] = {}

    def sym(self, name: str) -> str:
        return f"{self.prefix}_{name}"


def cases() -> np.ndarray:
    rng = np.random.default_rng(35)
    edges = [-(2**31), -(2**31) + 1, -(2**30), -65537, -2, -1, 0, 1, 2, 3, 65535, 2**30 - 1, 2**31 - 1]
    multipliers = [0, 1, 2**30, 2**30 + 1, 1518500250, 2**31 - 2, 2**31 - 1]
    rows = [(x, m, s) for x in edges for m in multipliers for s in (-31, -16, -1, 0, 1, 7, 31)]
    n = 4000
    x = np.concatenate([rng.integers(-(2**31), 2**31, n), rng.integers(-(2**17), 2**17, n),
                        (rng.integers(-(2**20), 2**20, n) << 11)])  # many products landing on multiples of 2^31
    m = np.concatenate([rng.integers(0, 2**31, 2 * n), rng.choice([2**30, 2**31 - 1, 3 << 28], n)])
    s = rng.integers(-31, 32, 3 * n)
    return np.array(rows + list(zip(x.tolist(), m.tolist(), s.tolist())), dtype=np.int64)


def test_requantisation_in_words_is_tflites(tmp_path):
    require_target("host")
    em = _Emitter()
    symbol = requantise_words(em)
    table = cases()
    body = ",\n".join(f"{{{x}LL, {m}LL, {s}}}" for x, m, s in table)
    source = "\n".join([
        "#include <stdint.h>", "#include <stdio.h>", *em.helpers.values(),
        "static const struct { long long x, m; int s; } cases[] = {", body, "};",
        "int main(void)", "{",
        "    for (unsigned i = 0; i < sizeof cases / sizeof cases[0]; ++i)",
        f"        printf(\"%ld\\n\", (long){symbol}((int32_t)cases[i].x, (int32_t)cases[i].m, cases[i].s));",
        "    return 0;", "}", ""])
    (tmp_path / "t.c").write_text(source)
    subprocess.run(["gcc", "-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", "-fsanitize=undefined",
                    "-fno-sanitize-recover", str(tmp_path / "t.c"), "-o", str(tmp_path / "t")], check=True)
    got = np.array(subprocess.run([str(tmp_path / "t")], capture_output=True, text=True, check=True).stdout.split(),
                   dtype=np.int64)
    want = np.array([int(multiply_by_quantized_multiplier(x, m, s)) for x, m, s in table], dtype=np.int64)
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, [(tuple(table[i]), int(got[i]), int(want[i])) for i in bad[:5]]
