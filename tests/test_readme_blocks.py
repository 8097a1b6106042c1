"""Every ```sh and ```python block of README.md and of every page under docs/ runs here, as written, in a
scratch folder.

What the blocks take for granted is prepared: `tinycc-ml` on PATH running this checkout; `import tinycc_ml`
done and `X_train`, `y_train`, `X_test`, `y_test`, `X`, `y` defined for the Python blocks (rows of
scikit-learn's digits); the files the commands name (`usps.npz`, `usps10.npz`, `digits.npz`, `test.npz`:
digits rows and labels under `X_train`/`y_train`/`X_test`/`y_test`; `model.npz`: a small ProtoNN; `net.onnx`:
a 64-16-10 dense network as torch.onnx.export writes it; `sensor_cnn.onnx` + `sensor_cnn.onnx.data`: the
PyTorch 1-D CNN of examples/sensor_cnn, with `sensor.npz`, rows of its synthetic data set;
`kws_ref_model.tflite`: MLPerf Tiny's keyword-spotting model, and `front.json`: the MFCC front end it takes, as
`tinycc_ml.features.save_front_end` writes it). Heavy
commands run smaller through substitutions written in the page itself, in a comment before the block:
``<!-- readme-test: replace "OLD" "NEW" (why); ... -->`` (e.g. `fit` with one family and one size); a block
another test runs says so (``<!-- readme-test: not run here: ... -->``). ``$SCHEDULER`` in a substitution
is the address of a local Dask scheduler started for the block. The usage synopsis of the "Command line"
page (a ```text block) is checked against the command line's own options. Blocks in other languages (C,
CMake, text, output) are not run. A ```text block right after a block, marked
``<!-- readme-test: output -->``, is what the page says that block prints: each of its lines (but lines of
``...``) must be a line of what the run printed, so every figure a tutorial shows comes from the run."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from sklearn.datasets import load_digits

from tests.conftest import require_target, require_tools
from tinycc_ml.models.protonn import init_protonn

REPO = Path(__file__).resolve().parents[1]
FENCE = re.compile(r"(?:<!-- readme-test: (?P<note>.*?) -->\n)?```(?P<lang>sh|python)\n(?P<body>.*?)```", re.S)
REPLACE = re.compile(r'replace "((?:[^"\\]|\\.)*)" "((?:[^"\\]|\\.)*)"')
MAX_NOT_RUN = 6  # blocks run by another test, each saying which (the recurrent layers' two: stepped streams; the KWS
# tutorial's: QEMU firmware)
OUTPUT = re.compile(r"\s*<!-- readme-test: output -->\n```text\n(?P<body>.*?)```", re.S)


DOCS = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def readme_blocks() -> list[tuple[str, str, str, str]]:
    """(file:line, language, body, note) of every sh / python block of the README and the docs pages."""
    blocks = []
    for path in DOCS:
        text = path.read_text()
        where = path.relative_to(REPO).as_posix()
        for m in FENCE.finditer(text):
            at = f"{where}:{text[:m.start('body')].count(chr(10)) + 1}"
            blocks.append((at, m.group("lang"), m.group("body"), m.group("note") or ""))
            shown = OUTPUT.match(text, m.end())
            if shown:
                EXPECTED[at] = shown.group("body")
    return blocks


EXPECTED: dict[str, str] = {}  # file:line of a block -> the output its page shows


def check_output(where: str, printed: str) -> None:
    """Every line of the output the page shows for the block at ``where`` is a line the run printed."""
    lines = {ln.strip() for ln in printed.splitlines()}
    for line in EXPECTED.get(where, "").splitlines():
        if line.strip() and line.strip() != "...":
            assert line.strip() in lines, f"{where}: the page shows {line.strip()!r}; the run printed:\n{printed}"


def substituted(body: str, note: str) -> str:
    for old, new in REPLACE.findall(note):
        old, new = old.replace('\\"', '"'), new.replace('\\"', '"')
        assert old in body, f"the substitution's text {old!r} is not in the block"
        body = body.replace(old, new)
    return body


BLOCKS = readme_blocks()


def block_id(block) -> str:
    where, lang, body, _ = block
    return f"{where}-{lang}-{body.strip().splitlines()[0][:40]}"


def test_a_shown_output_is_checked_against_the_run():
    EXPECTED["page.md:1"] = "correct 4/4\n...\n"
    try:
        check_output("page.md:1", "row 0\ncorrect 4/4\n")
        with pytest.raises(AssertionError, match="the page shows 'correct 4/4'"):
            check_output("page.md:1", "correct 3/4\n")
    finally:
        del EXPECTED["page.md:1"]


def test_every_block_is_run_or_says_where():
    assert len(BLOCKS) >= 10
    not_run = [b for b in BLOCKS if b[3].startswith("not run here:")]
    assert len(not_run) <= MAX_NOT_RUN, [block_id(b) for b in not_run]
    for _, _, _, note in not_run:
        test = re.search(r"tests/\S+\.py", note).group(0)
        assert (REPO / test).is_file() and any(word in (REPO / test).read_text() for word in ("README", "docs/"))
    for _, _, body, note in BLOCKS:
        substituted(body, note)  # every substitution names text of its block


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("readme")
    X, y = load_digits(return_X_y=True)
    split = {"X_train": X[:500], "y_train": y[:500], "X_test": X[1500:1560], "y_test": y[1500:1560]}
    for name in ("usps.npz", "usps10.npz", "digits.npz", "test.npz"):
        np.savez(tmp / name, **split)
    init_protonn(X[:500], y[:500], projection_dim=6, prototypes_per_class=1).save(tmp / "model.npz")
    write_onnx_net(tmp / "net.onnx", np.random.default_rng(0))
    write_tflite_files(tmp)
    write_sensor_files(tmp)
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    (bin_dir / "tinycc-ml").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m tinycc_ml "$@"\n')
    (bin_dir / "tinycc-ml").chmod(0o755)
    (bin_dir / "python").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    (bin_dir / "python").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
           "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return tmp, split, env


def write_onnx_net(path: Path, rng) -> None:
    """A 64-16-10 relu network in the form torch.onnx.export gives a Linear-ReLU-Linear module."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    weights = [numpy_helper.from_array(a.astype(np.float32), name) for name, a in (
        ("W1", rng.normal(0, 0.1, (16, 64))), ("b1", rng.normal(0, 0.1, 16)),
        ("W2", rng.normal(0, 0.3, (10, 16))), ("b2", rng.normal(0, 0.1, 10)))]
    nodes = [helper.make_node("Gemm", ["x", "W1", "b1"], ["h"], transB=1), helper.make_node("Relu", ["h"], ["a"]),
             helper.make_node("Gemm", ["a", "W2", "b2"], ["y"], transB=1)]
    graph = helper.make_graph(nodes, "net", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])], weights)
    onnx.save(helper.make_model(graph), str(path))


