"""The host build cache (issue 10, item 11): it loads only what it built (content hash recorded at
build time, checked before loading), rebuilds broken entries, keys on the compiler and its flags,
and does not use a folder others can write to."""

from __future__ import annotations

import os
import shutil
import subprocess

import numpy as np
import pytest

import tinycc_ml
from tinycc_ml.host import build as host
from tinycc_ml.models.protonn import ProtoNNModel

GCC = shutil.which("gcc")


def fresh_model(seed: int) -> ProtoNNModel:
    rng = np.random.default_rng(seed)
    return ProtoNNModel(rng.normal(size=(3, 4)), rng.normal(size=(3, 5)), rng.normal(size=(2, 5)), 0.7)


def entries(cache) -> list:
    return sorted(p for p in (cache / "host").iterdir() if not p.name.startswith("."))


@pytest.fixture
def cache(tmp_path, monkeypatch, host_target):
    root = tmp_path / "cache"
    monkeypatch.setenv("TINYCC_ML_CACHE", str(root))
    return root


def build_planted_library(path, marker) -> None:
    """A shared library whose ELF constructor leaves a file behind if it is ever loaded."""
    source = path.with_suffix(".c")
    source.write_text(f'#include <stdio.h>\n__attribute__((constructor)) static void planted(void)\n'
                      f'{{ FILE *f = fopen("{marker}", "w"); if (f) fclose(f); }}\n')
    subprocess.run([GCC, "-shared", "-fPIC", "-o", str(path), str(source)], check=True)


def test_planted_library_is_never_loaded(cache, tmp_path):
    model = fresh_model(1)
    X = np.random.default_rng(0).normal(size=(5, 4))
    tinycc_ml.compile(model, name="plant").load()
    (entry,) = entries(cache)
    marker = tmp_path / "planted-ran"
    for library in entry.glob("*.so"):
        library.unlink()
        build_planted_library(library, marker)
    # a new process (this one already holds the module) must rebuild instead of loading it
    code = ("import numpy as np, tinycc_ml\nfrom tests.runtime.test_host_cache import fresh_model\n"
            "m = fresh_model(1)\nX = np.random.default_rng(0).normal(size=(5, 4))\n"
            "assert (tinycc_ml.compile(m, name='plant').load().predict(X) == m.predict(X)).all()\n")
    run = subprocess.run([os.sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ))
    assert run.returncode == 0, run.stderr
    assert not marker.exists()
    assert np.array_equal(tinycc_ml.compile(model, name="plant").load().predict(X), model.predict(X))


def test_entry_without_library_is_rebuilt(cache):
    model = fresh_model(2)
    first = tinycc_ml.compile(model, name="gone")
    first.load()
    (entry,) = entries(cache)
    for library in entry.glob("*.so"):
        library.unlink()
    assert host._verified_library(entry) is None
    header, source = first.files["gone.h"], first.files["gone.c"]
    out = first.output
    for name in [n for n in host.sys.modules if n.startswith("_tinycc_gone_")]:
        del host.sys.modules[name]  # forget the loaded module so the cache is consulted
    module = host.build_host_module(header, source, "gone", out.input_ctype, out.score_ctype)
    assert host._verified_library(entry) is not None
    assert module.lib.gone_predict is not None


def test_key_covers_compiler_and_flags(monkeypatch):
    base = host.compiler_identity()
    monkeypatch.setenv("CFLAGS", "-O0")
    assert host.compiler_identity() != base
    monkeypatch.delenv("CFLAGS")
    monkeypatch.setenv("CC", "clang-does-not-exist")
    changed = host.compiler_identity()
    assert changed != base and any("unavailable" in part for part in changed)
    monkeypatch.delenv("CC")
    if GCC:
        assert any("gcc" in part.lower() or "free software" in part.lower() for part in host.compiler_identity())


def test_shared_cache_folder_is_not_used(cache):
    (cache / "host").mkdir(parents=True)
    os.chmod(cache / "host", 0o777)
    model = fresh_model(3)
    X = np.random.default_rng(0).normal(size=(5, 4))
    assert np.array_equal(tinycc_ml.compile(model, name="shared").load().predict(X), model.predict(X))
    assert entries(cache) == []  # nothing cached where others could swap it
