"""Hostile inputs (issue 10): each numbered finding of the attack, reproduced and now refused
with one tinycc_ml error (or handled), never a traceback, an allocation the file asks for, or C
that does not compile."""

from __future__ import annotations

import io
import json
import os
import re
import signal
import subprocess
import sys
import tracemalloc
import zipfile
from pathlib import Path

import numpy as np
import pytest

import tinycc_ml
from tests.cli_fuzzing import run_cli_inprocess
from tests.conftest import require_target
from tests.models.test_protonn import cli, expect_clean_failure, run_cli_cases
from tinycc_ml.api import load_model
from tinycc_ml.codegen.backend import get_backend
from tinycc_ml.errors import CompileError, DataError, IRError, IRParseError, ModelFileError
from tinycc_ml.importers.edgeml import read_pickled_dict, save_edgeml_protonn
from tinycc_ml.ir.text import parse_graph
from tinycc_ml.ir.verify import verify
from tinycc_ml.models.bonsai import BonsaiModel
from tinycc_ml.models.protonn import ProtoNNModel
from tinycc_ml.models.prototypes import PrototypeModel
from tinycc_ml.models.saved import META_KEY, read_arrays
from tinycc_ml.passes import run_passes


def npy_bytes(array=None, header: bytes | None = None, data: bytes | None = None) -> bytes:
    """A .npy member: numpy's own bytes, or a hand-written header dict and data."""
    if header is None:
        buffer = io.BytesIO()
        np.save(buffer, array, allow_pickle=False)
        return buffer.getvalue()
    header = header + b" " * (-(len(header) + 11) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header + (data or b"")


def write_npz(path: Path, members: dict[str, bytes], compress: bool = False) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


def meta_bytes(header) -> bytes:
    return npy_bytes(np.frombuffer(json.dumps(header).encode(), dtype=np.uint8))


def small_protonn() -> ProtoNNModel:
    rng = np.random.default_rng(0)
    return ProtoNNModel(rng.normal(size=(3, 4)), rng.normal(size=(3, 5)), rng.normal(size=(2, 5)), 0.7)


def model_members(model) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(model_file_bytes(model))) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def model_file_bytes(model) -> bytes:
    buffer = io.BytesIO()
    header = {"format": "tinycc-ml-model", "version": 1, "family": model.family, "meta": model.meta()}
    np.savez(buffer, **model.arrays(), **{META_KEY: np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)})
    return buffer.getvalue()


# ---------------------------------------------------------------- 1. metadata shape, members

GOOD_HEADER = {"format": "tinycc-ml-model", "version": 1, "family": "protonn", "meta": {}}


@pytest.mark.parametrize("header, words", [
    ([1, 2], ["list", "object"]),
    ("protonn", ["str", "object"]),
    (None, ["NoneType", "object"]),
    ({"format": "tinycc-ml-model", "version": 1}, ["family"]),
    ({**GOOD_HEADER, "family": ["protonn"]}, ["family"]),
    ({**GOOD_HEADER, "meta": [1]}, ["meta"]),
], ids=["list", "string", "null", "no family", "family list", "meta list"])
def test_metadata_must_be_the_documented_object(tmp_path, header, words):
    members = model_members(small_protonn())
    members[f"{META_KEY}.npy"] = meta_bytes(header)
    path = write_npz(tmp_path / "m.npz", members)
    with pytest.raises(ModelFileError) as info:
        load_model(path)
    assert str(path) in str(info.value)
    for word in words:
        assert word in str(info.value)


def test_deeply_nested_metadata_is_refused(tmp_path):
    members = model_members(small_protonn())
    deep = b"[" * 100_000 + b"]" * 100_000
    members[f"{META_KEY}.npy"] = npy_bytes(np.frombuffer(deep, dtype=np.uint8))
    with pytest.raises(ModelFileError, match="nested too deeply"):
        load_model(write_npz(tmp_path / "deep.npz", members))


def test_member_without_npy_magic_is_refused(tmp_path):
    members = model_members(small_protonn())
    members["W.npy"] = b"just some bytes, no magic"
    with pytest.raises(ModelFileError, match="W.npy.*no .npy magic"):
        load_model(write_npz(tmp_path / "raw.npz", members))
    members = model_members(small_protonn())
    members["notes.txt"] = b"hello"
    with pytest.raises(ModelFileError, match="notes.txt"):
        load_model(write_npz(tmp_path / "extra.npz", members))


# ---------------------------------------------------------------- 2. corrupted .npy headers


@pytest.mark.parametrize("header", [
    b"{'descr': '<f8', 'fortran_order': False, 'shape': (3, 4), }"[:-9],  # cut mid-dict
    b"{'descr': '<f8', 'fortran_order': False, 'shape': (3L, 4)}",  # numpy's tokenizer path
    b"{'descr': '<f8', 'fortran_order': False, 'shape': (3, 4), 'x': '''}",
    b"{'descr': [('a', '<f8')], 'fortran_order': False, 'shape': (3,)}",
    b"{'descr': '<f8', 'fortran_order': 'no', 'shape': (3, 4)}",
    b"{'descr': '<f8', 'fortran_order': False, 'shape': (-3, 4)}",
    b"{'descr': 'nonsense', 'fortran_order': False, 'shape': (3,)}",
    b"(" * 5000 + b")" * 5000,
], ids=["cut", "long-suffix", "open-string", "structured", "fortran", "negative", "dtype", "deep"])
def test_corrupted_npy_headers_are_file_errors(tmp_path, header):
    members = model_members(small_protonn())
    members["W.npy"] = npy_bytes(header=header, data=bytes(96))
    path = write_npz(tmp_path / "bad.npz", members)
    with pytest.raises(ModelFileError, match="W.npy"):
        load_model(path)
    single = tmp_path / "bad.npy"
    single.write_bytes(npy_bytes(header=header, data=bytes(96)))
    with pytest.raises(DataError, match="bad.npy"):
        read_arrays(single, DataError)


# ---------------------------------------------------------------- 3. gamma overflow, empty arrays