def write_tflite_files(tmp: Path) -> None:
    """kws_ref_model.tflite, MLPerf Tiny's keyword-spotting model (data/mlperf-tiny in the repository), and
    front.json: 49 frames of 10 MFCC per second of 16 kHz audio, its input (docs/guide/front-ends.md)."""
    from sklearn.pipeline import make_pipeline

    from tinycc_ml.features import DCT, Framer, Log, MelFilterBank, PowerSpectrum, Window, save_front_end

    (tmp / "kws_ref_model.tflite").write_bytes((REPO / "data" / "mlperf-tiny" / "kws_ref_model.tflite").read_bytes())
    mfcc = make_pipeline(Framer(640, 320), Window(640), PowerSpectrum(1024, frame_length=640),
                         MelFilterBank(16000, 1024, 40), Log(floor=1e-6), DCT(40, 10))
    save_front_end(mfcc.fit(np.zeros((1, 16000))), tmp / "front.json")


def write_sensor_files(tmp: Path) -> None:
    """The PyTorch 1-D CNN fixture (sensor_cnn.onnx + its external data; examples/sensor_cnn) and sensor.npz:
    rows of the example's synthetic accelerometer data set (X_train: its calibration rows; X_test, y_test)."""
    for name in ("sensor_cnn.onnx", "sensor_cnn.onnx.data"):
        (tmp / name).write_bytes((REPO / "tests" / "data" / name).read_bytes())
    spec = importlib.util.spec_from_file_location("sensor_dataset", REPO / "examples" / "sensor_cnn" / "dataset.py")
    dataset = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(dataset)
    X_train = dataset.make_rows(1200, 1)[0][:200]
    X_test, y_test = dataset.make_rows(400, 2)
    np.savez(tmp / "sensor.npz", X_train=X_train.reshape(200, -1), X_test=X_test.reshape(400, -1), y_test=y_test)


