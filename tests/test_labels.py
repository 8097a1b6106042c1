"""Class labels end to end: estimators on any labels, the model file, the compiled header's label
table and <prefix>_predict_label (host C, simavr, Cortex-M0), the host predictor, the report."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_iris
from sklearn.model_selection import train_test_split

import tinycc_ml
from tests.conftest import require_target
from tinycc_ml.api import load_model
from tinycc_ml.codegen.labels import c_string
from tinycc_ml.errors import ModelFileError
from tinycc_ml.ir.fixed import quantise
from tinycc_ml.models import BonsaiClassifier, KNNClassifier, ProtoNNClassifier
from tinycc_ml.models.protonn import init_protonn
from tinycc_ml.models.saved import read_model_file, save_model_file
from tinycc_ml.runtime.simulate import run_on_target
from tinycc_ml.target_report import target_report

STRICT = ["-std=c99", "-Wall", "-Wextra", "-Werror"]


@pytest.fixture(scope="module")
def iris():
    X, y = load_iris(return_X_y=True)
    return train_test_split(X, y, test_size=0.4, random_state=0, stratify=y)


@pytest.fixture(scope="module")
def cancer():
    X, y = load_breast_cancer(return_X_y=True)
    return train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)


def test_gapped_and_string_labels_train_and_predict(iris):
    Xtr, Xte, ytr, yte = iris
    names = np.array(["setosa", "versicolor", "virginica"])
    for make in (lambda: KNNClassifier(k=3), lambda: BonsaiClassifier(epochs=10, random_state=0),
                 lambda: ProtoNNClassifier(n_iter=5, random_state=0)):
        plain = make().fit(Xtr, ytr)
        for labels in (np.array([1, 2, 3]), np.array([0, 2, 4]), np.array([-7, 40000, 3_000_000_000]), names):
            est = make().fit(Xtr, labels[ytr])
            assert est.classes_.tolist() == sorted(labels.tolist())
            np.testing.assert_array_equal(est.predict(Xte), labels[plain.predict(Xte)])
            model = est.to_model()
            assert model.classes.tolist() == labels.tolist()
            np.testing.assert_array_equal(model.predict(Xte), est.predict(Xte))


def test_model_file_keeps_labels_and_old_files_load_as_indices(tmp_path, iris):
    Xtr, Xte, ytr, _ = iris
    model = KNNClassifier().fit(Xtr, np.array(["a", "b", "c"])[ytr]).to_model()
    model.save(tmp_path / "named.npz")
    back = load_model(tmp_path / "named.npz")
    assert back.classes.tolist() == ["a", "b", "c"]
    np.testing.assert_array_equal(back.predict(Xte), model.predict(Xte))
    # a file written before labels were stored: same arrays and meta, no "classes" entry
    family, arrays, meta = read_model_file(tmp_path / "named.npz")
    meta.pop("classes")
    save_model_file(tmp_path / "old.npz", family, arrays, meta)
    old = load_model(tmp_path / "old.npz")
    assert old.classes.tolist() == [0, 1, 2]
    np.testing.assert_array_equal(np.array(["a", "b", "c"])[old.predict(Xte)], model.predict(Xte))


@pytest.mark.parametrize("classes, message", [
    ([0, 1], "2 class labels for a model with 3 classes"),
    ([1, 1, 2], "repeat"),
    ([0.5, 1, 2], "neither all integers nor all strings"),
    (["a", 1, 2], "neither all integers nor all strings"),
])
def test_bad_labels_in_a_model_file(tmp_path, iris, classes, message):
    Xtr, _, ytr, _ = iris
    model = KNNClassifier().fit(Xtr, ytr).to_model()
    family, arrays, meta = model.family, model.arrays(), {**model.meta(), "classes": classes}
    save_model_file(tmp_path / "bad.npz", family, arrays, meta)
    with pytest.raises(ModelFileError, match=message):
        load_model(tmp_path / "bad.npz")


def _compile_and_run_c(tmp_path, result, main: str) -> str:
    gcc = shutil.which("gcc") or shutil.which("cc")
    assert gcc, "a host C compiler is needed"
    out = tmp_path / "c"
    out.mkdir(exist_ok=True)
    for name, text in result.files.items():
        (out / name).write_text(text)
    (out / "main.c").write_text(main)
    exe = out / "main"
    subprocess.run([gcc, *STRICT, "-O1", "-o", str(exe), str(out / "main.c"), str(out / f"{result.prefix}.c"),
                    "-lm"], check=True, capture_output=True, text=True)
    return subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout


def test_header_label_table_and_predict_label_in_c(tmp_path, iris):
    Xtr, Xte, ytr, _ = iris
    est = KNNClassifier(k=3).fit(Xtr, np.array([1, 2, 3])[ytr])
    result = tinycc_ml.compile(est, name="iris")
    header = result.files["iris.h"]
    assert "#define IRIS_LABELS { 1, 2, 3 }" in header and "#define IRIS_N_CLASSES 3" in header
    assert "int32_t iris_predict_label(const float *x);" in header
    rows = ",".join(f"{v:.9e}f" for v in Xte.reshape(-1))
    main = f"""#include <stdio.h>