def test_gamma_whose_square_overflows_and_empty_z_b():
    rng = np.random.default_rng(0)
    W, B, Z = rng.normal(size=(3, 4)), rng.normal(size=(3, 5)), rng.normal(size=(2, 5))
    with pytest.raises(ModelFileError, match="gamma"):
        ProtoNNModel(W, B, Z, 1e200)
    with pytest.raises(ModelFileError, match="gamma"):
        ProtoNNModel(W, B, Z, 2e19)  # finite in float32, but gamma^2 is not
    with pytest.raises(ModelFileError, match="gamma"):
        ProtoNNModel(W, B, Z, 1e-30)  # gamma^2 is 0 in float32 (found by scripts/fuzz.py)
    with pytest.raises(ModelFileError, match="at least one"):
        ProtoNNModel(W, B, np.zeros((0, 5)), 1.0)
    with pytest.raises(ModelFileError, match="at least one"):
        ProtoNNModel(W, np.zeros((3, 0)), np.zeros((2, 0)), 1.0)


# ---------------------------------------------------------------- 4. sizes before allocation


def test_huge_npy_header_is_refused_before_allocation(tmp_path):
    members = model_members(small_protonn())
    members["W.npy"] = npy_bytes(header=b"{'descr': '<f8', 'fortran_order': False, 'shape': (1000000, 1000000)}")
    with pytest.raises(ModelFileError, match="over the limit"):
        load_model(write_npz(tmp_path / "huge.npz", members))


def test_zip_bomb_is_refused_before_decompression(tmp_path):
    bomb = npy_bytes(np.zeros((64, 1 << 20), dtype=np.uint8))  # 64 MiB of zeros, ~64 KiB compressed
    members = model_members(small_protonn())
    members["W.npy"] = bomb
    path = write_npz(tmp_path / "bomb.npz", members, compress=True)
    assert path.stat().st_size < 1 << 20
    with pytest.raises(ModelFileError, match="TINYCC_ML_MAX_ARRAY_BYTES"):
        read_arrays(path, max_bytes=1 << 20)


def test_limit_is_overridable_by_environment(tmp_path, monkeypatch):
    path = small_protonn().save(tmp_path / "m.npz")
    monkeypatch.setenv("TINYCC_ML_MAX_ARRAY_BYTES", "100")
    with pytest.raises(ModelFileError, match="over the limit"):
        load_model(path)
    monkeypatch.setenv("TINYCC_ML_MAX_ARRAY_BYTES", "1M")
    assert load_model(path).n_outputs == 2
    monkeypatch.setenv("TINYCC_ML_MAX_ARRAY_BYTES", "lots")
    with pytest.raises(ModelFileError, match="TINYCC_ML_MAX_ARRAY_BYTES"):
        load_model(path)


@pytest.mark.parametrize("n_classes", [1_000_000_000, 10**30, -1, 0, 2.5, "3", True])
def test_prototype_counts_checked_against_arrays(tmp_path, n_classes):
    model = PrototypeModel([[0.0, 0.0], [1.0, 1.0], [2.0, 0.0]], [0, 1, 1], n_classes=2, k=2)
    members = model_members(model)
    members[f"{META_KEY}.npy"] = meta_bytes({"format": "tinycc-ml-model", "version": 1, "family": "prototype",
                                             "meta": {"k": 2, "n_classes": n_classes}})
    path = write_npz(tmp_path / "m.npz", members)
    tracemalloc.start()
    try:
        with pytest.raises(ModelFileError, match="n_classes"):
            load_model(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 * 2**20  # refused before any array of n_classes entries is made


# ---------------------------------------------------------------- 5. finite in float64, not in float32


@pytest.mark.parametrize("change, words", [
    (lambda a: a.update(W=np.full((3, 4), 1e300)), ["W", "float32"]),
    (lambda a: a.update(mean=np.full(4, 1e300), std=np.ones(4)), ["mean", "float32"]),
    (lambda a: a.update(mean=np.zeros(4), std=np.full(4, 1e-300)), ["float32"]),
    (lambda a: a.update(W=np.full((3, 4), 3e38), mean=np.zeros(4), std=np.full(4, 0.5)), ["float32"]),
], ids=["W 1e300", "mean 1e300", "std 1e-300", "W/std beyond float32"])
def test_values_beyond_float32_never_reach_the_c(tmp_path, change, words):
    arrays = small_protonn().arrays()
    change(arrays)
    with pytest.raises(ModelFileError) as info:
        model = ProtoNNModel.from_arrays(arrays, {}, "m.npz")
        tinycc_ml.compile(model, precision="float")  # folding may be where it overflows
    for word in words:
        assert word in str(info.value)
    if len(words) == 1:  # the files that load and fail while compiling: the message names the file too
        path = tmp_path / "hostile.npz"
        ProtoNNModel.from_arrays(small_protonn().arrays(), {}, "m.npz").save(path)
        raw = dict(np.load(path, allow_pickle=False))
        change(raw)
        np.savez(path, **raw)
        status, _, err = run_cli_inprocess(["compile", path, "-o", tmp_path / "out"])
        assert status == 2 and err.startswith(f"tinycc-ml: error: {path}: ") and "float32" in err, err


@pytest.mark.parametrize("precision", ["int16", "int8"])
def test_folding_beyond_float32_is_the_models_fault_at_every_precision(precision):
    rng = np.random.default_rng(0)
    model = ProtoNNModel(np.full((3, 4), 3e38), rng.normal(size=(3, 5)), rng.normal(size=(2, 5)), 1e-3,
                         np.zeros(4), np.full(4, 0.5))
    with pytest.raises(ModelFileError, match="float32"):
        tinycc_ml.compile(model, precision=precision, calibration=rng.normal(size=(30, 4)))


def test_bonsai_sigma_beyond_float32(tmp_path):
    rng = np.random.default_rng(0)
    args = (rng.normal(size=(3, 4)), rng.normal(size=(3, 3)), rng.normal(size=(3, 3)), rng.normal(size=(1, 3)))
    with pytest.raises(ModelFileError, match="sigma"):
        BonsaiModel(*args, 1e308, 1)
    model = BonsaiModel(*args, 1.0, 1)
    members = model_members(model)
    members[f"{META_KEY}.npy"] = meta_bytes({"format": "tinycc-ml-model", "version": 1, "family": "bonsai",
                                             "meta": {"sigma": "big", "depth": 1}})
    with pytest.raises(ModelFileError, match="sigma"):
        load_model(write_npz(tmp_path / "b.npz", members))


# ---------------------------------------------------------------- 6. complex and bool


def test_complex_refused_everywhere_bool_accepted_everywhere(tmp_path):
    model = small_protonn()
    arrays = model.arrays()
    with pytest.raises(ModelFileError, match="complex"):
        ProtoNNModel(arrays["W"] + 1j, arrays["B"], arrays["Z"], 0.7)
    members = model_members(model)
    members["W.npy"] = npy_bytes(arrays["W"].astype(np.complex128))
    with pytest.raises(ModelFileError, match="complex"):
        load_model(write_npz(tmp_path / "c.npz", members))
    calibration = np.random.default_rng(0).normal(size=(32, 4))
    with pytest.raises(DataError, match="complex"):
        tinycc_ml.compile(model, precision="int16", calibration=calibration + 0j)
    bool_weights = ProtoNNModel(arrays["W"] > 0, arrays["B"], arrays["Z"], 0.7)
    assert np.array_equal(bool_weights.W, (arrays["W"] > 0).astype(float))
    bools = np.random.default_rng(1).random((32, 4)) > 0.5
    assert tinycc_ml.compile(model, precision="int16", calibration=bools).files  # bool calibration is 0/1 data


# ---------------------------------------------------------------- 7. calibration extremes


@pytest.mark.parametrize("calibration", [np.full((20, 4), 1e30), np.full((20, 4), 2**62, dtype=np.int64)],
                         ids=["1e30", "2^62"])
def test_extreme_calibration_is_a_data_error(calibration):
    with pytest.raises(DataError, match="calibration"):
        tinycc_ml.compile(small_protonn(), precision="int16", calibration=calibration)
    knn = PrototypeModel(np.random.default_rng(0).normal(size=(6, 4)), [0, 0, 1, 1, 2, 2], n_classes=3, k=3)
    try:
        tinycc_ml.compile(knn, precision="int16", calibration=calibration)
    except DataError as exc:
        assert "calibration" in str(exc)


@pytest.mark.parametrize("value", [0.0, 1.0, 5.0])
@pytest.mark.parametrize("precision", ["int16", "int8"])
def test_bonsai_with_constant_calibration(value, precision):
    rng = np.random.default_rng(0)
    model = BonsaiModel(rng.normal(size=(3, 4)), rng.normal(size=(3, 3)), rng.normal(size=(3, 3)),
                        rng.normal(size=(1, 3)), 1.0, 1)
    calibration = np.full((20, 4), value)
    result = tinycc_ml.compile(model, precision=precision, calibration=calibration)
    assert np.array_equal(result.load().predict(calibration[:3]), model.predict(calibration[:3]))


# ---------------------------------------------------------------- 8. report


def test_report_bad_shapes_rows_and_calibration_note(tmp_path):
    model_path = small_protonn().save(tmp_path / "m.npz")
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 4))
    zero_d_x = tmp_path / "x0.npz"
    np.savez(zero_d_x, X=np.array(1.0), y=np.zeros(1))
    zero_d_y = tmp_path / "y0.npz"
    np.savez(zero_d_y, X=X, y=np.array(1))
    good = tmp_path / "good.npz"
    np.savez(good, X=X, y=rng.integers(0, 2, 40))
    out = tmp_path / "never"
    bad = run_cli_cases([("report", model_path, "--data", zero_d_x), ("report", model_path, "--data", zero_d_y),
                         ("report", model_path, "--data", good, "--rows", "-5")])
    for run, words in zip(bad, [("X", "shape"), ("y", "shape"), ("--rows",)], strict=True):
        expect_clean_failure(run, out, *words)
    run = cli("report", model_path, "--data", good, "--rows", "20")
    assert run.returncode == 0, run.stderr
    assert "calibrating on the test rows" in run.stderr
    assert "calibration" in run.stdout and "test rows" in run.stdout