def needs(body: str) -> None:
    for target in ("avr", "cortex-m0", "cortex-m4"):
        if f'target="{target}"' in body or f"--target {target}" in body:
            require_target(target)
    require_tools(*(tool for tool in CROSS_TOOLS if tool in body))  # a block declaring a chip of its own


CROSS_TOOLS = ("riscv64-unknown-elf-gcc", "qemu-system-riscv32", "arm-none-eabi-gcc", "qemu-system-arm")


def run_shell(body: str, cwd: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-e", "-o", "pipefail", "-c", body], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600)


@pytest.fixture
def workdir(scratch, tmp_path):
    """A fresh folder per block with the scratch files linked in."""
    tmp, _, _ = scratch
    for f in tmp.iterdir():
        if f.is_file():
            (tmp_path / f.name).symlink_to(f)
    return tmp_path


@pytest.mark.parametrize("block", [b for b in BLOCKS if not b[3].startswith("not run here:")], ids=block_id)
def test_block_runs(block, scratch, workdir, monkeypatch):
    where, lang, body, note = block
    tmp, split, env = scratch
    body = substituted(body, note)
    needs(body)
    cluster = None
    try:
        if "$SCHEDULER" in body or "LocalCluster" in body:
            distributed = pytest.importorskip("distributed")
            if "$SCHEDULER" in body:
                cluster = distributed.LocalCluster(n_workers=1, threads_per_worker=1, dashboard_address=None)
                env = {**env, "SCHEDULER": cluster.scheduler_address}
        if lang == "sh":
            if "scripts/fuzz.py" in body:
                body = body.replace("python scripts/", f"python {REPO}/scripts/")
            run = run_shell(body, workdir, env)
            assert run.returncode == 0, f"{where}:\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
            check_output(where, run.stdout + run.stderr)
            return
        monkeypatch.chdir(workdir)
        import tinycc_ml

        namespace = {"tinycc_ml": tinycc_ml, **split, "X": split["X_train"], "y": split["y_train"]}
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(compile(body, where, "exec"), namespace)  # noqa: S102 - the docs' own code
        check_output(where, printed.getvalue())
    finally:
        if cluster is not None:
            cluster.close()


def test_the_command_line_synopsis_matches_the_parser():
    """The ```text synopsis of the "Command line" page: each command's options exist, and what is optional is bracketed
    (`--target` of compile has a default, so it is shown in brackets; report and fit require it)."""
    text = (REPO / "docs" / "guide" / "cli.md").read_text()
    synopsis = text.split("# Command line", 1)[1].split("```text\n", 1)[1].split("```", 1)[0]
    for command in ("compile", "report", "fit"):
        lines = []
        for ln in synopsis.splitlines():
            if ln.startswith(f"tinycc-ml {command} ") or (lines and ln.startswith(" ")):
                lines.append(ln.split("#")[0])
            elif lines:
                break
        usage = " ".join(lines)
        help_text = subprocess.run([sys.executable, "-m", "tinycc_ml", command, "--help"], capture_output=True,
                                   text=True, env={**os.environ, "PYTHONPATH": str(REPO)}).stdout
        for option in set(re.findall(r"--[a-z][a-z-]+", usage)):
            assert option in help_text, (command, option)
        bracketed = " ".join(re.findall(r"\[[^\]]*\]", usage))
        target_optional = "--target" in bracketed
        assert target_optional == (command == "compile"), (command, usage)


def test_the_docs_say_where_usps10_comes_from():
    text = (REPO / "docs" / "guide" / "fit.md").read_text()
    first = text.index("usps10.npz")
    assert "where it comes from" in text[first:first + 400] and "data/usps/usps10.npz" in text
    assert "not shipped\nwith tinycc-ml" in text and "LIBSVM" in text
    assert (REPO / "data" / "usps" / "usps10.npz").is_file()  # the copy the docs name
    text = (REPO / "docs" / "guide" / "python-api.md").read_text()
    assert "<PREFIX>_WITH_FLOAT" in text and "kws_quantise(const float *x, int16_t *x_int)" in text
