"""Mutation fuzzers for model files and IR text, shared by the test suite (driven by hypothesis)
and ``scripts/fuzz.py`` (long runs driven by a seeded random generator).

A case mutates a valid seed (a saved model, or the text form of a compiled graph), feeds it to
the compiler and classifies the outcome:

- ``ok``: accepted; the generated C compiled warnings-clean with the host gcc;
- ``error``: refused with one tinycc_ml error (a TinyccError);
- ``crash``: anything else (a traceback, C that does not compile): a bug.
"""

from __future__ import annotations

import functools
import io
import json
import random
import re
import shutil
import subprocess
import tempfile
import traceback
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import tinycc_ml
from tinycc_ml.codegen.backend import get_backend
from tinycc_ml.errors import TinyccError
from tinycc_ml.ir.fixed import quantise, run_fixed
from tinycc_ml.ir.interp import run_float
from tinycc_ml.ir.text import parse_graph, print_graph
from tinycc_ml.ir.verify import verify
from tinycc_ml.models.bonsai import BonsaiModel
from tinycc_ml.models.protonn import ProtoNNModel
from tinycc_ml.models.prototypes import PrototypeModel
from tinycc_ml.models.saved import META_KEY
from tinycc_ml.passes import run_passes

GCC = shutil.which("gcc")
C_FLAGS = ["-std=c99", "-Wall", "-Wextra", "-Werror", "-c", "-o", "/dev/null"]


class Chooser:
    """Where a mutation's choices come from: hypothesis' ``data.draw`` or a seeded Random."""

    def __init__(self, data=None, rng: random.Random | None = None):
        self.data, self.rng = data, rng

    def integer(self, lo: int, hi: int) -> int:
        if self.data is not None:
            from hypothesis import strategies as st

            return self.data.draw(st.integers(lo, hi))
        return self.rng.randint(lo, hi)

    def choice(self, options):
        return options[self.integer(0, len(options) - 1)]

    def binary(self, max_size: int) -> bytes:
        return bytes(self.integer(0, 255) for _ in range(self.integer(1, max_size)))


@dataclass
class Outcome:
    kind: str  # "ok", "error" or "crash"
    detail: str = ""
    rows: int = 0  # rows compared with an oracle (the library surfaces: one model, many rows)


# ------------------------------------------------------------------------- seeds


@functools.cache
def seed_models() -> tuple:
    rng = np.random.default_rng(7)
    protonn = ProtoNNModel(rng.normal(size=(3, 5)) * (rng.random((3, 5)) < 0.6), rng.normal(size=(3, 4)),
                           rng.normal(size=(3, 4)), 0.8, rng.normal(size=5), rng.uniform(0.5, 2, 5))
    bonsai = BonsaiModel(rng.normal(size=(2, 5)), rng.normal(size=(3 * 3, 2)), rng.normal(size=(3 * 3, 2)),
                         rng.normal(size=(1, 2)), 1.0, 1, z_bias=rng.normal(size=2))
    nearest = PrototypeModel(rng.normal(size=(4, 5)), [0, 1, 2, 1], n_classes=3)
    knn = PrototypeModel(rng.normal(size=(5, 5)), [0, 1, 0, 1, 1], n_classes=2, k=3, mean=rng.normal(size=5),
                         std=rng.uniform(0.5, 2, 5))
    return protonn, bonsai, nearest, knn


@functools.cache
def seed_files() -> tuple[bytes, ...]:
    files = []
    for model in seed_models():
        with tempfile.TemporaryDirectory() as tmp:
            files.append(model.save(Path(tmp) / "m.npz").read_bytes())
    return tuple(files)


@functools.cache
def seed_texts() -> tuple[str, ...]:
    calibration = np.random.default_rng(3).normal(size=(32, 5))
    texts = []
    for model in seed_models():
        texts.append(print_graph(model.lower()))
        for precision in ("float", "int16"):
            graph = tinycc_ml.compile(model, precision=precision,
                                      calibration=None if precision == "float" else calibration).graph
            texts.append(print_graph(graph))
    return tuple(texts)


# ------------------------------------------------------------------------- model-file mutations

DESCRS = ["<f8", "<f4", "<i8", "<i4", "|u1", "|b1", "<c16", "|O", "<U3", ">f8", "<f2", "|V8", "<M8[s]", "junk",
          "<i2", "|i1"]
META_VALUES = [0, -1, 1, 2, 3, 12, 13, 1_000_000_000, 10**30, 1.5, "x", None, [], {}, True, 1e308, -1e308, 1e-320,
               [1] * 3, {"a": 1}]