# ---------------------------------------------------------------- 9. IR text and verify

BASE_IR = """graph g {
  %x = input() {name = "x"} : f32[2]
  %m = const() {value = array<float32>(2,2,2)[1, 2, 3, 4, 5, 6, 7, 8]} : f32[2,2,2]
  %k = const() {value = array<int32>()[K]} : idx[]
  %y = matvec_at(%m, %k, %x) : f32[2]
  %p = argmax(%y) : idx[]
  output scores = %y
  output prediction = %p
}
"""


@pytest.mark.parametrize("array", ["array<int8>(2)[1, 300]", "array<int16>(1)[1e5]",
                                   "array<float32>(1)[1e300]"])
def test_parse_never_lets_lark_errors_escape(array):
    text = f'graph g {{\n  %c = const() {{value = {array}}} : f32[1]\n}}\n'
    with pytest.raises(IRParseError, match="line 2"):
        parse_graph(text)


def test_verify_rejects_index_out_of_range_and_const_outputs():
    verify(parse_graph(BASE_IR.replace("K", "1")))
    with pytest.raises(IRError, match="reaches 2"):
        verify(parse_graph(BASE_IR.replace("K", "2")))
    with pytest.raises(IRError, match="constant"):
        verify(parse_graph(BASE_IR.replace("K", "0").replace("output scores = %y", "output scores = %m")))
    # a bias row per matrix of the stack: (2, 2) here
    biased = BASE_IR.replace("K", "1").replace("matvec_at(%m, %k, %x)", "matvec_at(%m, %k, %x) {bias = BIAS}")
    verify(parse_graph(biased.replace("BIAS", "array<float32>(2,2)[1, 2, 3, 4]")))
    with pytest.raises(IRError, match=r"bias has shape \(3,\), expected \(2, 2\)"):
        verify(parse_graph(biased.replace("BIAS", "array<float32>(3)[1, 2, 3]")))


KVOTE_IR = """graph g {
  %x = input() {name = "x"} : f32[2]
  %M = PROTOTYPES
  %v = sqdist_kvote(%x, %M) {k = 1, labels = array<int32>(2)[0, 1], n_classes = 2} : f32[2]
  %p = argmax(%v) : idx[]
  output scores = %v
  output prediction = %p
}
"""


