"""The AVR (simavr), Cortex-M0 (QEMU, unicorn), Cortex-M4 and M33 (QEMU) runners, checked on tiny
hand-written C models."""

from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import REQUIRE_ENV, require_target
from tinycc_ml.errors import ToolchainError
from tinycc_ml.runtime import toolchains
from tinycc_ml.runtime.simulate import firmware_sizes, run_on_target

D, L, N = 64, 3, 200
TARGETS = ["avr", "cortex-m0", "cortex-m4", "cortex-m33"]

# Weights live in flash on the AVR (PROGMEM), plain const on the M0.
PROLOGUE = """#include "{name}.h"
#ifdef __AVR__
#include <avr/pgmspace.h>
#define RD16(p) ((int16_t)pgm_read_word(p))
#define RDF(p) pgm_read_float(p)
#else
#define PROGMEM
#define RD16(p) (*(p))
#define RDF(p) (*(p))
#endif
"""

INT_MODEL = """
static const int16_t W[{L}][{D}] PROGMEM = {{{rows}}};
void dot_scores(const int16_t *x, int32_t *scores)
{{
    for (int r = 0; r < {L}; r++) {{
        uint32_t acc = 0; /* wraps like the int32 reference, without signed-overflow UB */
        for (int i = 0; i < {D}; i++)
            acc += (uint32_t)((int32_t)RD16(&W[r][i]) * x[i]);
        scores[r] = (int32_t)acc;
    }}
}}
int dot_predict(const int16_t *x)
{{
    int32_t s[{L}];
    dot_scores(x, s);
    int best = 0;
    for (int r = 1; r < {L}; r++)
        if (s[r] > s[best])
            best = r;
    return best;
}}
"""

FLOAT_MODEL = """
static const float W[{L}][{D}] PROGMEM = {{{rows}}};
void fdot_scores(const float *x, float *scores)
{{
    for (int r = 0; r < {L}; r++) {{
        float acc = 0.0f;
        for (int i = 0; i < {D}; i++)
            acc += RDF(&W[r][i]) * x[i];
        scores[r] = acc;
    }}
}}
int fdot_predict(const float *x)
{{
    float s[{L}];
    fdot_scores(x, s);
    int best = 0;
    for (int r = 1; r < {L}; r++)
        if (s[r] > s[best])
            best = r;
    return best;
}}
"""

TINY_MODEL = """
int tiny_predict(const int16_t *x) { (void)x; return 0; }
void tiny_scores(const int16_t *x, int32_t *s) { s[0] = x[0]; }
"""

HANG_MODEL = """
int hang_predict(const int16_t *x) { volatile int k = 1; while (k) {} return x[0]; }
void hang_scores(const int16_t *x, int32_t *s) { s[0] = x[0]; }
"""


def write_model(tmp_path, name, in_t, score_t, body):
    header = tmp_path / f"{name}.h"
    header.write_text(f"#ifndef {name.upper()}_H\n#define {name.upper()}_H\n#include <stdint.h>\n"
                      f"int {name}_predict(const {in_t} *x);\n"
                      f"void {name}_scores(const {in_t} *x, {score_t} *scores);\n#endif\n")
    src = tmp_path / f"{name}.c"
    src.write_text(PROLOGUE.format(name=name) + body)
    return [str(src)], str(header)


def c_rows(w, fmt):
    return ",".join("{" + ",".join(fmt(v) for v in row) + "}" for row in w)


