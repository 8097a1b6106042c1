"""What the tree importers (scikit-learn, XGBoost, LightGBM) share: one node table built from many
trees, and reading the boosting libraries' model files as text (never unpickled)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tinycc_ml.errors import ModelFileError
from tinycc_ml.models.trees import TreeEnsembleModel

REGRESSION = {"kind": "regression"}
MAX_FILE_BYTES = 256 << 20


class TreeTable:
    """Concatenates trees into one node table."""

    def __init__(self, width: int):
        self.width = width
        self.feature, self.threshold, self.left, self.right, self.value = [], [], [], [], []
        self.roots, self.tree_output, self.default_left, self.n = [], [], [], 0

    def add(self, feature, threshold, left, right, value, output: int = -1, default_left=None) -> None:
        leaf = np.asarray(left) < 0
        dl = np.zeros(len(leaf), dtype=np.int64) if default_left is None else np.asarray(default_left, np.int64)
        self.default_left.append(np.where(leaf, 0, dl))
        self.roots.append(self.n)
        self.tree_output.append(output)
        self.feature.append(np.where(leaf, -1, feature))
        # +inf: scikit-learn's split of the present values (left) from the missing ones (default side);
        # the largest float32 makes the same decision on every finite input
        threshold = np.where(np.asarray(threshold) == np.inf, float(np.finfo(np.float32).max), threshold)
        self.threshold.append(np.where(leaf, 0.0, threshold))
        self.left.append(np.where(leaf, -1, np.asarray(left) + self.n))
        self.right.append(np.where(leaf, -1, np.asarray(right) + self.n))
        self.value.append(np.where(leaf[:, None], np.asarray(value, dtype=np.float64).reshape(len(leaf), -1), 0.0))
        self.n += len(leaf)

    def model(self, base, input_dim: int, binary: bool, source: str, proba: str | None = None,
              link: str = "identity") -> TreeEnsembleModel:
        cat = np.concatenate
        return TreeEnsembleModel(cat(self.feature), cat(self.threshold), cat(self.left), cat(self.right),
                                 cat(self.value), np.array(self.roots), np.array(self.tree_output),
                                 np.asarray(base, dtype=np.float64).reshape(-1), input_dim=input_dim,
                                 binary=binary, source=source, default_left=cat(self.default_left), proba=proba,
                                 link=link)


def read_model_text(path: Path, what: str) -> str:
    """The text of a boosting library's model file; a binary, oversized or non-UTF-8 file is refused."""
    if path.stat().st_size > MAX_FILE_BYTES:
        raise ModelFileError(f"{path}: larger than {MAX_FILE_BYTES >> 20} MB; not a {what}")
    data = path.read_bytes()
    if data[:6] == b"\x93NUMPY" or data[:2] == b"PK" or data[:1] == b"\x80":
        raise ModelFileError(f"{path}: this is a binary file (npz/zip or a pickle), not a {what}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ModelFileError(f"{path}: not UTF-8 text, so not a {what}") from None