@pytest.mark.parametrize("prototypes, words", [
    ('const() {value = array<float32>(2,2)[1, 2, 3, 4]} : f32[2,2]', None),
    ('const() {value = array<float32>(2)[1, 2]} : f32[2]', "shapes (2,) and (2,)"),
    ('sparse_const() {col_ptr = array<int32>(3)[0, 1, 2], row_indices = array<int32>(2)[0, 1], shape = [2, 2], '
     'values = array<float32>(2)[1, 2]} : f32[2,2]', "operand 2 is the sparse_const %M"),
], ids=["dense", "a vector", "sparse"])
def test_fused_nearest_vote_needs_a_dense_matrix(prototypes, words):
    # found by the 10^5-case IR fuzz run: an IndexError in the type rule, a KeyError in the C emitter and C
    # naming an array that does not exist (any op but a mat-vec given a sparse matrix, e.g. sqdist below)
    from tests.fuzzing import run_ir_case

    outcome = run_ir_case(KVOTE_IR.replace("PROTOTYPES", prototypes))
    if words is None:
        assert outcome.kind == "ok", outcome.detail
    else:
        assert outcome.kind == "error" and words in outcome.detail, outcome
    if "sparse_const" in prototypes:
        plain = KVOTE_IR.replace("PROTOTYPES", prototypes).replace(
            "sqdist_kvote(%x, %M) {k = 1, labels = array<int32>(2)[0, 1], n_classes = 2}", "sqdist(%x, %M)")
        outcome = run_ir_case(plain)
        assert outcome.kind == "error" and "operand 2 is the sparse_const %M" in outcome.detail, outcome


def test_an_output_the_c_does_not_return_is_refused():
    # found by the 10^5-case IR fuzz run: a misspelled label left its value computed and unused (gcc -Werror)
    from tests.fuzzing import run_ir_case

    dense = 'const() {value = array<float32>(2,2)[1, 2, 3, 4]} : f32[2,2]'
    text = KVOTE_IR.replace("PROTOTYPES", dense).replace("output prediction = %p", "output predicton = %p\n"
                                                         "  output prediction = %p")
    outcome = run_ir_case(text)
    assert outcome.kind == "error" and "output predicton is not one the C returns" in outcome.detail, outcome


# ---------------------------------------------------------------- 12. messages


def test_messages_name_the_real_problem(tmp_path):
    out = tmp_path / "out"
    truncated = tmp_path / "cut.npy"
    np.save(truncated, np.zeros((40, 4)))
    truncated.write_bytes(truncated.read_bytes()[:200])
    gz = tmp_path / "data.npy"
    gz.write_bytes(b"\x1f\x8b\x08\x00" + bytes(40))
    model_path = small_protonn().save(tmp_path / "m.npz")
    for path, word in ((truncated, "truncated"), (gz, "neither")):
        line = expect_clean_failure(cli("compile", model_path, "--precision", "int16", "--calibration", path,
                                        "-o", out), out, path.name, word)
        assert "pickled" not in line


def test_bonsai_directory_without_t_is_not_protonn(tmp_path):
    rng = np.random.default_rng(0)
    d = tmp_path / "bonsai"
    d.mkdir()
    for name, shape in (("W", (3, 3)), ("V", (3, 3)), ("Z", (3, 5))):
        np.save(d / f"{name}.npy", rng.normal(size=shape))
    with pytest.raises(ModelFileError) as info:
        load_model(d)
    assert "gamma" not in str(info.value) and "hyperParam" in str(info.value)


def test_numpy_warnings_do_not_precede_the_error_line(tmp_path):
    arrays = small_protonn().arrays()
    directory = tmp_path / "m"
    save_edgeml_protonn(small_protonn(), directory)
    np.save(directory / "std.npy", np.full(4, 1e-320))  # 1/std overflows with a RuntimeWarning
    np.save(directory / "mean.npy", np.zeros(4))
    del arrays
    out = tmp_path / "out"
    expect_clean_failure(cli("compile", directory, "-o", out), out, "float32")