@pytest.fixture(scope="module")
def int_model(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("int_model")
    rng = np.random.default_rng(7)
    w = rng.integers(-32768, 32768, (L, D))
    x = rng.integers(-32768, 32768, (N, D)).astype(np.int16)
    ref = (x.astype(np.int64) @ w.T.astype(np.int64) + 2**31) % 2**32 - 2**31
    srcs, header = write_model(tmp, "dot", "int16_t", "int32_t",
                               INT_MODEL.format(L=L, D=D, rows=c_rows(w, str)))
    return srcs, header, x, ref.astype(np.int32)


@pytest.fixture(scope="module")
def float_model(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("float_model")
    rng = np.random.default_rng(8)
    w = rng.normal(size=(L, D)).astype(np.float32)
    x = rng.normal(size=(N, D)).astype(np.float32)
    acc = np.zeros((N, L), np.float32)
    for i in range(D):  # same order and float32 rounding as the C loop
        acc = acc + w[:, i][None, :] * x[:, i][:, None]
    srcs, header = write_model(tmp, "fdot", "float", "float",
                               FLOAT_MODEL.format(L=L, D=D, rows=c_rows(w, lambda v: float(v).hex())))
    return srcs, header, x, acc


@pytest.mark.toolchain
@pytest.mark.parametrize("target", TARGETS)
def test_int16_model_exact_and_repeatable(target, int_model):
    require_target(target)
    srcs, header, x, ref = int_model
    run = run_on_target(target, srcs, header, "dot", x, L, "int16_t", "int32_t")
    assert run.scores.dtype == np.int32 and run.scores.shape == (N, L)
    np.testing.assert_array_equal(run.scores, ref)
    np.testing.assert_array_equal(run.predictions, ref.argmax(axis=1))
    counts = run.cycles if target == "avr" else run.instructions
    other = run.instructions if target == "avr" else run.cycles
    assert other is None
    assert counts.shape == (N,) and (counts > 0).all()
    # 2 rows x 64 MACs at least a few cycles/instructions each
    assert counts.min() > 3 * D
    again = run_on_target(target, srcs, header, "dot", x[:20], L, "int16_t", "int32_t")
    np.testing.assert_array_equal(again.cycles if target == "avr" else again.instructions, counts[:20])
    assert again.stack_bytes == run.stack_bytes
    assert 2 <= run.stack_bytes < 256
    assert 0 < run.model_flash_bytes <= run.flash_bytes and run.ram_bytes > 0
    assert run.model_flash_bytes >= L * D * 2  # the weight table
    sizes = firmware_sizes(target, srcs, header, "dot", D, L, "int16_t", "int32_t")
    assert (sizes.flash_bytes, sizes.ram_bytes) == (run.flash_bytes, run.ram_bytes)
    assert sizes.model_flash_bytes == run.model_flash_bytes


@pytest.mark.toolchain
@pytest.mark.parametrize("target", TARGETS)
def test_float_model_exact(target, float_model):
    require_target(target)
    srcs, header, x, ref = float_model
    run = run_on_target(target, srcs, header, "fdot", x, L, "float", "float")
    assert run.scores.dtype == np.float32
    np.testing.assert_array_equal(run.scores, ref)
    np.testing.assert_array_equal(run.predictions, ref.argmax(axis=1))


@pytest.mark.toolchain
@pytest.mark.parametrize("target, expected", [("avr", 6), ("cortex-m0", 2), ("cortex-m4", 2),
                                                      ("cortex-m33", 2)])
def test_counts_are_exactly_the_callee(target, expected, tmp_path):
    # AVR: ldi, ldi, ret = 1 + 1 + 4 cycles; M0, M4, M33: movs, bx = 2 instructions
    require_target(target)
    srcs, header = write_model(tmp_path, "tiny", "int16_t", "int32_t", TINY_MODEL)
    x = np.arange(6, dtype=np.int16).reshape(3, 2)
    run = run_on_target(target, srcs, header, "tiny", x, 1, "int16_t", "int32_t")
    counts = run.cycles if target == "avr" else run.instructions
    assert counts.tolist() == [expected] * 3
    assert run.scores[:, 0].tolist() == [0, 2, 4]


@pytest.mark.toolchain
def test_m0_qemu_and_unicorn_agree(int_model):
    require_target("cortex-m0", "qemu")
    require_target("cortex-m0", "unicorn")
    srcs, header, x, ref = int_model
    runs = [run_on_target("cortex-m0", srcs, header, "dot", x[:40], L, "int16_t", "int32_t", m0_method=m)
            for m in ("qemu", "unicorn")]
    assert [r.method for r in runs] == ["qemu", "unicorn"]
    for r in runs:
        np.testing.assert_array_equal(r.scores, ref[:40])
    np.testing.assert_array_equal(runs[0].instructions, runs[1].instructions)
    assert runs[0].stack_bytes == runs[1].stack_bytes


@pytest.mark.toolchain
@pytest.mark.parametrize("target, method", [("avr", "auto"), ("cortex-m0", "unicorn"), ("cortex-m0", "qemu"),
                                            ("cortex-m4", "qemu")])
def test_hang_is_an_error(target, method, tmp_path):
    require_target(target, method)
    srcs, header = write_model(tmp_path, "hang", "int16_t", "int32_t", HANG_MODEL)
    x = np.zeros((2, 4), np.int16)
    with pytest.raises(ToolchainError):
        run_on_target(target, srcs, header, "hang", x, 1, "int16_t", "int32_t", m0_method=method,
                      max_cycles_per_inference=200_000, timeout=1.5)


def test_missing_tools_name_debian_packages(monkeypatch, tmp_path, int_model):
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty directory: nothing is found
    with pytest.raises(ToolchainError, match="gcc-avr"):
        toolchains.find_tool("avr-gcc")
    with pytest.raises(ToolchainError, match="qemu-system-arm"):
        toolchains.find_tool("qemu-system-arm")
    assert not toolchains.have_target("avr")
    assert not toolchains.have_target("cortex-m0")
    srcs, header, x, _ = int_model
    with pytest.raises(ToolchainError, match="apt-get install"):
        run_on_target("avr", srcs, header, "dot", x[:2], L, "int16_t", "int32_t")
    with pytest.raises(ToolchainError, match="gcc-arm-none-eabi"):
        run_on_target("cortex-m0", srcs, header, "dot", x[:2], L, "int16_t", "int32_t")


def test_require_target_skips_or_fails(monkeypatch):
    def missing(target, m0_method="auto"):
        raise ToolchainError("avr-gcc not found; install gcc-avr")

    monkeypatch.setattr(toolchains, "require_target", missing)
    monkeypatch.delenv(REQUIRE_ENV, raising=False)
    with pytest.raises(pytest.skip.Exception, match="gcc-avr"):
        require_target("avr")
    monkeypatch.setenv(REQUIRE_ENV, "1")
    with pytest.raises(pytest.fail.Exception, match="gcc-avr"):
        require_target("avr")


@pytest.mark.toolchain
def test_avr_simulator_per_chip(int_model):
    """The ATmega1284P simulator (tinycc_ml.avr.chips.ATMEGA1284P: same core, 128 KB flash) runs the same firmware
    with the same cycle counts as the ATmega328P one; its own flags and sizes come from its Chip."""
    require_target("avr")
    srcs, header, x, ref = int_model
    small = run_on_target("avr", srcs, header, "dot", x[:8], L, "int16_t", "int32_t")
    big = run_on_target("avr-atmega1284p", srcs, header, "dot", x[:8], L, "int16_t", "int32_t")
    np.testing.assert_array_equal(big.scores, ref[:8])
    np.testing.assert_array_equal(big.cycles, small.cycles)
    assert big.flash_bytes != small.flash_bytes  # its own vector table and start-up code


@pytest.mark.toolchain
def test_the_avr_profile_takes_the_models_input_type(int_model):
    """The profile sends the rows' bytes: int64 rows of int16 values give the int16 rows' profile, and rows the
    input type cannot hold are refused (they were read as other values)."""
    from tinycc_ml.errors import DataError
    from tinycc_ml.runtime.profile import function_profile

    require_target("avr")
    srcs, header, x, _ = int_model
    want = function_profile("avr", srcs, header, "dot", x[:2], L, "int16_t", "int32_t")
    assert want["dot_scores"] > 3 * D
    assert function_profile("avr", srcs, header, "dot", x[:2].astype(np.int64), L, "int16_t", "int32_t") == want
    with pytest.raises(DataError, match="do not fit"):
        function_profile("avr", srcs, header, "dot", x[:2].astype(np.int64) * 4, L, "int16_t", "int32_t")
