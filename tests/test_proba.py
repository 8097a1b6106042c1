"""Class probabilities: ``predict_proba`` of the models that define them equals scikit-learn's, the
compiled ``<prefix>_proba`` is within 1e-5 of it (float builds) and within the stated bound
(integer builds); models without probabilities say so."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_wine
from sklearn.linear_model import LogisticRegression, SGDClassifier
from sklearn.naive_bayes import GaussianNB
from sklearn.neighbors import KNeighborsClassifier
from sklearn.neural_network import MLPClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import MinMaxScaler, StandardScaler

import tinycc_ml
from tests.conftest import require_target
from tinycc_ml.api import as_model
from tinycc_ml.codegen.backend import get_backend
from tinycc_ml.errors import CompileError, DataError
from tinycc_ml.models.linear import LinearModel
from tinycc_ml.models.proba import proba_from_scores


def _mlp(X, y, hidden=(8,)):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return make_pipeline(StandardScaler(), MLPClassifier(hidden, max_iter=150, random_state=0)).fit(X, y)


@pytest.fixture(scope="module")
def cases():
    X, y = load_wine(return_X_y=True)
    Xb, yb = load_breast_cancer(return_X_y=True)
    Y = np.stack([yb, Xb[:, 0] > 14, Xb[:, 1] > 19], axis=1).astype(int)
    linear = {"logreg": LogisticRegression(max_iter=1000), "logreg_binary": LogisticRegression(max_iter=1000),
              "sgd_log_ovr": SGDClassifier(loss="log_loss", alpha=0.01, random_state=0)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fitted = {name: make_pipeline(StandardScaler(), est).fit(Xb if name == "logreg_binary" else X,
                                                                yb if name == "logreg_binary" else y)
                  for name, est in linear.items()}
    return {"softmax": (_mlp(X, y), X), "gnb": (GaussianNB().fit(X, y), X), "logistic": (_mlp(Xb, yb), Xb),
            "logistic_each": (_mlp(Xb, Y), Xb), "logreg": (fitted["logreg"], X),
            "logreg_binary": (fitted["logreg_binary"], Xb), "sgd_log_ovr": (fitted["sgd_log_ovr"], X)}


@pytest.mark.parametrize("case", ["softmax", "gnb", "logistic", "logistic_each", "logreg", "logreg_binary",
                                  "sgd_log_ovr"])
def test_compiled_probabilities_follow_the_estimator(cases, case):
    require_target("host")
    est, X = cases[case]
    want = est.predict_proba(X)
    np.testing.assert_allclose(as_model(est).predict_proba(X), want, atol=1e-9)
    result = tinycc_ml.compile(est, name="p")
    assert "p_proba(const float *x, float *out);" in result.files["p.h"]
    got = result.load().predict_proba(X)
    assert got.shape == want.shape and np.max(np.abs(got - want)) <= 1e-5
    int16 = tinycc_ml.compile(est, precision="int16", calibration=X, name="p")
    info = int16.report["proba"]
    error = np.max(np.abs(int16.load().predict_proba(X) - want))
    # the C on the calibration rows: what the report measured with the interpreter, within the proven bound
    assert error <= info["calibration_max_abs_error"] + 1e-6
    assert info["calibration_max_abs_error"] <= info["max_abs_error_bound"]
    assert info["calibration_max_abs_error"] < 0.03
    if case == "softmax":  # elsewhere a saturated extreme score (naive Bayes' far classes, a logit of -28 on
        # one row) makes the worst-case bound loose while the probabilities hardly move (measured: above)
        assert info["max_abs_error_bound"] < 0.05


def test_linear_classifiers_read_their_scores_by_their_own_rule(cases, tmp_path):
    """Multinomial logistic regression: softmax; binary: the logistic; SGDClassifier's log loss on several
    classes: one-vs-rest logistics normalised; a loss without probabilities (modified Huber's are clipped
    scores): none. The rule is saved with the model."""
    rules = {case: as_model(cases[case][0]).proba_rule for case in ("logreg", "logreg_binary", "sgd_log_ovr")}
    assert rules == {"logreg": "softmax", "logreg_binary": "logistic", "sgd_log_ovr": "logistic_ovr"}
    X, y = load_wine(return_X_y=True)
    huber = make_pipeline(StandardScaler(), SGDClassifier(loss="modified_huber", random_state=0)).fit(X, y)
    assert as_model(huber).proba_rule == "modified_huber"
    hinge = make_pipeline(StandardScaler(), SGDClassifier(loss="hinge", random_state=0)).fit(X, y)
    assert as_model(hinge).proba_rule is None
    path = tinycc_ml.save_model(cases["sgd_log_ovr"][0], tmp_path / "sgd.npz")
    assert tinycc_ml.load_model(path).proba_rule == "logistic_ovr"


def test_models_without_probabilities_say_so():
    require_target("host")
    model = LinearModel(np.eye(3))
    with pytest.raises(DataError, match="a linear model defines no class probabilities"):
        model.predict_proba(np.eye(3))
    result = tinycc_ml.compile(model, name="lin")
    assert "proba" not in result.files["lin.h"] and "proba" not in result.report
    with pytest.raises(DataError, match="declares no lin_proba"):
        result.load().predict_proba(np.eye(3))


def test_bonsai_trained_with_cross_entropy_has_probabilities(tmp_path):
    require_target("host")
    from tinycc_ml.models.bonsai_trainer import BonsaiClassifier
    from tinycc_ml.models.saved import read_model_file, save_model_file

    X, y = load_wine(return_X_y=True)
    model = BonsaiClassifier(budget_bytes=1024, epochs=5, random_state=0).fit(X, y).to_model()
    assert model.proba_rule == "softmax"  # multi-class default: the cross-entropy loss
    want = model.predict_proba(X)
    np.testing.assert_allclose(want.sum(axis=1), 1.0)
    np.testing.assert_allclose(tinycc_ml.compile(model, name="b").load().predict_proba(X), want, atol=1e-5)
    loaded = tinycc_ml.load_model(model.save(tmp_path / "b.npz"))
    assert loaded.proba_rule == "softmax"
    hinge = BonsaiClassifier(budget_bytes=1024, epochs=2, random_state=0).fit(X, y == 1).to_model()
    assert hinge.proba_rule is None  # binary default: the hinge loss, no probabilities
    family, arrays, meta = read_model_file(hinge.save(tmp_path / "h.npz"))
    save_model_file(tmp_path / "bad.npz", family, arrays, {**meta, "proba": "softmax"})
    with pytest.raises(tinycc_ml.errors.ModelFileError, match="proba 'softmax' does not fit a model with 1 score"):
        tinycc_ml.load_model(tmp_path / "bad.npz")


def test_tree_ensembles_and_protonn_have_their_probabilities():
    """Forests: the mean of the trees' class probabilities (rule "normalise"); gradient boosting: the
    logistic / softmax of the margins; ProtoNN: its scores' positive parts, normalised. The C within 1e-5
    (float) and within the stated bound (int16, digits: inputs on the grid)."""
    from sklearn.datasets import load_digits
    from sklearn.ensemble import GradientBoostingClassifier, RandomForestClassifier

    from tinycc_ml.models.protonn_trainer import ProtoNNClassifier

    require_target("host")
    X, y = load_digits(return_X_y=True)
    Xb, yb = load_breast_cancer(return_X_y=True)
    Xb = Xb.astype(np.float32).astype(np.float64)  # the trees compare float32 inputs
    forest = RandomForestClassifier(n_estimators=4, max_depth=5, random_state=0).fit(X[:600], y[:600])
    boost = GradientBoostingClassifier(n_estimators=4, max_depth=2, random_state=0).fit(Xb, yb)
    for est, rows, rule in ((forest, X[600:800], "normalise"), (boost, Xb, "logistic")):
        assert as_model(est).proba_rule == rule
        want = est.predict_proba(rows)
        np.testing.assert_allclose(as_model(est).predict_proba(rows), want, atol=1e-9)
        assert np.max(np.abs(tinycc_ml.compile(est, name="p").load().predict_proba(rows) - want)) <= 1e-5
    int16 = tinycc_ml.compile(forest, precision="int16", calibration=X[:600], search=False, name="p")
    error = np.max(np.abs(int16.load().predict_proba(X[600:800]) - forest.predict_proba(X[600:800])))
    assert int16.report["proba"]["rule"] == "normalise" and error <= int16.report["proba"]["max_abs_error_bound"]
    protonn = ProtoNNClassifier(random_state=0).fit(X[:600], y[:600]).to_model()
    p = protonn.predict_proba(X[600:700])
    np.testing.assert_allclose(p.sum(axis=1), 1.0)
    np.testing.assert_array_equal(p.argmax(axis=1), protonn.predict_index(X[600:700]))
    assert np.max(np.abs(tinycc_ml.compile(protonn, name="p").load().predict_proba(X[600:700]) - p)) <= 1e-5


@pytest.mark.parametrize("case", ["rbf, 3 classes", "rbf, 2 classes", "NuSVC poly, 10 classes"])
def test_svc_probabilities_are_libsvms_platt_scaling_and_coupling(case, tmp_path):
    """SVC / NuSVC(probability=True): predict_proba is libsvm's Platt scaling of each one-vs-one decision
    coupled into class probabilities (two classes too): the model's within 1e-9 of scikit-learn's, the
    compiled float build's within 1e-4 (float32 scores, double coupling), predictions by the votes as
    scikit-learn's; the constants survive a save; the AVR's C (tables in flash) compiles warning-free."""
    require_target("host")
    from sklearn.datasets import load_digits, load_iris
    from sklearn.svm import SVC, NuSVC

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scikit-learn >= 1.9 deprecates probability=True
        if case == "rbf, 3 classes":
            X, y = load_iris(return_X_y=True)
            est = SVC(probability=True, random_state=0)
        elif case == "rbf, 2 classes":
            X, y = load_breast_cancer(return_X_y=True)
            est = make_pipeline(StandardScaler(), SVC(probability=True, C=0.5, random_state=1))
        else:
            X, y = load_digits(return_X_y=True)
            X, y = X[:600], y[:600]
            est = NuSVC(kernel="poly", degree=2, nu=0.2, probability=True, random_state=0)
        est.fit(X[::2], y[::2])
    test = X[1::2]
    want = est.predict_proba(test)
    model = as_model(est)
    assert model.proba_rule == "platt_coupled"
    np.testing.assert_allclose(model.predict_proba(test), want, atol=1e-9)
    result = tinycc_ml.compile(est, name="svm")
    host = result.load()
    assert np.max(np.abs(host.predict_proba(test) - want)) <= 1e-4
    assert host.predict(test).tolist() == est.predict(test).tolist()
    saved = tinycc_ml.load_model(tinycc_ml.save_model(est, tmp_path / "svc.npz"))
    np.testing.assert_allclose(saved.predict_proba(test), want, atol=1e-9)
    int16 = tinycc_ml.compile(est, precision="int16", calibration=X[::2], name="svm")
    assert np.max(np.abs(int16.load().predict_proba(X[::2]) - est.predict_proba(X[::2]))) <= \
        int16.report["proba"]["calibration_max_abs_error"] + 1e-6
    if case == "rbf, 3 classes":
        require_target("avr")
        import subprocess

        avr = tinycc_ml.compile(est, target="avr", precision="int16", calibration=X[::2], name="svm",
                                out_dir=tmp_path / "avr")
        assert "svm_platt_a" in avr.files["svm.c"] and "PROGMEM" in avr.files["svm.c"]
        subprocess.run(["avr-gcc", "-mmcu=atmega328p", "-Os", "-std=c99", "-Wall", "-Wextra", "-Werror", "-c",
                        str(tmp_path / "avr/svm.c"), "-o", str(tmp_path / "svm.o")], check=True)


@pytest.mark.parametrize("method, data, ensemble", [("sigmoid", "wine", True), ("isotonic", "wine", False),
                                                   ("sigmoid", "breast_cancer", False),
                                                   ("isotonic", "breast_cancer", True)])
def test_calibrated_classifiers_follow_scikit_learn(method, data, ensemble, tmp_path):
    """CalibratedClassifierCV over a linear classifier (in a Pipeline): the model's probabilities within 1e-9
    of scikit-learn's, the compiled float build's within 1e-4, predictions (their argmax) equal; the model
    file keeps it; integer precisions are refused saying why."""
    require_target("host")
    from sklearn.calibration import CalibratedClassifierCV
    from sklearn.svm import LinearSVC

    X, y = (load_wine if data == "wine" else load_breast_cancer)(return_X_y=True)
    base = make_pipeline(StandardScaler(), LinearSVC(C=0.1)) if data == "wine" else LogisticRegression(max_iter=5000)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = CalibratedClassifierCV(base, method=method, ensemble=ensemble, cv=3).fit(X[::2], y[::2])
    test = X[1::2]
    want = est.predict_proba(test)
    model = as_model(est)
    np.testing.assert_allclose(model.predict_proba(test), want, atol=1e-9)
    assert model.predict(test).tolist() == est.predict(test).tolist()
    host = tinycc_ml.compile(est, name="cal").load()
    assert np.max(np.abs(host.predict_proba(test) - want)) <= 1e-4
    assert host.predict(test).tolist() == est.predict(test).tolist()
    saved = tinycc_ml.load_model(tinycc_ml.save_model(est, tmp_path / "cal.npz"))
    np.testing.assert_allclose(saved.predict_proba(test), want, atol=1e-9)
    with pytest.raises(CompileError, match="precision float only"):
        tinycc_ml.compile(est, precision="int16", calibration=X)


def test_calibrated_classifiers_over_what_cannot_be_read_are_refused():
    from sklearn.calibration import CalibratedClassifierCV
    from sklearn.neighbors import NearestCentroid

    X, y = load_wine(return_X_y=True)
    centroids = CalibratedClassifierCV(NearestCentroid(), cv=3).fit(X, y)
    with pytest.raises(CompileError, match="over a NearestCentroid is not supported"):
        tinycc_ml.compile(centroids)
    temperature = CalibratedClassifierCV(LogisticRegression(max_iter=5000), method="temperature", cv=3).fit(X, y)
    with pytest.raises(CompileError, match="method='temperature'"):
        tinycc_ml.compile(temperature)


@pytest.mark.parametrize("sim_target", ["avr", "cortex-m0"], indirect=True)
def test_calibrated_classifiers_run_on_microcontrollers(sim_target, tmp_path):
    """The float build of an isotonic CalibratedClassifierCV in the simulator: its scores (the calibrated
    probabilities) within 1e-4 of scikit-learn's predict_proba, its predictions scikit-learn's."""
    from sklearn.calibration import CalibratedClassifierCV

    from tinycc_ml.codegen.backend import get_backend

    X, y = load_wine(return_X_y=True)
    est = CalibratedClassifierCV(LogisticRegression(max_iter=5000), method="isotonic", cv=3).fit(X[::2], y[::2])
    rows = X[1::2][:12]
    result = tinycc_ml.compile(est, target=sim_target, out_dir=tmp_path, name="cal")
    run = get_backend(sim_target).simulate(tmp_path, result.output, rows)
    assert np.max(np.abs(np.asarray(run.scores) - est.predict_proba(rows))) <= 1e-4
    assert est.classes_[np.asarray(run.predictions)].tolist() == est.predict(rows).tolist()


@pytest.mark.parametrize("front", ["scaler", "scaler+pca"])
@pytest.mark.parametrize("method", ["sigmoid", "isotonic"])
def test_steps_before_a_calibrated_classifier_fold_into_its_decisions(front, method):
    """Pipeline(StandardScaler[, PCA], CalibratedClassifierCV(LinearSVC)), scikit-learn's recommended route to
    probabilities: the steps fold into the decisions' mat-vec (the model within 1e-9 of scikit-learn's)."""
    require_target("host")
    from sklearn.calibration import CalibratedClassifierCV
    from sklearn.decomposition import PCA
    from sklearn.svm import LinearSVC

    X, y = load_wine(return_X_y=True)
    steps = [StandardScaler()] + ([PCA(6, random_state=0)] if front == "scaler+pca" else [])
    est = make_pipeline(*steps, CalibratedClassifierCV(LinearSVC(C=0.1), method=method, cv=3)).fit(X[::2], y[::2])
    test = X[1::2]
    want = est.predict_proba(test)
    np.testing.assert_allclose(as_model(est).predict_proba(test), want, atol=1e-9)
    host = tinycc_ml.compile(est, name="cal").load()
    assert np.max(np.abs(host.predict_proba(test) - want)) <= 1e-4
    assert host.predict(test).tolist() == est.predict(test).tolist()


@pytest.mark.parametrize("data", ["wine", "breast_cancer"])
def test_one_vs_rest_logistic_regressions_give_scikit_learns_probabilities(data, tmp_path):
    """OneVsRestClassifier(LogisticRegression) (scikit-learn 1.7's replacement of multi_class="ovr"): one linear
    model whose probabilities are the normalised logistics of its classes (two classes: one estimator), within
    1e-9 (the model) and 1e-4 (float C) of scikit-learn's."""
    require_target("host")
    from sklearn.multiclass import OneVsRestClassifier

    X, y = (load_wine if data == "wine" else load_breast_cancer)(return_X_y=True)
    est = make_pipeline(StandardScaler(), OneVsRestClassifier(LogisticRegression(max_iter=5000))).fit(X[::2], y[::2])
    test = X[1::2]
    want = est.predict_proba(test)
    model = as_model(est)
    np.testing.assert_allclose(model.predict_proba(test), want, atol=1e-9)
    assert model.predict(test).tolist() == est.predict(test).tolist()
    host = tinycc_ml.compile(est, name="ovr").load()
    assert np.max(np.abs(host.predict_proba(test) - want)) <= 1e-4
    assert host.predict(test).tolist() == est.predict(test).tolist()


def test_one_vs_rest_over_what_is_not_linear_is_refused():
    from sklearn.multiclass import OneVsRestClassifier
    from sklearn.tree import DecisionTreeClassifier

    X, y = load_wine(return_X_y=True)
    with pytest.raises(CompileError, match="OneVsRestClassifier over a DecisionTreeClassifier"):
        tinycc_ml.compile(OneVsRestClassifier(DecisionTreeClassifier(max_depth=2)).fit(X, y))


def _huber_and_knn_cases():
    X, y = load_wine(return_X_y=True)
    Xb, yb = load_breast_cancer(return_X_y=True)
    def huber():
        return make_pipeline(StandardScaler(), SGDClassifier(loss="modified_huber", alpha=0.01, random_state=0))

    return {
        "huber_binary": (huber().fit(Xb[::2], yb[::2]), Xb),
        "huber_3": (huber().fit(X[::2], y[::2]), X),
        "minmax_knn5": (make_pipeline(MinMaxScaler(), KNeighborsClassifier(5)).fit(X[::2], y[::2]), X),
        "standard_knn4": (make_pipeline(StandardScaler(), KNeighborsClassifier(4)).fit(Xb[::2], yb[::2]), Xb),
        "standard_knn1": (make_pipeline(StandardScaler(), KNeighborsClassifier(1)).fit(X[::2], y[::2]), X),
    }


@pytest.fixture(scope="module")
def huber_and_knn():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _huber_and_knn_cases()


@pytest.mark.parametrize("case, rule", [("huber_binary", "modified_huber"), ("huber_3", "modified_huber"),
                                        ("minmax_knn5", "normalise"), ("standard_knn4", "normalise"),
                                        ("standard_knn1", "one_hot")])
def test_modified_huber_and_knn_pipelines_have_scikit_learns_probabilities(huber_and_knn, case, rule, tmp_path):
    """SGDClassifier(loss="modified_huber") (binary: (clip(d, -1, 1) + 1) / 2; several classes: those over their
    sum, uniform where it is 0) and KNeighborsClassifier behind a scaler (the k votes' fractions; k = 1: the
    neighbour's class) have scikit-learn's predict_proba (refused with a DataError before): the model's within
    1e-9, the host float C's within 1e-5, the int16 C's within the report's bound, which the rows meet; the
    rule survives a save."""
    require_target("host")
    est, X = huber_and_knn[case]
    want = est.predict_proba(X)
    model = as_model(est)
    assert model.proba_rule == rule
    np.testing.assert_allclose(model.predict_proba(X), want, atol=1e-9)
    if case == "huber_3":  # rows whose every clipped score is -1: scikit-learn's uniform probabilities
        assert np.any(np.all(np.abs(want - 1 / 3) < 1e-12, axis=1))
    host = tinycc_ml.compile(est, name="p").load()
    assert np.max(np.abs(host.predict_proba(X) - want)) <= 1e-5
    assert host.predict(X).tolist() == est.predict(X).tolist()
    int16 = tinycc_ml.compile(est, precision="int16", calibration=X, name="p")
    info = int16.report["proba"]
    error = np.max(np.abs(int16.load().predict_proba(X) - want))
    assert error <= info["calibration_max_abs_error"] + 1e-6 and error <= info["max_abs_error_bound"]
    saved = tinycc_ml.load_model(tinycc_ml.save_model(est, tmp_path / "m.npz"))
    assert saved.proba_rule == rule
    np.testing.assert_allclose(saved.predict_proba(X), want, atol=1e-9)


@pytest.mark.parametrize("sim_target", ["cortex-m4"], indirect=True)
def test_modified_huber_and_knn_probabilities_on_the_m4(huber_and_knn, sim_target, tmp_path):
    """The same models' float and int16 builds in the Cortex-M4 simulator (the firmware built with <prefix>_proba,
    -Wall -Wextra -Werror): their scores read by the rule are scikit-learn's probabilities (float within 1e-5,
    int16 within the report's bound), their labels scikit-learn's."""
    for i, (case, (est, X)) in enumerate(huber_and_knn.items()):
        rows = X[1::7][:12]
        want = est.predict_proba(rows)
        for precision in ("float", "int16"):
            out = tmp_path / f"{case}_{precision}"
            result = tinycc_ml.compile(est, target=sim_target, precision=precision, calibration=X, out_dir=out,
                                       name=f"p{i}")
            assert f"p{i}_proba(" in result.files[f"p{i}.c"]
            run = get_backend(sim_target).simulate(out, result.output, rows)
            scores_type = result.graph.type(result.graph.output("scores")).dtype
            scale = 1.0 if precision == "float" else 2.0 ** -scores_type.scale
            got = proba_from_scores(np.asarray(run.scores, dtype=np.float64) * scale, as_model(est).proba_rule)
            bound = 1e-5 if precision == "float" else result.report["proba"]["max_abs_error_bound"]
            assert np.max(np.abs(got - want)) <= bound, (case, precision)
            assert est.classes_[np.asarray(run.predictions)].tolist() == est.predict(rows).tolist()


def _nearest_centroid_cases():
    from sklearn.decomposition import PCA
    from sklearn.neighbors import NearestCentroid

    X, y = load_wine(return_X_y=True)
    Xb, yb = load_breast_cancer(return_X_y=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a feature without spread in one class: scikit-learn warns
        return {
            "raw": (NearestCentroid().fit(X[::2], y[::2]), X),
            "standard": (make_pipeline(StandardScaler(), NearestCentroid()).fit(X[::2], y[::2]), X),
            "minmax_pca": (make_pipeline(MinMaxScaler(), PCA(5), NearestCentroid()).fit(X[::2], y[::2]), X),
            "shrunk_binary": (make_pipeline(StandardScaler(), NearestCentroid(shrink_threshold=0.3))
                              .fit(Xb[::2], yb[::2]), Xb),
        }


@pytest.fixture(scope="module")
def nearest_centroids():
    return _nearest_centroid_cases()


@pytest.mark.parametrize("case", ["raw", "standard", "minmax_pca", "shrunk_binary"])
def test_nearest_centroid_has_scikit_learns_probabilities(nearest_centroids, case, tmp_path):
    """NearestCentroid's predict_proba (the softmax of its spread-weighted discriminant, which its predict does not
    read) comes from a linear head beside the distances: the model's within 1e-9 of scikit-learn's, the host float
    C's within the report's bound (itself below 5e-3), the labels still the plain nearest centroid's; int16 builds
    within their bound, which is small once the features are scaled; the head survives a save."""
    require_target("host")
    est, X = nearest_centroids[case]
    want = est.predict_proba(X)
    model = as_model(est)
    assert model.proba_rule == "softmax_linear"
    np.testing.assert_allclose(model.predict_proba(X), want, atol=1e-9)
    result = tinycc_ml.compile(est, calibration=X, name="nc")
    host = result.load()
    bound = result.report["proba"]["max_abs_error_bound"]
    assert np.max(np.abs(host.predict_proba(X) - want)) <= bound <= 5e-3
    assert host.predict(X).tolist() == est.predict(X).tolist()
    int16 = tinycc_ml.compile(est, precision="int16", calibration=X, name="nc")
    info = int16.report["proba"]
    error = np.max(np.abs(int16.load().predict_proba(X) - want))
    assert error <= info["calibration_max_abs_error"] + 1e-6 and error <= info["max_abs_error_bound"]
    if case != "raw":
        assert info["max_abs_error_bound"] <= 0.01
    saved = tinycc_ml.load_model(tinycc_ml.save_model(est, tmp_path / "nc.npz"))
    assert saved.proba_rule == "softmax_linear"
    np.testing.assert_allclose(saved.predict_proba(X), want, atol=1e-9)


def test_nearest_centroid_raw_features_warn_of_coarse_integer_probabilities(nearest_centroids, caplog):
    """Raw wine features (proline in the thousands beside hues near 1): the int16 input steps the distances need
    are coarse for the discriminant (it divides by spreads down to 0.1), so the bound is large and the log says so."""
    est, X = nearest_centroids["raw"]
    with caplog.at_level("WARNING", logger="tinycc_ml.api"):
        result = tinycc_ml.compile(est, precision="int16", calibration=X, name="nc")
    assert result.report["proba"]["max_abs_error_bound"] > 0.01
    assert "StandardScaler" in caplog.text


@pytest.mark.parametrize("sim_target", ["cortex-m4", "avr"], indirect=True)
def test_nearest_centroid_probabilities_build_for_microcontrollers(nearest_centroids, sim_target, tmp_path):
    """The firmware with <prefix>_proba's head tables (flash on the AVR) builds with -Wall -Wextra -Werror and
    predicts scikit-learn's labels in the simulator, float and int16."""
    est, X = nearest_centroids["standard"]
    rows = X[1::9][:10]
    for precision in ("float", "int16"):
        out = tmp_path / precision
        result = tinycc_ml.compile(est, target=sim_target, precision=precision, calibration=X, out_dir=out,
                                   name="nc")
        assert "nc_proba_w" in result.files["nc.c"]
        run = get_backend(sim_target).simulate(out, result.output, rows)
        assert est.classes_[np.asarray(run.predictions)].tolist() == est.predict(rows).tolist()
