"""Constant arrays stored once: a table several nodes read (Bonsai's W, V and tanh table at every tree
level) is declared once and aliased; the reported model flash counts it once; output stays byte-identical."""

from __future__ import annotations

import re

import numpy as np
import pytest

import tinycc_ml
from tinycc_ml.models.bonsai import BonsaiModel


@pytest.fixture(scope="module")
def bonsai():
    rng = np.random.default_rng(0)
    d, L, depth = 6, 5, 2
    nodes = 2 ** (depth + 1) - 1
    model = BonsaiModel(rng.normal(size=(d, 12)) / 3, rng.normal(size=(nodes * L, d)), rng.normal(size=(nodes * L, d)),
                        rng.normal(size=(2 ** depth - 1, d)), 1.0, depth)
    return model, rng.normal(size=(200, 12))


@pytest.mark.parametrize("target", ["avr", "cortex-m0", "host"])
def test_tables_every_level_reads_are_stored_once(bonsai, target):
    model, X = bonsai
    a = tinycc_ml.compile(model, target=target, precision="int16", calibration=X, name="bt")
    b = tinycc_ml.compile(model, target=target, precision="int16", calibration=X, name="bt")
    assert a.files == b.files  # byte-identical
    src = a.files["bt.c"]
    arrays = {name: body for name, body in re.findall(r"static const \w+ (bt_\w+)\[\d+\][^=]*= \{\n(.*?)\n\};",
                                                     src, re.S)}
    bodies = list(arrays.values())
    assert len(bodies) == len(set(bodies)), "two arrays with the same elements"
    aliases = dict(re.findall(r"^#define (bt_\w+) (bt_\w+)$", src, re.M))
    assert aliases and all(first in arrays for first in aliases.values())
    for second in ("bt_W_q_1", "bt_V_q_1"):  # the level-1 copies (or their kernel images) are aliases
        assert any(a == second or a.startswith(second + "_") for a in aliases)
    size = {"float": 4, "int32_t": 4, "int16_t": 2, "uint16_t": 2, "int8_t": 1, "uint8_t": 1}
    # the model's constants (the class-label table that add_labels appends is not model flash)
    stored = sum(size[t] * int(n) for t, name, n in re.findall(r"static const (\w+) (bt_\w+)\[(\d+)\]", src)
                 if not name.startswith("bt_label"))
    assert a.output.const_bytes == stored  # the reported flash counts each stored array once, aliases not at all