def test_ctrl_c_exits_130_without_traceback(tmp_path):
    out = tmp_path / "demo"
    # no cache: after its first line the demo trains and searches scales for seconds, whatever earlier tests
    # cached (a warm cache let it finish before the signal arrived on a loaded machine)
    # and with Ctrl-C handled by default, as in a terminal, whatever this test process inherited or a library
    # in it set (a process that ignores SIGINT passes that on to its children)
    proc = subprocess.Popen([sys.executable, "-m", "tinycc_ml", "demo", "-o", str(out)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "TINYCC_ML_CACHE": "off"},
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert proc.stdout.readline().startswith("dataset:")  # running its own code, mid-way through training
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    assert not out.exists() or not list(out.glob("*.c"))
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr
    assert stderr.strip().splitlines()[-1] == "tinycc-ml: error: interrupted"


def test_ctrl_c_that_a_library_turns_into_another_error_is_still_one_line():
    # numpy interrupted while importing its C core raises an ImportError (seen in the full suite's random
    # Ctrl-C surface): the command line remembers the interrupt and still ends with its one line
    code = """
import os, signal, tinycc_ml.cli
def main(argv=None):
    try:
        os.kill(os.getpid(), signal.SIGINT)
        signal.pthread_sigmask(signal.SIG_BLOCK, [])  # let the handler run here
    except KeyboardInterrupt:
        raise ImportError("IMPORTANT: PLEASE READ THIS FOR ADVICE (numpy's message)")
tinycc_ml.cli.main = main
from tinycc_ml.console import run
run()
"""
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert (run.returncode, run.stderr) == (130, "tinycc-ml: error: interrupted\n"), run.stderr



def test_verify_bounds_value_sizes_and_the_emitter_checks_the_interface():
    huge = 'graph g {\n  %x = input() {name = "x"} : f32[4294967296]\n  %p = argmax(%x) : idx[]\n' \
           '  output prediction = %p\n}\n'
    with pytest.raises(IRError, match="over the limit"):
        verify(parse_graph(huge))
    no_scores = parse_graph(BASE_IR.replace("K", "1").replace("  output scores = %y\n", ""))
    verify(no_scores)
    with pytest.raises(CompileError, match="scores and prediction"):
        get_backend("host").emit(run_passes(no_scores, ["plan_memory"]), "g", [])


def test_fixed_scales_beyond_int32_shifts_are_refused():
    text = ('graph g {\n  %x = input() {name = "x"} : fx16.8[2]\n'
            '  %y = scale(%x) {factor = 1.0, factor_q = 1, factor_scale = 0} : fx16.60[2]\n'
            '  %p = argmax(%y) : idx[]\n  output scores = %y\n  output prediction = %p\n}\n')
    graph = parse_graph(text)
    verify(graph)
    with pytest.raises(CompileError, match="shift"):
        get_backend("host").emit(run_passes(graph, ["plan_memory"]), "g", [])
    with pytest.raises(IRParseError, match="scale"):
        parse_graph(text.replace("fx16.60", "fx16.99"))


def test_oversized_hyperparam_file_is_refused(tmp_path):
    path = tmp_path / "hyperParam.npy"
    path.write_bytes(b"\x80\x04" + bytes(2 << 20))
    with pytest.raises(ModelFileError, match="too large"):
        read_pickled_dict(path)


def test_emitter_never_writes_an_infinite_float():
    text = ('graph g {\n  %x = input() {name = "x"} : f32[2]\n  %y = scale(%x) {factor = 1e300} : f32[2]\n'
            '  %p = argmax(%y) : idx[]\n  output scores = %y\n  output prediction = %p\n}\n')
    graph = parse_graph(text)
    verify(graph)
    with pytest.raises(CompileError, match="finite float32"):
        get_backend("host").emit(run_passes(graph, ["plan_memory"]), "g", [])


def test_rounding_shift_is_parenthesised_inside_sums():
    """Found by scripts/fuzz.py: an add whose operands shift in opposite directions printed
    ``(a + 1) >> 1 + b * 32768``, which C reads as a shift by 1 + b * 32768."""
    from tinycc_ml.codegen.c_fixed import rshift_c

    assert rshift_c("a", 1) + " + b" == "(((a) + INT32_C(1)) >> 1) + b"
    rng = np.random.default_rng(0)
    model = BonsaiModel(rng.normal(size=(2, 5)) * 1e-4, rng.normal(size=(9, 2)), rng.normal(size=(9, 2)),
                        rng.normal(size=(1, 2)), 1.0, 1, z_bias=np.array([3.0, -2.0]))
    X = rng.normal(size=(40, 5))
    result = tinycc_ml.compile(model, precision="int8", calibration=X)
    from tinycc_ml.ir.fixed import quantise, run_fixed

    Xq = quantise(X, result.output.input_scale, 16).astype(np.int16)
    scores, predictions = result.load().run_raw(Xq)
    want = run_fixed(result.graph, Xq)
    np.testing.assert_array_equal(scores, want["scores"])


def test_exp_range_wholly_above_the_table_compiles():
    """Found by scripts/fuzz.py: a ProtoNN whose calibrated distances all lie beyond the point
    where e^-x rounds to 0 gave the table a lower bound past int32 (C warned, -Werror failed)."""
    from tests.fuzzing import run_model_file_case

    data = (Path(__file__).parent / "data" / "fuzz_exp_range_above_table.npz").read_bytes()
    outcome = run_model_file_case(data, "int8")
    assert outcome.kind == "ok", outcome.detail


# ================================================================ round 2 (issue 25)
# ---------------------------------------------------------------- 1. float32 distance overflow


@pytest.mark.parametrize("estimator", ["knn", "centroid"])
def test_float_distances_that_overflow_float32_are_refused(estimator):
    from sklearn.neighbors import KNeighborsClassifier, NearestCentroid

    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 3))
    y = (X[:, 0] > 0).astype(int)
    make = (lambda: KNeighborsClassifier(3)) if estimator == "knn" else NearestCentroid
    with pytest.raises(ModelFileError, match=r"magnitude up to [0-9.]+e\+19.*overflow float32"):
        tinycc_ml.compile(make().fit(X * 3e19, y))
    big = make().fit(X * 1e17, y)  # large but representable: compiled, and right
    require_target("host")
    assert np.array_equal(tinycc_ml.compile(big).load().predict(X * 1e17), big.predict(X * 1e17))


# ---------------------------------------------------------------- 2. the on-device input helper


def test_input_helper_is_defined_for_every_shift_and_nan(tmp_path):
    """Tiny calibration values give input shifts beyond 31; the helper computed 1 << s (undefined,
    every input 0 on x86) and cast NaN to int32_t. Built with UBSan, it matches quantise()."""
    from tinycc_ml.buildsys.examples import input_helper
    from tinycc_ml.ir.fixed import quantise
    from tinycc_ml.runtime.toolchains import find_host_cc

    require_target("host")
    from tinycc_ml.testing import random_model

    model = random_model("linear", np.random.default_rng(1))
    calibration = np.random.default_rng(2).normal(size=(32, model.input_dim)) * 1e-9
    result = tinycc_ml.compile(model, precision="int16", calibration=calibration, name="tiny")
    dim = model.input_dim
    shifts = np.broadcast_to(np.asarray(result.output.input_scale), (dim,)).astype(np.int64)
    assert shifts.max() >= 32, shifts
    for file, text in {**result.files, "tiny_input.h": input_helper(result)}.items():
        (tmp_path / file).write_text(text)
    odd = np.resize([np.nan, 1e30, -1e30, 0.0, -0.0, 3e-10], (2, dim))
    rows = np.concatenate([calibration[:6], odd]).astype(np.float32)
    (tmp_path / "main.c").write_text("\n".join([
        "#include <stdio.h>", '#include "tiny_input.h"', "#include <math.h>",
        f"static const float rows[{len(rows)}][{dim}] = {{" + ", ".join(
            "{" + ", ".join("NAN" if np.isnan(v) else f"{v!r}f" for v in r.tolist()) + "}" for r in rows) + "};",
        "int main(void) {",
        f"    for (int r = 0; r < {len(rows)}; ++r) {{ int16_t q[{dim}]; tiny_quantise_input(rows[r], q);",
        f'        for (int k = 0; k < {dim}; ++k) printf("%d ", q[k]);',
        '        printf("\\n");',
        '    }',
        "    return 0; }", ""]))
    exe = tmp_path / "main"
    subprocess.run([find_host_cc(), "-std=c99", "-Wall", "-Wextra", "-Werror",
                    "-fsanitize=undefined,float-cast-overflow",
                    "-fno-sanitize-recover=all", "-I", str(tmp_path), str(tmp_path / "main.c"),
                    str(tmp_path / "tiny.c"), "-o", str(exe)],
                   check=True)
    run = subprocess.run([str(exe)], capture_output=True, text=True, check=True)
    assert run.stderr == ""
    got = np.array([[int(v) for v in line.split()] for line in run.stdout.splitlines()])
    want = quantise(rows.astype(np.float64), shifts, 16)
    assert np.array_equal(got, want), (got, want)