ARRAY_EDITS = ["scale_up", "scale_down", "nan", "inf", "big", "tiny", "zeros", "transpose", "slice", "empty",
               "negate", "bool", "int", "scalar", "extra_dim"]


def _members(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def _zip(members: dict[str, bytes], deflate: bool) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED if deflate else zipfile.ZIP_STORED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def _npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()


def _load_npy(data: bytes) -> np.ndarray:
    return np.load(io.BytesIO(data), allow_pickle=False)


def _edit_text(text: str, pick: Chooser) -> str:
    for _ in range(pick.integer(1, 3)):
        pos = pick.integer(0, max(0, len(text) - 1))
        how = pick.choice(["delete", "insert", "replace"])
        char = pick.choice(list("{}[]()'\",:0123456789-.eLxTrueFalsNn \\\x00\u00e9"))
        if how == "delete":
            text = text[:pos] + text[pos + 1:]
        elif how == "insert":
            text = text[:pos] + char + text[pos:]
        else:
            text = text[:pos] + char + text[pos + 1:]
    return text


def _edit_header(member: bytes, pick: Chooser) -> bytes:
    header_len = int.from_bytes(member[8:10], "little")
    text = member[10:10 + header_len].decode("latin-1")
    data = member[10 + header_len:]
    how = pick.choice(["shape", "descr", "fortran", "text", "length"])
    if how == "shape":
        shape = tuple(pick.choice([0, 1, 2, 3, 5, 7, -1, 10**6, 10**12, 2**63]) for _ in range(pick.integer(0, 3)))
        text = text[:text.index("'shape'")] + f"'shape': {shape!r}, }}"
    elif how == "descr":
        descr = pick.choice(DESCRS)
        start = text.index("'descr'")
        end = text.index(",", start)
        text = text[:start] + f"'descr': {descr!r}" + text[end:]
    elif how == "fortran":
        text = text.replace("False", "True") if "False" in text else text.replace("True", "False")
    elif how == "text":
        text = _edit_text(text, pick)
    else:
        raw = text.encode("latin-1", "replace")
        return member[:8] + pick.integer(0, 0xFFFF).to_bytes(2, "little") + raw + data
    raw = text.encode("latin-1", "replace")
    return member[:8] + len(raw).to_bytes(2, "little") + raw + data


def _edit_values(array: np.ndarray, pick: Chooser) -> np.ndarray:
    how = pick.choice(ARRAY_EDITS)
    a = np.array(array, dtype=np.float64) if array.dtype.kind in "biuf" else np.array(array)
    flat_index = pick.integer(0, max(0, a.size - 1))
    if how == "scale_up":
        return a * pick.choice([1e10, 1e30, 1e38, 3e38, 1e300])
    if how == "scale_down":
        return a * pick.choice([1e-10, 1e-30, 1e-45, 1e-300])
    if how in ("nan", "inf", "big", "tiny") and a.size:
        a.reshape(-1)[flat_index] = {"nan": np.nan, "inf": -np.inf, "big": 1e300, "tiny": 1e-300}[how]
        return a
    if how == "zeros":
        return np.zeros_like(a)
    if how == "transpose":
        return a.T
    if how == "slice" and a.ndim:
        return a[: max(0, a.shape[0] - 1)]
    if how == "empty":
        return np.zeros((0,) + a.shape[1:])
    if how == "negate":
        return -a
    if how == "bool":
        return a > 0
    if how == "int":
        return np.round(a * 1000).astype(np.int64)
    if how == "scalar":
        return np.asarray(a.reshape(-1)[0] if a.size else 0.0)
    return a[None]


def mutate_model_file(pick: Chooser) -> bytes:
    """One hostile variant of a seed model file."""
    data = seed_files()[pick.integer(0, len(seed_files()) - 1)]
    kind = pick.choice(["bytes", "truncate", "member", "header", "meta", "values", "structure"])
    if kind == "bytes":
        out = bytearray(data)
        for _ in range(pick.integer(1, 8)):
            out[pick.integer(0, len(out) - 1)] = pick.integer(0, 255)
        return bytes(out)
    if kind == "truncate":
        return data[:pick.integer(0, len(data) - 1)]
    members = _members(data)
    names = sorted(members)
    name = pick.choice(names)
    if kind == "member":
        raw = bytearray(members[name])
        for _ in range(pick.integer(1, 6)):
            pos = pick.integer(0, min(len(raw) - 1, 160) if pick.integer(0, 1) else len(raw) - 1)
            raw[pos] = pick.integer(0, 255)
        members[name] = bytes(raw)
    elif kind == "header":
        members[name] = _edit_header(members[name], pick)
    elif kind == "meta":
        header = json.loads(_load_npy(members[f"{META_KEY}.npy"]).tobytes())
        how = pick.choice(["value", "drop", "family", "text", "type"])
        if how in ("value", "drop") and header["meta"]:
            key = pick.choice(sorted(header["meta"]))
            if how == "value":
                header["meta"][key] = pick.choice(META_VALUES)
            else:
                del header["meta"][key]
        elif how == "family":
            header["family"] = pick.choice(["protonn", "bonsai", "prototype", "knn", "", None, ["protonn"], 3])
        elif how == "type":
            header = pick.choice([[header], "protonn", None, 3, {"format": header["format"]}])
        text = json.dumps(header)
        if how == "text":
            text = _edit_text(text, pick)
        members[f"{META_KEY}.npy"] = _npy(np.frombuffer(text.encode("utf-8", "replace"), dtype=np.uint8))
    elif kind == "values":
        if name.startswith(META_KEY):
            name = names[0] if names[0] != name else names[-1]
        members[name] = _npy(_edit_values(_load_npy(members[name]), pick))
    else:
        how = pick.choice(["drop", "duplicate", "extra", "rename"])
        if how == "drop":
            del members[name]
        elif how == "duplicate":
            members[pick.choice(names)] = members[name]
        elif how == "extra":
            members[pick.choice(["x.npy", "notes.txt", "W.npy/", "mean.npy"])] = pick.binary(64)
        else:
            members[pick.choice(["A.npy", "transform.npy", "z_bias.npy", "W"])] = members.pop(name)
    return _zip(members, deflate=bool(pick.integer(0, 1)))


def exception_and_place(exc: BaseException) -> str:
    """The exception and the innermost frame it came from."""
    frame = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
    place = f" at {Path(frame.filename).name}:{frame.lineno}" if frame else ""
    return f"{type(exc).__name__}{place}: {exc}"[:500]


def missing_compiler(name: str) -> str:
    """'' (the check is skipped) or, when toolchains are required (CI), why the case fails."""
    import os

    required = os.environ.get("TINYCC_ML_REQUIRE_TOOLCHAINS", "").strip() not in ("", "0", "false", "no")
    return f"{name} is not on PATH (TINYCC_ML_REQUIRE_TOOLCHAINS=1)" if required else ""


def c_builds_clean(files: dict[str, str]) -> str:
    """'' when every .c of ``files`` compiles warnings-clean with the host gcc, else gcc's words. Without gcc
    the build is not checked, unless TINYCC_ML_REQUIRE_TOOLCHAINS=1 (CI): then that is the failure."""
    if GCC is None:
        return missing_compiler("gcc")
    with tempfile.TemporaryDirectory(prefix="tinycc-ml-fuzz-") as tmp:
        for name, text in files.items():
            (Path(tmp) / name).write_text(text)
        for name in files:
            if name.endswith(".c"):
                run = subprocess.run([GCC, *C_FLAGS, str(Path(tmp) / name)], capture_output=True, text=True,
                                     timeout=120)
                if run.returncode:
                    return run.stderr[-400:]
    return ""


def run_model_file_case(data: bytes, precision: str = "float") -> Outcome:
    """Load, compile (host) and build the C of one model file."""
    with tempfile.TemporaryDirectory(prefix="tinycc-ml-fuzz-") as tmp:
        path = Path(tmp) / "case.npz"
        path.write_bytes(data)
        try:
            model = tinycc_ml.load_model(path)
            calibration = None
            if precision != "float":
                calibration = np.random.default_rng(0).normal(size=(32, model.input_dim))
            result = tinycc_ml.compile(model, precision=precision, calibration=calibration)
        except TinyccError as exc:
            return Outcome("error", str(exc))
        except Exception as exc:  # noqa: BLE001 - the fuzzer's job is to catch exactly these
            return Outcome("crash", exception_and_place(exc))
    problem = c_builds_clean(result.files)
    return Outcome("crash", f"C does not compile: {problem}") if problem else Outcome("ok")


# ------------------------------------------------------------------------- IR-text mutations

NUMBERS = ["0", "-1", "1", "2", "7", "1e5", "1e300", "-1e-300", "inf", "nan", "300", "65536", "2147483648",
           "99999999999999999999", "0.5", "-0.0"]
ATTRIBUTE_NUMBERS = ["-40", "31", "32", "-2", "15", "16", "64", "-32768", "32767", "2147483647", "-2147483649"]
OPS = ["matvec", "sqdist", "exp", "argmax", "max", "matvec_at", "branch", "segment_min", "kvote", "add", "mul",
       "scale", "const", "clip", "sum", "tanh", "nonsense"]


def mutate_ir_text(pick: Chooser) -> str:
    """One hostile variant of a seed IR text."""
    text = seed_texts()[pick.integer(0, len(seed_texts()) - 1)]
    lines = text.splitlines()
    for _ in range(pick.integer(1, 3)):
        i = pick.integer(1, max(1, len(lines) - 2))
        kind = pick.choice(["number", "number", "attribute", "attribute", "op", "operand", "type", "delete",
                            "duplicate", "swap", "chars", "output"])
        line = lines[i]
        if kind == "attribute":  # an op's integer or real attribute (shift counts, table indexes, factors, scales)
            spots = list(re.finditer(r"\b[a-z_]+ = (-?[0-9][0-9.e+-]*)", line))
            if spots:
                value = pick.choice(spots).span(1)
                line = line[:value[0]] + pick.choice(NUMBERS + ATTRIBUTE_NUMBERS) + line[value[1]:]
        elif kind == "number":
            spots = [k for k, c in enumerate(line) if c.isdigit()]
            if spots:
                k = pick.choice(spots)
                end = k
                while end < len(line) and (line[end].isdigit() or line[end] in ".e-"):
                    end += 1
                line = line[:k] + pick.choice(NUMBERS) + line[end:]
        elif kind == "op" and "(" in line.partition(" = ")[2]:  # the operands' "(" after the "=" (not before)
            head, rest = line.split(" = ", 1)
            line = head + " = " + pick.choice(OPS) + rest[rest.index("("):]
        elif kind == "operand":
            names = [w.strip(",()") for w in text.split() if w.startswith("%")]
            targets = [k for k, w in enumerate(line.split(" ")) if w.startswith("%") and k > 0]
            if names and targets:
                words = line.split(" ")
                k = pick.choice(targets)
                words[k] = pick.choice(names) + ("," if words[k].endswith(",") else "") + \
                    (")" if words[k].endswith(")") else "")
                line = " ".join(words)
        elif kind == "type" and " : " in line:
            head, _ = line.rsplit(" : ", 1)
            line = head + " : " + pick.choice(["f32[]", "f32[3]", "f32[2,2]", "idx[]", "fx16.8[3]", "fx8.-3[2]",
                                               "bool[1]", "f32[4294967296]", "fx64.3[1]"])
        elif kind == "delete":
            del lines[i]
            continue
        elif kind == "duplicate":
            lines.insert(i, line)
        elif kind == "swap":
            j = pick.integer(1, max(1, len(lines) - 2))
            lines[i], lines[j] = lines[j], lines[i]
            continue
        elif kind == "output":
            names = [w.strip(",()") for w in text.split() if w.startswith("%")]
            if names:
                lines.insert(len(lines) - 1, f"  output {pick.choice(['scores', 'prediction', 'x'])} = "
                                             f"{pick.choice(names)}")
            continue
        else:
            line = _edit_text(line, pick)
        lines[i] = line
    return "\n".join(lines) + "\n"


def run_ir_case(text: str) -> Outcome:
    """Parse, verify, interpret and emit (host C, built) one IR text."""
    try:
        graph = parse_graph(text, "<fuzz>")
        verify(graph)
        inputs = graph.inputs()
        if len(inputs) == 1:  # the interpreters run one input vector; the emitter refuses any other graph
            x_type = graph.type(inputs[0])
            rows = np.random.default_rng(0).normal(size=(3, *x_type.shape)) * 4
            if x_type.dtype.is_fixed:
                run_fixed(graph, quantise(rows, x_type.dtype.scale, x_type.dtype.bits))
            else:
                run_float(graph, rows)
        graph = run_passes(graph, ["dce", "plan_memory"])  # what every compile ends with
        output = get_backend("host").emit(graph, "fz", ["fuzz case"])
    except TinyccError as exc:
        return Outcome("error", str(exc))
    except Exception as exc:  # noqa: BLE001 - the fuzzer's job is to catch exactly these
        return Outcome("crash", exception_and_place(exc))
    problem = c_builds_clean(output.files)
    return Outcome("crash", f"C does not compile: {problem}") if problem else Outcome("ok")