#include "iris.h"
static const float X[] = {{ {rows} }};
static const int32_t labels[IRIS_N_CLASSES] = IRIS_LABELS;
int main(void)
{{
    for (int i = 0; i < {len(Xte)}; ++i) {{
        const float *x = X + i * IRIS_INPUT_DIM;
        if (labels[iris_predict(x)] != iris_predict_label(x)) return 1;
        printf("%ld\\n", (long)iris_predict_label(x));
    }}
    return 0;
}}
"""
    printed = np.array(_compile_and_run_c(tmp_path, result, main).split(), dtype=np.int64)
    np.testing.assert_array_equal(printed, est.predict(Xte))
    np.testing.assert_array_equal(result.load().predict(Xte), est.predict(Xte))


def test_string_label_table_in_c(tmp_path, cancer):
    Xtr, Xte, ytr, _ = cancer
    names = np.array(['malignant "M"', "benign? \\ ü"])  # quotes, backslash, '?', UTF-8 survive
    est = BonsaiClassifier(epochs=8, random_state=0).fit(Xtr, names[ytr])
    assert est.classes_.tolist() == sorted(names.tolist())
    result = tinycc_ml.compile(est, name="cancer")
    header = result.files["cancer.h"]
    assert "#define CANCER_LABEL_NAMES {" in header
    assert "const char *cancer_predict_label(const float *x);" in header
    rows = ",".join(f"{v:.9e}f" for v in Xte[:40].reshape(-1))
    main = f"""#include <stdio.h>
#include "cancer.h"
static const float X[] = {{ {rows} }};
int main(void)
{{
    for (int i = 0; i < 40; ++i) printf("%s\\n", cancer_predict_label(X + i * CANCER_INPUT_DIM));
    return 0;
}}
"""
    printed = _compile_and_run_c(tmp_path, result, main).splitlines()
    assert printed == est.predict(Xte[:40]).tolist()
    assert result.load().predict(Xte[:40]).tolist() == printed


def test_c_string_escapes():
    assert c_string('a"b\\c') == '"a\\"b\\\\c"'
    assert c_string("??=") == '"\\077\\077="'  # no trigraph can form
    assert c_string("é\n") == '"\\303\\251\\012"'


WRAP_H = """#include <stdint.h>
int lab_predict(const int16_t *x);
void lab_scores(const int16_t *x, {s_t} *scores);
"""
WRAP_C = """#include <string.h>
#ifdef __AVR__ /* string labels stay in flash: <prefix>_predict_label gives a flash address */
#include <avr/pgmspace.h>
#define LAB_STRCMP strcmp_P
#else
#define LAB_STRCMP strcmp
#endif
#include "lab.h"
#include "{p}.h"
/* the label function on the target; its label mapped back to an index for the harness */
int lab_predict(const int16_t *x)
{{
{body}
}}
void lab_scores(const int16_t *x, {s_t} *scores) {{ {p}_scores(x, scores); }}
"""
INT_BODY = """    static const int32_t labels[{P}_N_CLASSES] = {P}_LABELS;
    const int32_t label = {p}_predict_label(x);
    for (int i = 0; i < {P}_N_CLASSES; ++i) if (labels[i] == label) return i;
    return -1;"""
STR_BODY = """    static const char *const names[{P}_N_CLASSES] = {P}_LABEL_NAMES;
    const char *label = {p}_predict_label(x);
    for (int i = 0; i < {P}_N_CLASSES; ++i) if (LAB_STRCMP(names[i], label) == 0) return i;
    return -1;"""


@pytest.mark.parametrize("target", ["avr", "cortex-m0"])
@pytest.mark.parametrize("kind", ["gapped", "strings"])
def test_labels_on_simulated_targets(tmp_path, iris, target, kind):
    require_target(target)
    Xtr, Xte, ytr, _ = iris
    labels = np.array([0, 2, 4]) if kind == "gapped" else np.array(["setosa", "versicolor", "virginica"])
    est = KNNClassifier(k=3).fit(Xtr, labels[ytr])
    est.to_model().save(tmp_path / "iris.npz")
    result = tinycc_ml.compile(tmp_path / "iris.npz", target=target, precision="int16", calibration=Xtr,
                               out_dir=tmp_path / "out", name="iris")
    out = result.output
    (tmp_path / "out" / "lab.h").write_text(WRAP_H.format(s_t=out.score_ctype))
    body = (INT_BODY if kind == "gapped" else STR_BODY).format(p="iris", P="IRIS")
    (tmp_path / "out" / "lab.c").write_text(WRAP_C.format(p="iris", s_t=out.score_ctype, body=body))
    xin = quantise(Xte, out.input_scale, 16).astype(np.int16)
    run = run_on_target(target, [tmp_path / "out" / "iris.c", tmp_path / "out" / "lab.c"], tmp_path / "out" / "lab.h",
                        "lab", xin, out.n_scores, out.input_ctype, out.score_ctype)
    host = tinycc_ml.compile(tmp_path / "iris.npz", precision="int16", calibration=Xtr).load()
    on_target = labels[np.asarray(run.predictions)]
    np.testing.assert_array_equal(on_target, host.predict(Xte))
    assert np.mean(on_target == est.predict(Xte)) >= 0.95


def test_report_scores_binary_bonsai_by_its_sign_rule(cancer):
    Xtr, Xte, ytr, yte = cancer
    names = np.array(["malignant", "benign"])
    est = BonsaiClassifier(epochs=20, random_state=0).fit(Xtr, names[ytr])
    model = est.to_model()
    assert model.n_outputs == 1 and model.classes.tolist() == ["benign", "malignant"]
    report = target_report(model, "host", Xte, names[yte], precision="int16", calibration=Xtr)
    assert report["float_accuracy"] == pytest.approx(np.mean(est.predict(Xte) == names[yte]))
    assert report["float_accuracy"] > 0.9 and report["agreement_with_float"] > 0.97
    assert abs(report["target_accuracy"] - report["float_accuracy"]) <= 0.02


def test_models_without_labels_predict_indices(iris):
    Xtr, Xte, ytr, _ = iris
    model = init_protonn(Xtr, ytr, projection_dim=3, prototypes_per_class=2)
    assert model.classes.tolist() == [0, 1, 2]
    np.testing.assert_array_equal(tinycc_ml.compile(model).load().predict(Xte), model.predict(Xte))