# ---------------------------------------------------------------- 3. example rows the firmware cannot hold


@pytest.mark.parametrize("value", [np.nan, np.inf, 1e300])
def test_example_rows_beyond_float32_are_one_line(tmp_path, value):
    from tinycc_ml.testing import random_model

    model = random_model("linear", np.random.default_rng(3))
    (tmp_path / "m.npz").write_bytes(model_file_bytes(model))
    rows = np.random.default_rng(4).normal(size=(20, model.input_dim))
    np.save(tmp_path / "cal.npy", rows)
    rows[5, 1] = value
    np.save(tmp_path / "ex.npy", rows)
    run = cli("compile", tmp_path / "m.npz", "--target", "avr", "--project", "--calibration", tmp_path / "cal.npy",
              "--examples", tmp_path / "ex.npy", "-o", tmp_path / "out")
    expect_clean_failure(run, tmp_path / "out", "row 5, feature 1", "float32")


# ---------------------------------------------------------------- 4. multilabel thresholds beyond the scores' type


@pytest.mark.parametrize("precision, threshold", [("float", 1e300), ("float", -1e300), ("float", 1e-50),
                                                  ("float", -1e-50), ("int16", 4e7), ("int16", -4e7),
                                                  ("int16", 1e300)])
def test_multilabel_thresholds_outside_the_score_type(precision, threshold):
    """The C compared an int16_t with 40265318 (-Werror fails) and wrote 1e+300f; now it builds and
    applies the rule exactly as the model's scores do."""
    from tinycc_ml.models.base import multilabel_indicator

    require_target("host")
    task = {"kind": "multilabel", "rule": "threshold", "threshold": threshold}
    model = small_protonn().with_task(task)
    X = np.random.default_rng(5).normal(size=(40, 4))
    X[:3] = 0.0  # some scores at exactly the model's offsets
    result = tinycc_ml.compile(model, precision=precision, calibration=X, name="ml")
    host = result.load()
    scores = host.scores(X).astype(np.float64)
    if precision == "int16":
        scores = scores * 2.0 ** -int(result.files["ml.h"].split("ML_SCORE_SCALE ")[1].split()[0])
    np.testing.assert_array_equal(host.labels(X), multilabel_indicator(scores, task))
    assert "e+300f" not in result.files["ml.c"] and "e-50f" not in result.files["ml.c"]


# ---------------------------------------------------------------- 5. integer attributes of every op


@pytest.fixture(scope="module")
def table_graph_texts():
    from tinycc_ml.ir.text import print_graph
    from tinycc_ml.testing import random_model

    texts = []
    for family in ("bonsai", "protonn"):  # tanh_lut, scale / sqdist, exp_lut
        model = random_model(family, np.random.default_rng(0))
        result = tinycc_ml.compile(model, precision="int16",
                                   calibration=np.random.default_rng(0).normal(size=(32, model.input_dim)))
        texts.append(print_graph(result.graph))
    return texts


@pytest.mark.parametrize("op, attr, value", [
    ("tanh_lut", "drop_bits", -40), ("tanh_lut", "drop_bits", 31), ("tanh_lut", "in_max_q", -1),
    ("tanh_lut", "in_max_q", 2**40), ("tanh_lut", "table_scale", 99), ("scale", "factor_q", 2**33),
    ("scale", "factor_scale", -100), ("exp_lut", "drop_bits", -1), ("exp_lut", "low_bits", 70),
    ("exp_lut", "hi_scale", 40), ("exp_lut", "lo_scale", -3), ("exp_lut", "lo_q", 2**31),
    ("exp_lut", "hi_q", -2**40)])
def test_integer_attributes_outside_their_range_fail_verify(table_graph_texts, op, attr, value):
    """drop_bits = -40 passed verify(); run_fixed raised "negative shift count" and the host C
    shifted by a negative count. Every op's integer attributes are range-checked now."""

    graph_text = next(text for text in table_graph_texts if f"= {op}(" in text)
    verify(parse_graph(graph_text))
    line = next(ln for ln in graph_text.splitlines() if f"= {op}(" in ln)
    bad = re.sub(rf"\b{attr} = -?\d+", f"{attr} = {value}", line)
    assert bad != line
    with pytest.raises(IRError, match=rf"({attr} = {value}|{attr}).*(outside|index|above|fit)"):
        verify(parse_graph(graph_text.replace(line, bad)))


# ---------------------------------------------------------------- 6-7. races: one new folder, a fresh cache


def _write_rounds(args):
    from tinycc_ml.api import write_files

    root, worker, barrier, rounds = args
    failures = []
    for r in range(rounds):
        barrier.wait()
        try:
            write_files(Path(root) / f"round{r}" / "gen", {f"m{worker}.h": f"/* h {worker} */\n" * 50,
                                                           f"m{worker}.c": f"/* c {worker} */\n" * 50})
        except Exception as exc:  # reported to the parent, which asserts there are none
            failures.append(f"round {r}: {type(exc).__name__}: {exc}")
    return failures


def test_parallel_writers_into_one_new_folder_all_succeed(tmp_path):
    """make -j: 8 processes writing different names into one folder that does not exist yet; the
    loser of os.replace(staging, out_dir) used to fail with "Directory not empty"."""
    import multiprocessing

    context = multiprocessing.get_context("fork")
    workers, rounds = 8, 30
    barrier = context.Manager().Barrier(workers)
    with context.Pool(workers) as pool:
        failures = pool.map(_write_rounds, [(str(tmp_path), w, barrier, rounds) for w in range(workers)])
    assert [f for fs in failures for f in fs] == []
    for r in range(rounds):
        gen = tmp_path / f"round{r}" / "gen"
        assert sorted(p.name for p in gen.iterdir()) == sorted(f"m{w}.{e}" for w in range(workers) for e in "ch")
        for w in range(workers):
            assert (gen / f"m{w}.c").read_text() == f"/* c {w} */\n" * 50
    assert not [p for p in tmp_path.rglob(".*")]  # no staging folders left


