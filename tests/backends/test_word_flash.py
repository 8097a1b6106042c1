"""Constants in flash read only as aligned 32-bit words (``CTarget.word_flash``, the ESP8266's irom0): on a host
target with the property on, built and loaded through cffi, every family at every precision predicts and scores
exactly what the same build without it does (and what run_fixed does, for integer builds); every constant array
of the C is read only through the word-read helpers, and is 4-byte aligned and sized to whole words."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tinycc_ml
from tests.conftest import require_target
from tinycc_ml.codegen.word_flash import ELEMENT_BYTES, HELPER_SUFFIX
from tinycc_ml.host.backend import HOST_KERNELS, HostBackend, emit_c
from tinycc_ml.ir.fixed import quantise, run_fixed
from tinycc_ml.target import CTarget, WordFlash, register_backend
from tinycc_ml.testing import FAMILIES, random_inputs, random_model

MLPERF_AD01 = Path(__file__).resolve().parents[2] / "data" / "mlperf-tiny" / "ad01_int8.tflite"


@register_backend
class WordFlashHost(HostBackend):
    """The host target with its constants declared and read as a word-read flash's would be."""

    name = "host-word-flash"
    description = "host C with constants read only as aligned 32-bit words (a test target)"

    def emit(self, graph, prefix, model_description):
        target = CTarget("host-word-flash", kernels=HOST_KERNELS, word_flash=WordFlash())
        return emit_c(graph, prefix, target, model_description)


@pytest.fixture(scope="module", autouse=True)
def host():
    require_target("host")


# ---------------------------------------------------------------- the static checks

# "static const <type> <name>[<n>]<attributes> = {"
DECLARATION = re.compile(r"^static const (\w+) (\w+)\[(\d+)\]([^=\n]*)=", re.M)
ALIAS = re.compile(r"^#define (\w+) (\w+)$", re.M)
STRING_TABLES = re.compile(r"^static const char (?:\*const )?(\w+)\[", re.M)  # read by the caller: not in flash


def constant_arrays(source: str) -> dict[str, tuple[str, int, str]]:
    """symbol -> (element type, length, attributes) of every constant array the source declares."""
    return {name: (ctype, int(n), attrs) for ctype, name, n, attrs in DECLARATION.findall(source)}


def check_word_reads(source: str, prefix: str) -> int:
    """Assert that every constant array is word-aligned and whole words, and appears nowhere but as the address
    of one of its elements inside a word-read helper's call of its element type; the number of reads."""
    source = re.sub(r"/\*.*?\*/", "", source, flags=re.S)  # comments name arrays too
    arrays = constant_arrays(source)
    assert arrays, "no constant array: nothing checked"
    for name, (ctype, n, attrs) in arrays.items():
        assert "aligned(4)" in attrs, f"{name} is not declared 4-byte aligned: {attrs!r}"
        assert n * ELEMENT_BYTES[ctype] % 4 == 0, f"{name}: {n} x {ctype} is not whole words"
    names = dict.fromkeys(arrays)
    names.update({alias: first for alias, first in ALIAS.findall(source) if first in arrays})
    reads = 0
    for name in names:
        ctype = arrays[names[name] or name][0]
        helper = f"{prefix}_flash_{HELPER_SUFFIX[ctype]}(&"
        for m in re.finditer(rf"\b{name}\b", source):
            line = source[source.rfind("\n", 0, m.start()) + 1:source.find("\n", m.end())]
            if DECLARATION.match(line) or ALIAS.match(line):
                continue
            assert source.startswith("[", m.end()) and source[:m.start()].endswith(helper), (
                f"{name} is used other than through {helper}...): {line.strip()}")
            reads += 1
    return reads


def test_the_check_finds_a_plain_read():
    source = ("static const int16_t m_w[2] __attribute__((aligned(4))) = {\n    1, 2\n};\n"
              "int f(int i) { return m_flash_i16(&m_w[i]) + m_w[0]; }\n")
    with pytest.raises(AssertionError, match="m_w is used other than"):
        check_word_reads(source, "m")
    with pytest.raises(AssertionError, match="not whole words"):
        check_word_reads(source.replace("m_w[2]", "m_w[3]"), "m")
    with pytest.raises(AssertionError, match="not declared 4-byte aligned"):
        check_word_reads(source.replace(" __attribute__((aligned(4)))", ""), "m")


