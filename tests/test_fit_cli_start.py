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
])
def test_cli_fit_refuses_a_start_it_cannot_use_in_one_line(iris_file, tmp_path, start, message):  # noqa: F811
    out = tmp_path / "out"
    proc = _cli("fit", str(iris_file), "--target", "host", "--start", start, "-o", str(out))
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and message in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr and not out.exists()
