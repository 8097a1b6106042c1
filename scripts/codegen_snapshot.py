"""Compile a fixed set of models for every target and precision and write the generated files
(plus a hash list) to a folder, so two versions of the compiler can be diffed.

    python scripts/codegen_snapshot.py OUT_DIR [--models-dir DIR]

The models are trained once (small, seeded) and saved under --models-dir; later runs reuse the
saved files, so trainer changes do not move the comparison.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
from pathlib import Path

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import tinycc_ml  # noqa: E402
from tinycc_ml.errors import TinyccError  # noqa: E402

USPS = Path(__file__).resolve().parents[1] / "data" / "usps" / "usps10.npz"


def train_models(models_dir: Path) -> None:
    from sklearn.datasets import load_digits

    from tinycc_ml.models.bonsai_trainer import BonsaiClassifier
    from tinycc_ml.models.knn import KNNClassifier
    from tinycc_ml.models.npc import NearestPrototypeClassifier
    from tinycc_ml.models.protonn import ProtoNNModel
    from tinycc_ml.models.protonn_trainer import ProtoNNClassifier
    from tinycc_ml.models.snc import SNCClassifier

    X, y = load_digits(return_X_y=True)
    models_dir.mkdir(parents=True, exist_ok=True)
    np.save(models_dir / "calib_digits.npy", X[:400])
    ProtoNNClassifier(projection_dim=12, n_prototypes=20, n_iter=5, random_state=0, verbose=0).fit(X, y) \
        .to_model().save(models_dir / "protonn_digits.npz")
    BonsaiClassifier(projection_dim=10, depth=2, epochs=5, random_state=0).fit(X, y) \
        .to_model().save(models_dir / "bonsai_digits.npz")
    NearestPrototypeClassifier(prototypes_per_class=3, max_stages=2, epochs_per_stage=3, n_restarts=1,
                               random_state=0).fit(X, y).to_model().save(models_dir / "npc_digits.npz")
    KNNClassifier(k=3).fit(X[:120], y[:120]).to_model().save(models_dir / "knn_digits.npz")
    SNCClassifier(compression=0.05, random_state=0).fit(X, y).to_model().save(models_dir / "snc_digits.npz")
    # benchmarks/protonn_cycles.py --random: USPS-10's shape
    d = np.load(USPS)
    Xu = d["X_train"]
    np.save(models_dir / "calib_usps.npy", Xu[:2000])
    rng = np.random.default_rng(0)
    W = rng.normal(size=(25, 256)) / np.sqrt(256)
    P = Xu[rng.choice(len(Xu), 55)] @ W.T
    Z = rng.normal(size=(10, 55))
    ProtoNNModel(W, P.T, Z, 0.5 / np.sqrt(25)).save(models_dir / "protonn_usps_random.npz")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--models-dir", type=Path, default=Path("/tmp/tinycc-ml-snapshot-models"))
    args = ap.parse_args(argv)
    if not (args.models_dir / "protonn_usps_random.npz").exists():
        train_models(args.models_dir)
    args.out.mkdir(parents=True, exist_ok=True)
    lines = []
    for model_path in sorted(args.models_dir.glob("*.npz")):
        calib = np.load(args.models_dir / ("calib_usps.npy" if "usps" in model_path.name else "calib_digits.npy"))
        for target in ("host", "avr", "cortex-m0"):
            for precision in ("float", "int16", "int8"):
                tag = f"{model_path.stem}-{target}-{precision}"
                try:
                    res = tinycc_ml.compile(model_path, target=target, precision=precision,
                                            calibration=None if precision == "float" else calib, name="m")
                except TinyccError as exc:
                    text = f"error: {type(exc).__name__}: {exc}\n"
                    (args.out / f"{tag}.error").write_text(text)
                    lines.append(f"{tag} ERROR {hashlib.sha256(text.encode()).hexdigest()[:16]}")
                    continue
                for name, text in sorted(res.files.items()):
                    (args.out / f"{tag}.{name}").write_text(text)
                    lines.append(f"{tag} {name} {hashlib.sha256(text.encode()).hexdigest()[:16]}")
                print(lines[-1], flush=True)
    (args.out / "HASHES").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
