"""`tinycc-ml fit --start ESTIMATOR`: the search climbs that estimator's family only, keeping its settings; the
text is parsed (a class and literal keyword settings), never evaluated."""

from __future__ import annotations

import json

import pytest

from tests.conftest import require_target
from tests.test_fit import _cli, iris, iris_file  # noqa: F401 (fixtures)


def test_cli_fit_starts_from_the_users_estimator(iris_file, tmp_path):  # noqa: F811
    require_target("host")
    out = tmp_path / "out"
    proc = _cli("fit", str(iris_file), "--target", "host", "--max-flash", "3K", "--sizes", "2", "--time-budget",
                "300", "--start", 'RandomForestClassifier(max_depth=3, criterion="entropy")', "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    front = json.loads((out / "pareto.json").read_text())
    families = {c["family"] for c in front["candidates"]}
    assert families == {"random-forest"}, families
    assert all(c["settings"]["criterion"] == "entropy" and c["settings"]["max_depth"] == 3
               for c in front["candidates"])


@pytest.mark.parametrize("start, message", [
    ("SVC()", "'SVC' cannot start a search"),
    ("RandomForestClassifier(max_depth=__import__('os').getpid())", "is not a literal"),
    ("RandomForestClassifier(8)", "by name"),
    ("RandomForestClassifier(depth=3)", "unexpected keyword argument 'depth'"),
    ("RandomForestClassifier(", "not an estimator"),
    # values scikit-learn's own parameter validation refuses: said before any training (was a worker's traceback)
    ("LogisticRegression(C=-1)", "The 'C' parameter of LogisticRegression must be"),
    ('LogisticRegression(solver="foo")', "The 'solver' parameter of LogisticRegression must be"),
    ("RandomForestClassifier(max_depth=-3)", "The 'max_depth' parameter of RandomForestClassifier must be"),
])
def test_cli_fit_refuses_a_start_it_cannot_use_in_one_line(iris_file, tmp_path, start, message):  # noqa: F811
    out = tmp_path / "out"
    proc = _cli("fit", str(iris_file), "--target", "host", "--start", start, "-o", str(out))
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and message in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr and not out.exists()


def test_cli_fit_starts_from_a_model_file(iris_file, tmp_path):  # noqa: F811
    """A model file starts the search of its family with what the file keeps: a tanh MLP's activation; a
    nearest-prototype file (a format three families share) is refused naming the classes to give instead."""
    require_target("host")
    import warnings

    import numpy as np
    from sklearn.neural_network import MLPClassifier

    import tinycc_ml
    from tinycc_ml.models.npc import NearestPrototypeClassifier

    data = np.load(iris_file)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mlp = MLPClassifier((6,), activation="tanh", max_iter=50, random_state=0).fit(data["X_train"], data["y_train"])
    start = tinycc_ml.save_model(mlp, tmp_path / "mine.npz")
    out = tmp_path / "out"
    proc = _cli("fit", str(iris_file), "--target", "host", "--max-flash", "3K", "--sizes", "2", "--start", str(start),
                "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    candidates = json.loads((out / "pareto.json").read_text())["candidates"]
    assert {c["family"] for c in candidates} == {"mlp"}
    assert all(c["settings"]["activation"] == "tanh" for c in candidates)
    npc = NearestPrototypeClassifier(prototypes_per_class=1).fit(data["X_train"], data["y_train"])
    other = tinycc_ml.save_model(npc, tmp_path / "npc.npz")
    proc = _cli("fit", str(iris_file), "--target", "host", "--start", str(other), "-o", str(tmp_path / "out2"))
    assert proc.returncode == 2 and "--start SNCClassifier" in proc.stderr and "Traceback" not in proc.stderr