# ---------------------------------------------------------------- builds with and without the property

def build(target: str, model, precision: str, X, out: Path):
    return tinycc_ml.compile(model, target=target, precision=precision, name="wf", out_dir=out,
                             calibration=None if precision == "float" else X)


def outputs(result, X):
    predictor = result.load()
    if result.output.input_scale is None:
        return np.asarray(predictor.predict_index(X)), np.asarray(predictor.scores(X))
    scores, predictions = predictor.run_raw(quantise(X, result.output.input_scale, 16).astype(np.int16))
    return np.asarray(predictions), np.asarray(scores)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(family=st.sampled_from(FAMILIES), precision=st.sampled_from(["float", "int16", "int8"]),
       seed=st.integers(0, 2**31 - 1))
def test_word_reads_change_nothing_but_how_constants_are_read(tmp_path_factory, family, precision, seed):
    rng = np.random.default_rng(seed)
    model = random_model(family, rng)
    X = random_inputs(model, rng, 24)
    plain = build("host", model, precision, X, tmp_path_factory.mktemp("plain"))
    words = build("host-word-flash", model, precision, X, tmp_path_factory.mktemp("words"))
    assert check_word_reads(words.files["wf.c"], "wf") > 0
    want, got = outputs(plain, X), outputs(words, X)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1].view(np.uint8), want[1].view(np.uint8))  # float scores bit for bit
    if precision != "float":
        fixed = run_fixed(words.graph, quantise(X, words.output.input_scale, 16).astype(np.int16))
        np.testing.assert_array_equal(got[0], fixed["prediction"])
        np.testing.assert_array_equal(got[1], fixed["scores"])


@pytest.mark.filterwarnings("ignore:The `probability` parameter:FutureWarning")
@pytest.mark.parametrize("precision", ["float", "int16"])
def test_labels_and_platt_tables_are_word_read(tmp_path, precision):
    from sklearn.svm import SVC

    rng = np.random.default_rng(3)
    X = rng.normal(size=(60, 4))
    y = np.array([10, 20, 30])[(X[:, 0] > 0.3).astype(int) + (X[:, 1] > 0).astype(int)]
    clf = SVC(probability=True, random_state=0).fit(X, y)
    words = build("host-word-flash", clf, precision, X, tmp_path / "words")
    plain = build("host", clf, precision, X, tmp_path / "plain")
    source = words.files["wf.c"]
    assert "wf_flash_f32(&wf_platt_a[i])" in source and "wf_flash_i32(&wf_label_table[i])" in source
    check_word_reads(source, "wf")
    Xf = X[:10]
    np.testing.assert_array_equal(words.load().predict(Xf), plain.load().predict(Xf))
    np.testing.assert_array_equal(words.load().predict_proba(Xf), plain.load().predict_proba(Xf))


def test_a_tflite_network_is_word_read(tmp_path):
    model = tinycc_ml.load_model(MLPERF_AD01)
    X = np.random.default_rng(1).integers(-128, 128, size=(3, model.input_dim)).astype(np.int8)
    words = tinycc_ml.compile(model, target="host-word-flash", name="wf", out_dir=tmp_path)
    check_word_reads(words.files["wf.c"], "wf")
    scores, _ = words.load().run_raw(X)
    np.testing.assert_array_equal(scores, model.run_int8(X.reshape(len(X), *model.input_shape)).reshape(len(X), -1))


def test_word_flash_declarations_and_reads():
    flash = WordFlash(".irom.text").for_prefix("m")
    assert flash.attribute == ' __attribute__((section(".irom.text"), aligned(4)))'
    assert flash.read("m_w", "i + 1", "int8_t") == "m_flash_i8(&m_w[i + 1])"
    assert [flash.padded_length(n, "int8_t") for n in (0, 1, 4, 5)] == [4, 4, 4, 8]
    assert [flash.padded_length(n, "int16_t") for n in (1, 2, 3)] == [2, 2, 4]
    assert flash.padded_length(3, "float") == 3
