"""The UCI letter data set (letter-26: 20,000 rows, 16 integer features 0-15, 26 classes), offline.

Nothing outside the package registries is reachable here, but Debian packages R's ``mlbench``, which ships
the data as ``LetterRecognition.rda``. It is unpacked without installing R and read with ``rdata`` (a pure
Python reader of R's data files; in the ``bench`` extra):

    apt-get download r-cran-mlbench && dpkg -x r-cran-mlbench_*.deb ~/.cache/tinycc-ml/mlbench
    python benchmarks/letter.py            # prints the split's shapes and class counts

The split is UCI's own: the first 16,000 rows train, the last 4,000 test (the data set's documentation and the
nearest-prototype/ProtoNN papers' letter-26 tables use 16,000 training rows). Labels are 0-25 for A-Z.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np

RDA_NAME = "LetterRecognition.rda"
RDA_IN_PACKAGE = Path("usr/lib/R/site-library/mlbench/data") / RDA_NAME
N_TRAIN = 16_000


def _cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "tinycc-ml" / "mlbench"


def _candidates() -> list[Path]:
    return [Path("/") / RDA_IN_PACKAGE, _cache_dir() / RDA_IN_PACKAGE]


def _unpack_from_debian() -> Path | None:
    """apt-get download + dpkg -x into the cache (no root, no R); None when apt cannot fetch it."""
    dest = _cache_dir()
    with tempfile.TemporaryDirectory() as tmp:
        got = subprocess.run(["apt-get", "download", "r-cran-mlbench"], cwd=tmp, capture_output=True)
        debs = list(Path(tmp).glob("r-cran-mlbench_*.deb"))
        if got.returncode != 0 or not debs:
            return None
        dest.mkdir(parents=True, exist_ok=True)
        subprocess.run(["dpkg", "-x", str(debs[0]), str(dest)], check=True)
    path = dest / RDA_IN_PACKAGE
    return path if path.exists() else None


def rda_path() -> Path:
    for path in _candidates():
        if path.exists():
            return path
    path = _unpack_from_debian()
    if path is None:
        raise FileNotFoundError(f"{RDA_NAME} not found in {', '.join(map(str, _candidates()))} and "
                                "`apt-get download r-cran-mlbench` failed (see benchmarks/letter.py)")
    return path


def load_letter() -> tuple[np.ndarray, np.ndarray, list[str]]:
    """All 20,000 rows in the file's order: X float64 (16 features), y int64 0-25, the letters."""
    import rdata  # noqa: PLC0415 (benchmark-only dependency)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Unknown encoding. Assumed ASCII." (the file's letters are ASCII)
        frame = rdata.conversion.convert(rdata.parser.parse_file(rda_path()))["LetterRecognition"]
    letters = [str(c) for c in frame["lettr"].cat.categories]
    y = frame["lettr"].cat.codes.to_numpy().astype(np.int64)
    X = frame.drop(columns=["lettr"]).to_numpy(dtype=np.float64)
    return X, y, letters


def letter26() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """UCI's split: X_train (16,000 x 16), y_train, X_test (4,000 x 16), y_test."""
    X, y, _ = load_letter()
    return X[:N_TRAIN], y[:N_TRAIN], X[N_TRAIN:], y[N_TRAIN:]


if __name__ == "__main__":
    X, y, letters = load_letter()
    Xtr, ytr, Xte, yte = letter26()
    print(f"{rda_path()}: {X.shape[0]} rows x {X.shape[1]} features, {len(letters)} classes "
          f"({letters[0]}-{letters[-1]}), values {X.min():g}-{X.max():g}")
    print(f"train {Xtr.shape}, test {Xte.shape}; test rows per class {np.bincount(yte, minlength=26).min()}-"
          f"{np.bincount(yte, minlength=26).max()}")
    sys.exit(0)