def test_host_builds_load_from_many_threads_with_a_fresh_cache(tmp_path, monkeypatch):
    """cffi's build changes the process's working folder: parallel loads with an empty cache failed
    with "cc1: fatal error: _tinycc_....c: No such file or directory"."""
    from concurrent.futures import ThreadPoolExecutor

    from tinycc_ml.testing import random_model

    require_target("host")
    monkeypatch.setenv("TINYCC_ML_CACHE", str(tmp_path / "cache"))
    model = random_model("linear", np.random.default_rng(6))
    X = np.random.default_rng(7).normal(size=(5, model.input_dim))
    results = [tinycc_ml.compile(model, name=f"t{i}") for i in range(8)]
    with ThreadPoolExecutor(8) as pool:
        predictions = list(pool.map(lambda result: result.load().predict(X), results))
    assert all(np.array_equal(p, model.predict(X)) for p in predictions)


# ---------------------------------------------------------------- 8. a sparse constant of 10^6 empty columns


def test_all_zero_sparse_model_of_a_million_columns_compiles_in_bounded_work(tmp_path):
    """A deflated all-zero W of shape (1, 10^6) (8 KB) took about two minutes: the sparse constant's
    verifier, CSC conversion and C writer looped over the columns in Python. Now each is one
    vectorised pass (10^7 columns: ~2.5 s of CPU, ~330 MB; see issue 25)."""

    members = {"W.npy": npy_bytes(np.zeros((1, 10**6))), "b.npy": npy_bytes(np.zeros(1)),
               f"{META_KEY}.npy": meta_bytes({"format": "tinycc-ml-model", "version": 1, "family": "linear",
                                              "meta": {}})}
    model = write_npz(tmp_path / "zeros.npz", members, compress=True)
    assert model.stat().st_size < 20_000
    # the compile's own peak memory: VmHWM, its address space's high-water mark (ru_maxrss would not do: Linux
    # carries the parent's high-water mark into a child across exec, and a test worker's grows to 600 MB)
    peak = tmp_path / "peak_kib"
    script = ("import re, sys\nfrom tinycc_ml.cli import main\ncode = main(sys.argv[2:])\n"
              "status = open('/proc/self/status').read()\n"
              "open(sys.argv[1], 'w').write(re.search(r'VmHWM:\\s+(\\d+) kB', status).group(1))\n"
              "sys.exit(code)\n")
    run = subprocess.run([sys.executable, "-c", script, str(peak), "compile", str(model), "-o", str(tmp_path / "out")],
                         capture_output=True, text=True, timeout=90)  # two minutes before the fix
    assert run.returncode == 0, run.stderr
    assert int(peak.read_text()) < 500_000  # KiB
    assert "linear_W_colptr[1000001]" in (tmp_path / "out" / "linear.c").read_text()


@pytest.mark.parametrize("rows, where", [([0, 2, 2, 0, 1], None), ([0, 2, 2, 1, 0], "column 2"),
                                         ([0, 2, 2, 0, 0], "column 2"), ([1, 2, 0, 0, 2], None)])
def test_vectorised_csc_check_finds_the_column(rows, where):
    """Columns of [[1,0,2],[0,0,3],[4,5,0]]: rows may drop where a column starts, never inside one."""
    from tinycc_ml.ir.graph import Graph
    from tinycc_ml.ir.ops import dense_to_sparse_attrs, sparse_to_dense
    from tinycc_ml.ir.types import F32, TensorType

    dense = np.array([[1.0, 0.0, 2.0], [0.0, 0.0, 3.0], [4.0, 5.0, 0.0]], dtype=np.float32)
    attrs = dense_to_sparse_attrs(dense)
    assert attrs["col_ptr"].tolist() == [0, 2, 3, 5] and attrs["row_indices"].tolist() == [0, 2, 2, 0, 1]
    assert np.array_equal(sparse_to_dense(attrs), dense)
    for dtype in (np.int32, np.uint16):
        graph = Graph("sp")
        x = graph.add("input", attrs={"name": "x"}, type=TensorType((3,), F32), name="x")
        w = graph.add("sparse_const", attrs=dict(attrs), name="W")
        graph.set_output("scores", graph.add("matvec", [w, x], name="p"))
        graph.node("W").attrs["row_indices"] = np.asarray(rows, dtype=dtype)
        if where is None:
            verify(graph)
        else:
            with pytest.raises(IRError, match=f"{where}: row indices not ascending"):
                verify(graph)


# ---------------------------------------------------------------- 9-11. one line, not a traceback


@pytest.mark.parametrize("label", [2**63, 2**70, -(2**63) - 1, 10**400], ids=["2^63", "2^70", "-2^63-1", "1e400"])
def test_class_labels_beyond_int64_in_a_model_file(tmp_path, label):
    from tinycc_ml.testing import random_model

    model = random_model("nearest", np.random.default_rng(8))
    members = model_members(model)
    header = json.loads(bytes(np.load(io.BytesIO(members[f"{META_KEY}.npy"]))).decode())
    n = len(model.classes)
    header["meta"]["classes"] = [label] + list(range(n - 1))
    members[f"{META_KEY}.npy"] = meta_bytes(header)
    with pytest.raises(ModelFileError, match="beyond int64"):
        load_model(write_npz(tmp_path / "m.npz", members))


def test_class_labels_beyond_int64_from_scikit_learn_and_fit():
    from sklearn.neighbors import NearestCentroid

    X = np.random.default_rng(9).normal(size=(20, 3))
    y = np.repeat(np.array([2**63, 2**63 + 5], dtype=np.uint64), 10)
    with pytest.raises(CompileError, match="beyond int64"):
        tinycc_ml.compile(NearestCentroid().fit(X, y))
    for labels in (y, y.astype(np.float64) * 4):
        with pytest.raises(DataError, match="beyond int64"):
            tinycc_ml.fit(X, labels, target="host", time_budget=10)


def test_edgeml_sigma_beyond_float_is_one_error(tmp_path):
    from tests.models.test_bonsai import write_edgeml

    write_edgeml(tmp_path / "b", np.random.default_rng(0))
    hp = {"dataDim": 7, "projDim": 3, "numClasses": 2, "depth": 2, "sigma": 10**400}
    np.save(tmp_path / "b" / "hyperParam.npy", hp, allow_pickle=True)
    with pytest.raises(ModelFileError, match="sigma"):
        load_model(tmp_path / "b")
    run = cli("compile", tmp_path / "b", "-o", tmp_path / "out")
    expect_clean_failure(run, tmp_path / "out", "sigma")


