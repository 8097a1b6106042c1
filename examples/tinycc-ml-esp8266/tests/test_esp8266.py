"""The ESP8266 backend against tinycc-ml's conformance checks, as any plug-in's tests would run them, and its
constants: in the irom0 flash window, read only through the word-read helpers, as aligned 32-bit loads."""

from __future__ import annotations

import os
import re
import subprocess

import numpy as np
import pytest
from sklearn.linear_model import RidgeClassifier
from tinycc_ml_esp8266 import FLASH_BASE, FLASH_SIZE, IROM_SECTION

import tinycc_ml
from tinycc_ml.target import ToolchainError, available_backends, get_backend, support_file
from tinycc_ml.testing import FAMILIES, check_model, check_target, random_inputs, random_model


@pytest.fixture(scope="module")
def toolchain():
    try:
        get_backend("esp8266").require_tools()
    except ToolchainError as exc:
        if os.environ.get("TINYCC_ML_REQUIRE_TOOLCHAINS"):
            raise
        pytest.skip(str(exc))


def test_registered_through_its_entry_point():
    assert "esp8266" in available_backends()
    backend = get_backend("esp8266")
    assert {"simulate", "load"} & backend.capabilities() == {"simulate"}
    assert backend.precisions == ("int16", "int8")


def test_conformance(toolchain, tmp_path):
    report = check_target("esp8266", tmp_path, seeds=(0,))
    # every family at both integer precisions, plus the symbol and size checks
    assert len(report.cases) == len(FAMILIES) * 2 + 2
    assert not report.not_applicable


def test_instructions_are_counted_exactly(toolchain, tmp_path):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 40))
    model = RidgeClassifier().fit(X, np.arange(60) % 3)  # a dense 3 x 40 weight matrix
    X = X[:20]
    result = tinycc_ml.compile(model, target="esp8266", precision="int16", calibration=X, out_dir=tmp_path, name="lin")
    run = get_backend("esp8266").simulate(tmp_path, result.output, X)
    # a dense mat-vec takes the same path on every row but the argmax's: counts differ by its few instructions,
    # and grow with the 120 multiply-accumulates; the same firmware counts the same again
    assert run.instructions.min() > 120 and run.instructions.max() - run.instructions.min() < 20
    again = get_backend("esp8266").simulate(tmp_path, result.output, X)
    np.testing.assert_array_equal(again.instructions, run.instructions)
    assert run.model_flash_bytes < run.flash_bytes


def symbols(elf: str) -> dict[str, tuple[int, int, str]]:
    """name -> (address, size, section) of the ELF's data objects."""
    text = subprocess.run(["xtensa-lx106-elf-objdump", "-t", elf], check=True, capture_output=True, text=True).stdout
    found = {}
    for line in text.splitlines():  # "3ffe8000 l     O .bss\t00000010 name"
        m = re.match(r"([0-9a-f]{8}) .* O (\S+)\s+([0-9a-f]+) (\S+)$", line)
        if m:
            found[m[4]] = (int(m[1], 16), int(m[3], 16), m[2])
    return found


@pytest.mark.parametrize("family, precision", [("trees", "int16"), ("protonn", "int8"), ("mlp", "int8")])
def test_constants_are_in_irom_and_only_word_read(toolchain, tmp_path, family, precision):
    rng = np.random.default_rng(4)
    model = random_model(family, rng)
    X = random_inputs(model, rng, 16)
    check_model("esp8266", model, X, precision, tmp_path)  # bit-exact in QEMU, as built below
    source = (tmp_path / "conf.c").read_text()
    arrays = re.findall(r"^static const (\w+) (conf_\w+)\[(\d+)\] __attribute__\(\(section\(\"([^\"]+)\"\), "
                        r"aligned\(4\)\)\) =", source, re.M)
    assert arrays and {section for *_, section in arrays} == {IROM_SECTION}
    # in the C: no array is read but through a helper loading its aligned word
    code = re.sub(r"/\*.*?\*/", "", source, flags=re.S)
    for _, name, _, _ in arrays:
        for m in re.finditer(rf"\b{name}\b", code):
            line = code[code.rfind("\n", 0, m.start()) + 1:code.find("\n", m.end())]
            assert line.startswith(("static const", "#define")) or re.search(
                rf"conf_flash_(i8|u8|i16|u16|i32|u32|f32)\(&{name}\[", line), line
    # linked by the package's script with the board file and a main calling the model: every constant array at a
    # word-aligned address of the irom0 window, whole words long
    backend = get_backend("esp8266")
    assert backend.chip.ldflags[0] == backend.chip.cflags[0]  # the specs file, given once below
    (tmp_path / "main.c").write_text(f'#include "conf.h"\nstatic int16_t x[{model.input_dim}];\n'
                                     "int main(void) { return conf_predict(x); }\n")
    elf = tmp_path / "conf.elf"
    board = support_file("board_lx106.c", package="tinycc_ml_esp8266")
    subprocess.run(["xtensa-lx106-elf-gcc", *backend.chip.cflags, *backend.chip.ldflags[1:], f"-I{tmp_path}",
                    tmp_path / "main.c", tmp_path / "conf.c", board, "-o", elf, "-lm"], check=True)
    placed = symbols(str(elf))
    assert any(name in placed for _, name, _, _ in arrays)
    for _, name, _, _ in arrays:
        if name in placed:  # (one the linker collected as unused is not in the firmware)
            address, size, _ = placed[name]
            assert FLASH_BASE <= address < FLASH_BASE + FLASH_SIZE and address % 4 == 0 and size % 4 == 0, name
