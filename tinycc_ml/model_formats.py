"""The model files and folders tinycc-ml reads: one table, which ``load_model`` dispatches on and the command
line's help lists (this module imports nothing heavy: the readers load only when a file of theirs is read)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ModelFormat:
    suffixes: tuple[str, ...]
    what: str  # in words, for the help texts
    reader: str | None  # "module:function" taking the path; None: tinycc-ml's own .npz model file


MODEL_FORMATS = (
    ModelFormat((".npz",), "tinycc-ml's model file", None),
    ModelFormat((".tflite",), "a TFLite int8 or float network", "tinycc_ml.importers.tflite:load_tflite_model"),
    ModelFormat((".onnx",), "an ONNX network or scikit-learn export", "tinycc_ml.importers.onnx:load_onnx"),
    ModelFormat((".json", ".ubj"), "an XGBoost model", "tinycc_ml.importers.xgboost:load_xgboost_file"),
    ModelFormat((".txt",), "a LightGBM model", "tinycc_ml.importers.lightgbm:load_lightgbm_file"),
)
MODEL_FOLDERS = "an EdgeML model folder (ProtoNN, Bonsai: W.npy, B.npy, Z.npy, ...)"


def format_for(suffix: str) -> ModelFormat | None:
    """The format a file name's suffix (any case) says, None for one tinycc-ml does not read."""
    suffix = suffix.lower()
    return next((f for f in MODEL_FORMATS if suffix in f.suffixes), None)


def describe_formats() -> str:
    """Every format in words, for help texts: "tinycc-ml's model file (.npz), ..., or an EdgeML model folder"."""
    files = [f"{f.what} ({', '.join(f.suffixes)})" for f in MODEL_FORMATS]
    return ", ".join(files) + f", or {MODEL_FOLDERS}"