def test_fit_refuses_huge_values_and_options_in_one_line(tmp_path):
    rng = np.random.default_rng(10)
    X, y = rng.normal(size=(30, 3)), np.repeat([0, 1], 15)
    with pytest.raises(DataError, match="row 4, column 1 .*float32"):
        tinycc_ml.fit(np.where(np.arange(90).reshape(30, 3) == 13, 1e300, X), y, target="host", time_budget=10)
    for seed in (-1, 2**32, 2**80):
        with pytest.raises(DataError, match="random_state"):
            tinycc_ml.fit(X, y, target="host", time_budget=10, random_state=seed)
    np.savez(tmp_path / "d.npz", X_train=X, y_train=y)
    for option, value in (("--max-flash", "1e400"), ("--max-ram", "0.4"), ("--max-flash", "-5"),
                          ("--random-state", str(2**32))):
        run = cli("fit", tmp_path / "d.npz", "--target", "host", "--time-budget", "10", option, value,
                  "-o", tmp_path / "out")
        assert run.returncode == 2 and len(run.stderr.splitlines()) == 1, run.stderr
        assert option in run.stderr or "random_state" in run.stderr, run.stderr
        assert not (tmp_path / "out").exists()


# ---------------------------------------------------------------- 12. names that shadow system headers


@pytest.mark.parametrize("name", ["stdint", "math", "stdio", "Stdlib", "string", "Arduino"])
def test_names_of_standard_headers_are_refused(name):
    with pytest.raises(CompileError, match=f"shadows the standard header <{name.lower()}.h>"):
        tinycc_ml.compile(small_protonn(), name=name)


def test_standard_header_name_on_the_command_line_is_one_line(tmp_path):
    (tmp_path / "m.npz").write_bytes(model_file_bytes(small_protonn()))
    expect_clean_failure(cli("compile", tmp_path / "m.npz", "--name", "stdint", "-o", tmp_path / "out"),
                         tmp_path / "out", "stdint.h", "shadows")


# ================================================================ issue 36, item 6: float32 overflow anywhere


def _mlp(scale: float, sizes=(8, 16, 16, 3)):
    from tinycc_ml.models.mlp import MLPModel

    rng = np.random.default_rng(0)
    weights = [rng.normal(size=(b, a)) * scale for a, b in zip(sizes, sizes[1:])]
    return MLPModel(weights, [np.full(b, 0.1) for b in sizes[1:]])


def test_float_builds_whose_values_overflow_float32_are_refused_naming_the_value():
    """Weights x 1e20 are finite, but the second layer's sums reach 1e41: the C gave inf, NaN probabilities
    and wrong labels. The interval analysis of the float graph names the value and how far it reaches."""
    with pytest.raises(CompileError, match=r"weighted1 \(matvec\) can reach [0-9.]+e\+4\d on inputs in \[-1, 1\]"):
        tinycc_ml.compile(_mlp(1e20))
    rows = np.random.default_rng(1).normal(size=(20, 8))
    with pytest.raises(CompileError, match=r"can reach .* on the calibration rows' range"):
        tinycc_ml.compile(_mlp(1e15), calibration=rows * 1e6)  # small weights, inputs that overflow
    with pytest.raises(CompileError, match=r"on the declared input range \[-1e\+10, 1e\+10\]"):
        tinycc_ml.compile(_mlp(1e12), input_range=(-1e10, 1e10))
    model = _mlp(1e11)  # three layers of 1e11: within float32 on these rows, compiled and right
    require_target("host")
    np.testing.assert_array_equal(tinycc_ml.compile(model, calibration=rows).load().predict_index(rows),
                                  model.predict_index(rows))


def test_float32_and_float64_constants_beyond_float32_are_refused_naming_the_node():
    """check_constants: a float32 table (a forest's leaves) holding inf or NaN, and a float64 attribute past
    float32's range, are refused with the node, the attribute and the value; finite ones pass."""
    from tinycc_ml.api import check_constants
    from tinycc_ml.ir.graph import Graph
    from tinycc_ml.ir.types import F32, TensorType

    for value, shown in ((np.array([1.0, np.inf, 2.0], dtype=np.float32), "inf"),
                         (np.array([np.nan], dtype=np.float32), "nan")):
        g = Graph("g")
        g.add("const", [], {"value": value}, name="table")
        with pytest.raises(ModelFileError, match=rf"model: table \(const value\) holds {shown}, beyond"):
            check_constants(g, "model")
    g = Graph("g")
    x = g.add("input", [], {}, type=TensorType((2,), F32), name="x")
    g.add("clip", [x], {"lo": -1e39, "hi": 1.0}, name="clamp")
    with pytest.raises(ModelFileError, match=r"model: clamp \(clip lo\) holds -1e\+39, beyond"):
        check_constants(g, "model")
    g = Graph("g")
    g.add("const", [], {"value": np.array([3.4e38, -3.4e38], dtype=np.float32)}, name="table")
    check_constants(g, "model")


def test_an_svm_whose_scores_overflow_float32_is_refused():
    from tinycc_ml.models.svm import SVMModel

    rng = np.random.default_rng(2)
    sv = rng.normal(size=(6, 3))
    model = SVMModel(sv, rng.normal(size=(1, 6)) * 1e38, [0.0], 2, kernel="linear")
    with pytest.raises(CompileError, match=r"can reach .* beyond float32"):
        tinycc_ml.compile(model)


def test_onnx_initializers_whose_products_overflow_float32_are_refused(tmp_path):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(3)
    inits = [numpy_helper.from_array((rng.normal(size=(4, 4)) * 1e25).astype(np.float32), "W1"),
             numpy_helper.from_array((rng.normal(size=(2, 4)) * 1e25).astype(np.float32), "W2")]
    nodes = [helper.make_node("MatMul", ["x", "W1t"], ["h"]), helper.make_node("MatMul", ["h", "W2t"], ["y"])]
    inits = [numpy_helper.from_array(numpy_helper.to_array(i).T.copy(), i.name + "t") for i in inits]
    graph = helper.make_graph(nodes, "big", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2])], inits)
    path = tmp_path / "big.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    with pytest.raises(CompileError, match=r"can reach .*e\+5\d .* beyond float32"):
        tinycc_ml.compile(str(path))
