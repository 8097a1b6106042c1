"""The "Use in your build" page's snippets (docs/guide/build.md) run as written: its Makefile and build.ninja
fragments and its CMake fragment (for the AVR, through the shipped toolchain file), with `tinycc-ml` on PATH."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from sklearn.datasets import load_digits

from tests.conftest import require_target, require_tools
from tinycc_ml.models.protonn import init_protonn

REPO = Path(__file__).resolve().parents[2]


def section_blocks(language: str) -> list[str]:
    section = (REPO / "docs" / "guide" / "build.md").read_text()
    return re.findall(rf"```{language}\n(.*?)```", section, re.S)


@pytest.fixture
def scratch(tmp_path):
    """A folder with kws.npz, train.npz, models/, data/ and a `tinycc-ml` that runs this checkout."""
    X, y = load_digits(return_X_y=True)
    init_protonn(X[:600], y[:600], projection_dim=8, prototypes_per_class=2).save(tmp_path / "kws.npz")
    np.savez(tmp_path / "train.npz", X_train=X[:600], y_train=y[:600])
    (tmp_path / "models").mkdir()
    (tmp_path / "data").mkdir()
    shutil.copy(tmp_path / "kws.npz", tmp_path / "models" / "kws.npz")
    shutil.copy(tmp_path / "train.npz", tmp_path / "data" / "train.npz")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "tinycc-ml").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m tinycc_ml "$@"\n')
    (bin_dir / "tinycc-ml").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
           "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return tmp_path, env


def run(cmd, cwd, env):
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return proc.stdout


def test_make_and_ninja_snippets(scratch):
    require_tools("make", "ninja")
    tmp, env = scratch
    (make_block,) = section_blocks("make")
    (ninja_block,) = section_blocks("ninja")
    (tmp / "Makefile").write_text(make_block)
    assert "wrote build/kws.c" in run(["make"], tmp, env)
    assert "up to date" in run(["make"], tmp, env)
    shutil.rmtree(tmp / "build")
    (tmp / "build.ninja").write_text(ninja_block)
    run(["ninja"], tmp, env)
    assert (tmp / "build" / "kws.h").is_file()
    assert "no work to do" in run(["ninja"], tmp, env)


def test_cmake_snippet_for_the_avr(scratch):
    require_target("avr")
    require_tools("cmake", "ninja")
    tmp, env = scratch
    (block,) = section_blocks("cmake")
    (tmp / "main.c").write_text('#include "kws.h"\nint main(void) { int16_t x[KWS_INPUT_DIM] = {0}; '
                                "return kws_predict(x) < 0; }\n")
    (tmp / "CMakeLists.txt").write_text("cmake_minimum_required(VERSION 3.20)\nproject(fw C)\n"
                                        "add_executable(firmware main.c)\n" + block)
    folder = run(["tinycc-ml", "cmake-dir"], tmp, env).strip()
    run(["cmake", "-S", ".", "-B", "b", "-G", "Ninja", f"-DCMAKE_TOOLCHAIN_FILE={folder}/tinycc-ml-avr.cmake"],
        tmp, env)
    run(["cmake", "--build", "b"], tmp, env)
    assert "for target avr" in (tmp / "b" / "tinycc_ml" / "kws" / "kws.h").read_text()
    assert "Program:" in run(["avr-size", "-C", "--mcu=atmega328p", "b/firmware"], tmp, env)  # an AVR ELF
    assert "no work to do" in run(["cmake", "--build", "b"], tmp, env)
