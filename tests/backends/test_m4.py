"""What is particular to the Cortex-M4 target (the shared checks run in test_mcu.py's SPECS and in
test_families_on_targets.py): the SMLAD kernels' flash image read back by streaming, float builds on
the FPU, the per-function profile against QEMU's counts; and the Cortex-M33 variant (MPS2 AN505) on
the same kernels (their firmware projects: tests/glue/test_project.py)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.datasets import load_digits

from tests.backends.test_mcu import SPECS, build, dense_model
from tests.conftest import require_target
from tinycc_ml.arm.m4_kernels import GROUP, MAX_ROWS, GroupedLayout, m4_image, row_blocks
from tinycc_ml.codegen.layouts import Block
from tinycc_ml.ir.fixed import quantise
from tinycc_ml.runtime.profile import function_profile
from tinycc_ml.runtime.simulate import run_on_target


@pytest.fixture(scope="module")
def digits():
    return load_digits(return_X_y=True)


@settings(max_examples=60, deadline=None)
@given(rows=st.integers(1, 13), cols=st.integers(1, 21), wbits=st.sampled_from([8, 16]), seed=st.integers(0, 99))
def test_grouped_image_reads_back_every_element(rows, cols, wbits, seed):
    """The C index streaming's feed() uses for (row, column) finds that element in the kernel's words."""
    lim = 1 << (wbits - 1)
    A = np.random.default_rng(seed).integers(-lim, lim, (rows, cols))
    image, starts = m4_image(A, wbits)
    g = GROUP[wbits]
    elems = image.view("<i2" if wbits == 16 else "i1")
    blocks = row_blocks(rows, MAX_ROWS[wbits])
    assert max(n for _, n in blocks) <= MAX_ROWS[wbits] and sum(n for _, n in blocks) == rows
    layout = GroupedLayout("w", f"int{wbits}_t", tuple(Block(r, n, s * g, g * n, g) for (r, n), s in
                                                       zip(blocks, starts)), group=g)
    for block in layout.blocks:
        index = layout.element(lambda array, i, ctype: i, block)
        py = re.sub(r"\s/\s", " // ", index)
        for q in range(block.count):
            for i in range(cols):
                assert elems[eval(py, {"q": q, "i": i})] == A[block.first + q, i]
    # padding (a partial last group) is zero: it meets x read by halfwords, never past its end
    assert len(image) == sum(n * -(-cols // g) for _, n in blocks)
    assert np.abs(elems.astype(np.int64)).sum() == np.abs(A).sum()


def test_float_build_uses_the_fpu(digits, tmp_path):
    require_target("cortex-m4")
    spec = SPECS["cortex-m4"]
    X, _ = digits
    model = dense_model(digits)
    result, out = build(model, "float", X, tmp_path, target="cortex-m4")
    obj = tmp_path / "pn.o"
    subprocess.run([spec.cc, *spec.cflags, "-c", str(out / "pn.c"), "-o", str(obj)], check=True)
    undefined = subprocess.run([spec.nm, "-u", str(obj)], capture_output=True, text=True, check=True).stdout
    assert "__aeabi_f" not in undefined  # no soft-float routine
    text = subprocess.run(["arm-none-eabi-objdump", "-d", str(obj)], capture_output=True, text=True,
                          check=True).stdout
    assert re.search(r"\tv(mla|fma|mul|add)\.f32", text)
    o = result.output
    x = X[600:700].astype(np.float32)
    run = run_on_target("cortex-m4", [str(out / "pn.c")], str(out / "pn.h"), "pn", x, o.n_scores, o.input_ctype,
                        o.score_ctype)
    want = model.scores(x)
    np.testing.assert_allclose(run.scores, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
    assert np.mean(run.predictions == want.argmax(axis=1)) >= 0.99


def test_profile_sums_to_the_qemu_count_and_names_the_kernels(digits, tmp_path):
    require_target("cortex-m4")
    pytest.importorskip("unicorn")
    X, _ = digits
    result, out = build(dense_model(digits), "int16", X, tmp_path, target="cortex-m4")
    o = result.output
    x = quantise(X[700:702], o.input_scale, 16).astype(np.int16)
    src, hdr = [out / "pn.c"], out / "pn.h"
    run = run_on_target("cortex-m4", src, hdr, "pn", x, o.n_scores, o.input_ctype, o.score_ctype)
    prof = function_profile("cortex-m4", src, hdr, "pn", x, o.n_scores, o.input_ctype, o.score_ctype)
    assert sum(prof.values()) == run.instructions.mean()  # every row takes the same path
    kernels = {f for fs in o.node_functions.values() for f in fs}
    assert kernels and all(prof.get(f, 0) > 0 for f in kernels)
    # the 10 x 64 projection: each word of the image feeds one SMLAD (two MACs), plus x loads and loop
    (w_kernel,) = [f for f in kernels if re.search(r"_64(e\w+)?$", f)]  # e...: the rows' store in the kernel
    assert prof[w_kernel] < 10 * 64


def test_m33_passes_the_conformance_suite(tmp_path):
    """The Cortex-M33 on the M4's kernels: every family's random models bit-exact at int16 and int8, streaming,
    prefixed warning-free C, the size limit (float builds: the firmware projects; the M4 runs test_mcu's SPECS and
    every trained family)."""
    from tinycc_ml.testing import FAMILIES, check_target

    require_target("cortex-m33")
    report = check_target("cortex-m33", tmp_path, seeds=(0,), precisions=("int16", "int8"))
    assert len(report.cases) == len(FAMILIES) * 2 + 2 and not report.not_applicable


@pytest.mark.parametrize("target, chip", [("cortex-m4", "MPS2_AN386"), ("cortex-m33", "MPS2_AN505")])
def test_cmake_toolchain_files_use_the_chips_flags(target, chip):
    from importlib import resources

    from tinycc_ml.arm import chips

    text = Path(resources.files("tinycc_ml.buildsys").joinpath("cmake", f"tinycc-ml-{target}.cmake")).read_text()
    flags = re.search(r'CMAKE_C_FLAGS_INIT "([^"]*)"', text).group(1).split()
    assert flags == list(getattr(chips, chip).cflags)
    ldflags = re.search(r'CMAKE_EXE_LINKER_FLAGS_INIT "([^"]*)"', text).group(1).split()
    assert ldflags == list(getattr(chips, chip).ldflags)

