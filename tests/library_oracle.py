"""The source library as the oracle: a model trained with scikit-learn, XGBoost or LightGBM (a random kind,
loss or objective, size and data), compiled to float C for the host, must predict what the library's own
``predict`` says on every row, crafted rows at the model's thresholds included (±1 float32 step, ±0,
subnormals, huge values, rows many sigma out, NaN where the library takes missing values), or be refused
with one clean error.

Surfaces (``scripts/fuzz.py --target library-<group>``) draw from one family group each (GROUPS): ``tree``
(trees, forests, gradient boosting, XGBoost, LightGBM), ``linear``, ``nb``, ``svm``, ``mlp``; ``library``
draws from all. A case trains one model and compares its answers on a few hundred rows (``Outcome.rows``):
the compile and gcc are the cost, the rows nearly free (one batch call).

A case is a crash when the compiled C disagrees with the library on a row the library does not decide by a
hair (its top two class scores, or a regression value, apart by more than float32 arithmetic can move them),
when compiling raises anything but a tinycc_ml error, or when the model cannot be built (the generator's
bug). On a sample of cases the model is also built at int16 (bit-exact with the project's fixed-point
interpreter, as promised; trees: the library's label on most of the calibration rows) and at float on the
AVR or the Cortex-M0 (simavr / QEMU: the library's labels on a few rows).
"""

from __future__ import annotations

import traceback
import warnings
from pathlib import Path

import numpy as np

import tinycc_ml
from tests.fuzzing import Outcome
from tinycc_ml.codegen.input_bound import rows_beyond
from tinycc_ml.errors import TinyccError, ToolchainError

FLOAT32_NEAR_TIE = 1e-4  # relative: closer decisions may flip between float32 C and the library's float64
SVM_TERMS_BOUND = 1e-5  # of the terms' magnitude: float32's rounding over a few hundred kernel terms
TERMS_BOUND = 1e-5  # of the terms' magnitude, through an MLP's layers or a linear model's sum (fan-ins of hundreds)
INT16_SAMPLE = 0.12  # share of cases also built at int16
EXTREME_INT16_SAMPLE = 0.6  # ... of those with a feature beyond 1e9 or below 1e-9 in size
SIM_SAMPLE = 0.03  # share of cases also run on a simulated chip
SIM_ROWS = 12
SVM_ITERATIONS = 20_000  # libsvm on unscaled rows with a poly kernel can train for minutes without a cap
TREE_INT16_AGREEMENT = 0.9  # int16 trees keep 16 bits of every feature: the library's label on most rows


def _pick(rng, options):
    return options[int(rng.integers(len(options)))]


def _data(rng, task: str, wide: bool = False):
    n, d = int(rng.integers(60, 240)), int(rng.integers(2, 24))
    if wide:  # tree tables past 32,767 / 65,535 features (issue 36 item 2)
        n, d = 60, int(rng.integers(32_770, 70_000))
    scales = 10.0 ** rng.uniform(-3, 3, size=d)
    if not wide and rng.random() < 0.15:  # one feature at an extreme scale (integer builds' shifts)
        scales[int(rng.integers(d))] = _pick(rng, [1e12, 1e-12, 1e18, 1e-18])
    X = rng.normal(size=(n, d)) * scales
    integer = rng.random(d) < 0.3
    X[:, integer] = np.round(X[:, integer] / scales[integer] * 3)
    w = rng.normal(size=d) / scales
    if wide:  # the signal in the features past 32,767, where the tables' entries widen
        w[:32_768] *= 0.01
    margin = X @ w + 0.3 * rng.normal(size=n)
    if task == "regression":
        return X, margin
    if task == "positive":  # Poisson / gamma / Tweedie targets
        return X, np.exp(np.clip(margin, -3, 3))
    k = {"multiclass": int(rng.integers(2, 5)), "multiclass3": int(rng.integers(3, 5))}.get(task, 2)
    cuts = np.quantile(margin, np.linspace(0, 1, k + 1)[1:-1])
    return X, np.searchsorted(cuts, margin)


def _scaled(rng, est):
    """Extreme-but-legal weights after training (the library predicts with them as with any)."""
    factor = _pick(rng, [1.0, 1.0, 1.0, 1e3, 1e-3, 1e8, 1e20, 1e-20])
    if factor == 1.0:
        return est
    last = est.steps[-1][1] if hasattr(est, "steps") else est
    for name in ("coef_", "coefs_", "dual_coef_"):
        if isinstance(getattr(type(last), name, None), property):  # SVC's coef_: computed from dual_coef_
            continue
        value = getattr(last, name, None)
        if isinstance(value, list):
            setattr(last, name, [v * factor for v in value])
        elif isinstance(value, np.ndarray):
            setattr(last, name, value * factor)
            if name == "dual_coef_" and hasattr(last, "_dual_coef_"):
                last._dual_coef_ = last._dual_coef_ * factor
    return est


def _sklearn(rng, name: str):
    from sklearn import ensemble, linear_model, naive_bayes, neural_network, pipeline, preprocessing, svm, tree

    depth = int(rng.integers(1, 7))
    seed = int(rng.integers(1000))
    if name == "tree":
        cls = _pick(rng, [tree.DecisionTreeClassifier, tree.DecisionTreeRegressor])
        return cls(max_depth=depth, random_state=seed), "regression" if "Regressor" in cls.__name__ else "multiclass"
    if name == "forest":
        cls = _pick(rng, [ensemble.RandomForestClassifier, ensemble.ExtraTreesClassifier,
                          ensemble.RandomForestRegressor, ensemble.ExtraTreesRegressor])
        task = "regression" if "Regressor" in cls.__name__ else "multiclass"
        return cls(n_estimators=int(rng.integers(2, 8)), max_depth=depth, random_state=seed), task
    if name == "gb":
        loss = _pick(rng, ["log_loss", "exponential", "squared_error", "absolute_error", "huber", "quantile"])
        if loss in ("log_loss", "exponential"):
            task = "binary" if loss == "exponential" else _pick(rng, ["binary", "multiclass"])
            return ensemble.GradientBoostingClassifier(loss=loss, n_estimators=int(rng.integers(2, 8)),
                                                       max_depth=depth, random_state=seed), task
        return ensemble.GradientBoostingRegressor(loss=loss, n_estimators=int(rng.integers(2, 8)), max_depth=depth,
                                                  random_state=seed), "regression"
    if name == "hgb":
        loss = _pick(rng, ["log_loss", "squared_error", "absolute_error", "poisson", "gamma"])
        common = {"max_iter": int(rng.integers(2, 8)), "max_depth": depth + 1, "random_state": seed}
        if loss == "log_loss":
            return ensemble.HistGradientBoostingClassifier(**common), _pick(rng, ["binary", "multiclass"])
        return ensemble.HistGradientBoostingRegressor(loss=loss, **common), (
            "positive" if loss in ("poisson", "gamma") else "regression")
    scaler = _pick(rng, [None, None, preprocessing.StandardScaler, preprocessing.MinMaxScaler,
                         preprocessing.MaxAbsScaler])

    def maybe_scaled(est):
        return est if scaler is None else pipeline.make_pipeline(scaler(), est)

    if name == "linear":
        c = float(10.0 ** rng.uniform(-3, 3))
        classifiers = [linear_model.LogisticRegression(C=c, max_iter=300), linear_model.RidgeClassifier(alpha=c),
                       svm.LinearSVC(C=c, max_iter=2000, random_state=seed),
                       linear_model.SGDClassifier(loss=_pick(rng, ["hinge", "log_loss", "modified_huber"]),
                                                  random_state=seed, max_iter=50)]
        regressors = [linear_model.LinearRegression(), linear_model.Ridge(alpha=c), linear_model.Lasso(alpha=c / 100),
                      linear_model.ElasticNet(alpha=c / 100), svm.LinearSVR(C=c, max_iter=2000, random_state=seed),
                      linear_model.SGDRegressor(random_state=seed, max_iter=50)]
        if rng.random() < 0.6:
            return maybe_scaled(_pick(rng, classifiers)), "multiclass"
        return maybe_scaled(_pick(rng, regressors)), "regression"
    if name == "nb":
        smoothing = float(10.0 ** rng.uniform(-12, -1))
        return naive_bayes.GaussianNB(var_smoothing=smoothing), "multiclass"
    if name == "svc":
        kernel = _pick(rng, ["rbf", "linear", "poly", "sigmoid"])
        options = {"kernel": kernel, "gamma": _pick(rng, ["scale", "auto", float(10.0 ** rng.uniform(-3, 1))]),
                   "degree": int(rng.integers(2, 5)), "coef0": float(rng.uniform(-1, 1)),
                   "max_iter": SVM_ITERATIONS}
        if rng.random() < 0.3:
            return maybe_scaled(svm.NuSVC(nu=float(rng.uniform(0.1, 0.5)), **options)), "multiclass"
        return maybe_scaled(svm.SVC(C=float(10.0 ** rng.uniform(-2, 2)), **options)), "multiclass"
    if name == "mlp":
        layers = tuple(int(rng.integers(2, 16)) for _ in range(int(rng.integers(1, 4))))
        activation = _pick(rng, ["relu", "tanh", "logistic", "identity"])
        options = {"hidden_layer_sizes": layers, "activation": activation, "max_iter": 50, "random_state": seed}
        if rng.random() < 0.7:
            return maybe_scaled(neural_network.MLPClassifier(**options)), "multiclass"
        return maybe_scaled(neural_network.MLPRegressor(**options)), "regression"
    raise ValueError(name)


def _booster(rng, name: str):
    common = {"n_estimators": int(rng.integers(2, 8)), "random_state": int(rng.integers(1000))}
    if name == "xgboost":
        import xgboost

        objective = _pick(rng, ["binary:logistic", "binary:logitraw", "binary:hinge", "multi:softprob",
                                "multi:softmax", "reg:squarederror", "reg:logistic", "count:poisson", "reg:gamma",
                                "reg:tweedie", "reg:absoluteerror", "reg:pseudohubererror"])
        task = {"binary:logistic": "binary", "binary:logitraw": "binary", "binary:hinge": "binary",
                "multi:softprob": "multiclass3", "multi:softmax": "multiclass3", "reg:logistic": "unit",
                "count:poisson": "positive", "reg:gamma": "positive", "reg:tweedie": "positive"}.get(objective,
                                                                                                  "regression")
        cls = xgboost.XGBClassifier if objective.startswith(("binary", "multi")) else xgboost.XGBRegressor
        extra = {}
        if rng.random() < 0.25:  # early stopping: predict stops at best_iteration (issue 36 item 3)
            extra = {"early_stopping_rounds": 2, "n_estimators": int(rng.integers(8, 30))}
        if objective.startswith("multi") and rng.random() < 0.3:
            extra["multi_strategy"] = "multi_output_tree"
            extra["tree_method"] = "hist"
        return cls(objective=objective, max_depth=int(rng.integers(1, 6)), **{**common, **extra}), task
    import lightgbm

    objective = _pick(rng, ["binary", "multiclass", "multiclassova", "regression", "regression_l1", "poisson",
                            "huber", "gamma", "tweedie", "quantile", "fair", "cross_entropy"])
    task = {"binary": "binary", "multiclass": "multiclass3", "multiclassova": "multiclass3", "poisson": "positive",
            "gamma": "positive", "tweedie": "positive", "cross_entropy": "unit"}.get(objective, "regression")
    cls = lightgbm.LGBMClassifier if objective in ("binary", "multiclass", "multiclassova") else lightgbm.LGBMRegressor
    extra = {"reg_sqrt": True} if task == "regression" and rng.random() < 0.3 else {}
    return cls(objective=objective, num_leaves=int(rng.integers(2, 16)), min_child_samples=5, verbose=-1,
               **common, **extra), task


KINDS = ("tree", "forest", "gb", "hgb", "linear", "nb", "svc", "mlp", "xgboost", "lightgbm")
GROUPS = {"tree": ("tree", "forest", "gb", "hgb", "xgboost", "lightgbm"), "linear": ("linear",), "nb": ("nb",),
          "svm": ("svc",), "mlp": ("mlp",)}
MISSING_OK = ("hgb", "xgboost", "lightgbm")  # libraries that define what a NaN input does
TREE_KINDS = GROUPS["tree"]


def _thresholds(model) -> list[tuple[int, float]]:
    """(feature, threshold) of some decision nodes, where crafted rows go."""
    found = []
    for est in np.ravel(getattr(model, "estimators_", [model])):
        t = getattr(est, "tree_", None)
        if t is not None:
            found += [(int(f), float(v)) for f, v in zip(t.feature, t.threshold) if f >= 0]
    for predictors in getattr(model, "_predictors", []):  # HistGradientBoosting: thresholds in real units
        for p in predictors:
            nodes = p.nodes[p.nodes["is_leaf"] == 0]
            found += [(int(f), float(v)) for f, v in zip(nodes["feature_idx"], nodes["num_threshold"])]
    if hasattr(model, "get_booster") and getattr(model, "multi_strategy", None) != "multi_output_tree":
        frame = model.get_booster().trees_to_dataframe()  # (not implemented for vector-leaf trees)
        frame = frame[frame["Feature"] != "Leaf"]
        found += [(int(str(f).lstrip("f")), float(v)) for f, v in zip(frame["Feature"], frame["Split"])]
    if hasattr(model, "booster_"):
        frame = model.booster_.trees_to_dataframe()
        frame = frame[frame["split_feature"].notna()]
        names = list(model.booster_.feature_name())
        found += [(names.index(f), float(v)) for f, v in zip(frame["split_feature"], frame["threshold"])]
    return found[:60]


EXTREMES = (0.0, -0.0, 1e-40, -1e-40, 1e-36, -1e-36, 2e-35, -2e-35, 1e-30, 1e30, -1e30, 3e38, -3e38)


def crafted_rows(rng, model, X: np.ndarray, missing: bool) -> np.ndarray:
    """Rows of the data and rows an attacker picks: at the thresholds (±1 float32 step, half, negated), many
    sigma out, at the class boundaries' midpoints, with one or several features extreme."""
    n, d = X.shape
    pick = lambda: X[int(rng.integers(n))].copy()  # noqa: E731
    rows = [X[i].copy() for i in rng.choice(n, size=min(n, 40), replace=False)]
    mean, sigma = X.mean(axis=0), X.std(axis=0) + 1e-300
    for k in (3, 4, 6, 10, 30, 1e3, 1e6):  # far rows: the whole row or one feature k sigma out
        rows.append(mean + k * sigma * rng.choice([-1.0, 1.0], size=d))
        row = pick()
        row[int(rng.integers(d))] += k * sigma[int(rng.integers(d))] * _pick(rng, [-1.0, 1.0])
        rows.append(row)
    for _ in range(60):  # between two rows: near the model's boundaries
        a, b = pick(), pick()
        rows.append(a + rng.uniform(0.3, 0.7) * (b - a))
    for _ in range(120):  # rows like the data's, a little beyond it
        rows.append(pick() + rng.normal(size=d) * sigma * rng.uniform(0, 2))
    for f, t in _thresholds(model):
        t32 = np.float32(t)
        for v in (t, t32, np.nextafter(t32, np.float32(np.inf)), np.nextafter(t32, np.float32(-np.inf)), t / 2, -t):
            row = pick()
            row[f] = float(v)
            rows.append(row)
    for v in (*EXTREMES, *([np.nan] if missing else [])):
        row = pick()
        row[int(rng.integers(d))] = v
        rows.append(row)
        row = pick()
        row[rng.random(d) < 0.3] = v
        rows.append(row)
    # the C takes float32 rows: the library is asked about the rows the C receives
    return np.array(rows).astype(np.float32).astype(np.float64)


def _svm_terms(est, svm, X: np.ndarray) -> np.ndarray:
    """Per row, the magnitude of the terms a kernel SVM's decisions sum (sum_i |alpha_i| of its kernel value's
    magnitude: |gamma| sum_k |x_k sv_ik| + |coef0| to the degree, rbf's value times its exponent's terms):
    float32 sums of terms this large can move a decision by a few 1e-7 of it."""
    Z = est[:-1].transform(X) if hasattr(est, "steps") else X
    sv, alpha = svm.support_vectors_, np.abs(svm.dual_coef_).sum(axis=0)
    with np.errstate(all="ignore"):
        if svm.kernel == "rbf":
            d = np.sum(Z * Z, axis=1)[:, None] + np.sum(sv * sv, axis=1)[None]
            magnitude = np.exp(-svm._gamma * np.maximum(d - 2 * np.abs(Z) @ np.abs(sv).T, 0)) * (1 + svm._gamma * d)
        else:
            dots = np.abs(Z) @ np.abs(sv).T
            gamma = 1.0 if svm.kernel == "linear" else svm._gamma
            magnitude = (gamma * dots + (abs(svm.coef0) if svm.kernel != "linear" else 0.0))
            magnitude = magnitude ** svm.degree if svm.kernel == "poly" else magnitude
        return np.nan_to_num(magnitude @ alpha, nan=np.inf, posinf=np.inf)


def _decided(est, X: np.ndarray) -> np.ndarray:
    """Rows the library decides by more than float32 arithmetic can move (its top two scores apart; an SVM
    votes: every pairwise decision apart from 0)."""
    last = est.steps[-1][1] if hasattr(est, "steps") else est
    if type(last).__name__ in ("SVC", "NuSVC") and len(last.classes_) == 2:
        s = np.asarray(est.decision_function(X), dtype=np.float64)
        return np.abs(s) > FLOAT32_NEAR_TIE * (1 + np.abs(s)) + SVM_TERMS_BOUND * _svm_terms(est, last, X)
    if type(last).__name__ in ("SVC", "NuSVC") and len(last.classes_) > 2:
        shape = last.decision_function_shape
        last.decision_function_shape = "ovo"
        try:
            pairs = np.asarray(est.decision_function(X), dtype=np.float64)
        finally:
            last.decision_function_shape = shape
        margin = FLOAT32_NEAR_TIE * (1 + np.abs(pairs)) + SVM_TERMS_BOUND * _svm_terms(est, last, X)[:, None]
        pairs_decided = np.all(np.abs(pairs) > margin, axis=1)
        votes = np.sort(np.asarray(est.decision_function(X), dtype=np.float64), axis=1)  # votes + confidences
        return pairs_decided & (votes[:, -1] - votes[:, -2] > FLOAT32_NEAR_TIE * (1 + np.abs(votes[:, -1])))
    for method in ("predict_proba", "decision_function"):
        if hasattr(est, method):
            try:
                s = np.asarray(getattr(est, method)(X), dtype=np.float64)
            except (AttributeError, NotImplementedError, ValueError):
                continue
            if s.ndim == 1:
                return np.abs(s - (0.5 if method == "predict_proba" else 0.0)) > FLOAT32_NEAR_TIE * (1 + np.abs(s))
            top = np.sort(s, axis=1)
            return top[:, -1] - top[:, -2] > FLOAT32_NEAR_TIE * (1 + np.abs(top[:, -1]))
    return np.ones(len(X), bool)


def _decided_booster(est, kind: str, X: np.ndarray) -> np.ndarray:
    """Boosters: probabilities and margins of the library's own prediction, not float32 ties."""
    if kind == "xgboost" and getattr(est, "objective", "") in ("binary:logitraw", "binary:hinge", "multi:softmax"):
        import xgboost

        margin = np.asarray(est.get_booster().predict(xgboost.DMatrix(X), output_margin=True,
                                                       iteration_range=(0, est.best_iteration + 1)
                                                       if getattr(est, "best_iteration", None) is not None
                                                       else (0, 0)), dtype=np.float64)
        if margin.ndim == 1:
            cut = 0.5 if est.objective == "binary:logitraw" else 0.0
            return np.abs(margin - cut) > FLOAT32_NEAR_TIE * (1 + np.abs(margin))
        top = np.sort(margin, axis=1)
        return top[:, -1] - top[:, -2] > FLOAT32_NEAR_TIE * (1 + np.abs(top[:, -1]))
    return _decided(est, X)


def _what(est) -> str:
    last = est.steps[-1][1] if hasattr(est, "steps") else est
    detail = getattr(last, "loss", getattr(last, "objective", getattr(last, "kernel", getattr(last, "activation", ""))))
    scaler = f"{type(est.steps[0][1]).__name__}+" if hasattr(est, "steps") else ""
    stopped = ", early-stopped" if getattr(last, "early_stopping_rounds", None) else ""
    return f"{scaler}{type(last).__name__}({detail}{stopped})"


def _linear_terms(est, X: np.ndarray) -> np.ndarray:
    """Per row, the magnitude of the terms a linear model's value sums (sum_k |w_k z_k| + |b|, z the pipeline's
    transform of x): a Lasso's -1.05e16 from terms of this size was 5.6e-3 off in float32 (the clean run)."""
    Z = est[:-1].transform(X) if hasattr(est, "steps") else X
    last = est.steps[-1][1] if hasattr(est, "steps") else est
    coef = np.abs(np.atleast_2d(np.asarray(last.coef_, dtype=np.float64)))
    with np.errstate(over="ignore", invalid="ignore"):
        terms = np.abs(np.asarray(Z, dtype=np.float64)) @ coef.T + np.abs(np.asarray(last.intercept_, dtype=np.float64))
    return np.nan_to_num(np.max(np.atleast_2d(terms), axis=1), nan=np.inf)


def _mlp_terms(est, X: np.ndarray) -> np.ndarray:
    """Per row, the magnitude of the terms an MLP's output sums: the network of its weights' magnitudes run on
    |x| (tanh and logistic units at most 1). Float32 sums of terms this large can move the output by a few 1e-7
    of it per layer and term, however small the output is after cancelling (a regressor's 1.1e7 from terms of
    1e10 was 1.1e-3 off in float32)."""
    Z = est[:-1].transform(X) if hasattr(est, "steps") else X
    net = est.steps[-1][1] if hasattr(est, "steps") else est
    a = np.abs(np.asarray(Z, dtype=np.float64))
    with np.errstate(over="ignore", invalid="ignore"):
        for i, (W, b) in enumerate(zip(net.coefs_, net.intercepts_)):
            a = a @ np.abs(W) + np.abs(b)
            if i < len(net.coefs_) - 1 and net.activation in ("tanh", "logistic"):
                a = np.minimum(a, 1.0)
    return np.nan_to_num(np.max(a, axis=1), nan=np.inf)


def _wrong(est, kind: str, rows: np.ndarray, want: np.ndarray, got: np.ndarray) -> np.ndarray:
    if want.dtype.kind == "f":  # regression: the value, to float32 arithmetic over the terms it sums
        bound = 1e-3 * (1.0 + np.abs(want))
        if kind == "mlp":
            bound = bound + TERMS_BOUND * _mlp_terms(est, rows)
        elif kind == "linear":
            bound = bound + TERMS_BOUND * _linear_terms(est, rows)
        return ~(np.abs(got - want) <= bound) & np.isfinite(want) & (np.abs(want) < 1e37)
    return (got.astype(str) != want.astype(str)) & _decided_booster(est, kind, rows)


def _int16_check(est, kind: str, X: np.ndarray, rows: np.ndarray) -> str:
    """int16 build: bit-exact with the fixed-point interpreter on every row; trees: the library's label on
    most of the calibration rows (16 bits of every feature, issue 36 item 7). '' when fine or refused."""
    from tinycc_ml.ir.fixed import run_fixed

    try:
        result = tinycc_ml.compile(est, target="host", precision="int16", calibration=X, name="lib_int16")
        predictor = result.load()
    except TinyccError:
        return ""
    finite = rows[np.all(np.isfinite(rows), axis=1)]
    for where, R in (("calibration rows", X), ("crafted rows", finite)):
        Xq = predictor.quantise(R)
        want = run_fixed(result.graph, Xq)
        got_scores, got_pred = predictor.run_raw(Xq)
        if not np.array_equal(np.asarray(got_pred), np.asarray(want["prediction"]).reshape(-1)):
            i = int(np.flatnonzero(np.asarray(got_pred) != np.asarray(want["prediction"]).reshape(-1))[0])
            return f"int16 {where}: row {i}: C predicts {got_pred[i]}, the interpreter {want['prediction'][i]}"
    if kind in TREE_KINDS and result.output.task.get("kind") == "classification":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            lib = np.asarray(est.predict(X)).astype(str)
        agree = float(np.mean(np.asarray(predictor.predict(X)).astype(str) == lib))
        if agree < TREE_INT16_AGREEMENT:
            return f"int16 agrees with the library on only {agree:.0%} of its calibration rows"
    return ""


def _sim_check(rng, est, kind: str, rows: np.ndarray, want: np.ndarray) -> str:
    """Float build on the AVR or the Cortex-M0 simulator: the library's labels on a few rows."""
    from tinycc_ml.runtime.simulate import run_on_target

    target = _pick(rng, ["avr", "cortex-m0"])
    try:
        result = tinycc_ml.compile(est, target=target, name="lib_sim")
    except TinyccError:
        return ""
    o, p = result.output, result.prefix
    if o.task["kind"] != "classification":
        return ""
    take = rng.choice(len(rows), size=min(SIM_ROWS, len(rows)), replace=False)
    import tempfile

    with tempfile.TemporaryDirectory(prefix="tinycc-ml-library-sim-") as tmp:
        for name, text in result.files.items():
            (Path(tmp) / name).write_text(text)
        run = run_on_target(target, [str(Path(tmp) / f"{p}.c")], str(Path(tmp) / f"{p}.h"), p,
                            rows[take].astype(np.float32), o.n_scores, o.input_ctype, o.score_ctype,
                            extra_cflags=("-Werror",))
    classes = result.classes if result.classes is not None else np.arange(o.n_scores)
    # built without an input range: rows beyond the float build's proven bound get no class (-1), as promised
    beyond = rows_beyond(o.input_bound, rows[take])
    index = np.asarray(run.predictions)
    if np.any(index[beyond] != -1):
        return f"{target}: a row beyond the input bound {o.input_bound} gets class {index[beyond][0]}"
    take, index = take[~beyond], index[~beyond]
    if not take.size:  # every sampled row beyond the bound (a poly kernel's is small): nothing left to compare
        return ""
    got = np.asarray(classes)[index]
    bad = _wrong(est, kind, rows[take], want[take], got)
    if np.any(bad):
        i = int(np.flatnonzero(bad)[0])
        return f"{target}: wrong on {int(bad.sum())} of {len(take)} rows (library {want[take][i]!r}, C {got[i]!r})"
    return ""


def _range(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return np.nanmin(rows, axis=0), np.nanmax(rows, axis=0)


def _build(est, kind: str, X: np.ndarray, rows: np.ndarray, want: np.ndarray):
    """(predictor, rows, want): a float host build held to the range of the rows it is compared on, as the
    compiler promises (a float build whose values can leave float32 over its declared input range is refused).
    Trees compare; where the rows' whole range is refused, the build over the data's own range (10 sigma
    around it) is compared on the rows within that range."""
    if kind in TREE_KINDS:
        return tinycc_ml.compile(est, target="host").load(), rows, want
    try:
        return tinycc_ml.compile(est, target="host", input_range=_range(rows)).load(), rows, want
    except TinyccError:
        mean, sigma = X.mean(axis=0), X.std(axis=0)
        lo, hi = np.minimum(X.min(axis=0), mean - 10 * sigma), np.maximum(X.max(axis=0), mean + 10 * sigma)
        keep = np.all((rows >= lo) & (rows <= hi), axis=1)
        predictor = tinycc_ml.compile(est, target="host", input_range=(lo, hi)).load()
        return predictor, rows[keep], want[keep]  # the rows beyond: refused for them, as promised


def library_case(rng, group: str | None = None) -> Outcome:
    """One model of ``group``'s kinds (every kind when None) against its library; ``Outcome.rows`` counts the
    rows compared."""
    kinds = GROUPS[group] if group else KINDS
    kind = _pick(rng, kinds)
    try:
        est, task = _booster(rng, kind) if kind in ("xgboost", "lightgbm") else _sklearn(rng, kind)
        wide = kind == "tree" and rng.random() < 0.04
        X, y = _data(rng, "binary" if task == "unit" else task, wide)
        if task == "unit":
            y = y.astype(float)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if getattr(est, "early_stopping_rounds", None):
                half = len(X) // 2
                est.fit(X[:half], y[:half], eval_set=[(X[half:], y[half:])], verbose=False)
            else:
                try:
                    est.fit(X, y)
                except ValueError as exc:  # the library's own refusal (libsvm: non-finite dual coefficients)
                    if "not finite" not in str(exc):
                        raise
                    return Outcome("error", f"{kind}: the library does not fit it: {exc}"[:300])
            if kind in ("linear", "svc", "mlp"):
                est = _scaled(rng, est)
        rows = crafted_rows(rng, est, X, kind in MISSING_OK)
        if kind not in MISSING_OK:  # scikit-learn refuses NaN and inf rows outright
            rows = rows[np.all(np.isfinite(rows), axis=1)]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = np.asarray(est.predict(rows))
    except ImportError as exc:
        return Outcome("error", f"{kind}: {exc}")
    except Exception as exc:  # noqa: BLE001 - a model the generator cannot build is the fuzzer's bug
        return Outcome("crash", f"generator {kind}: {type(exc).__name__}: {exc}"[:400])
    what = _what(est)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            predictor, rows, want = _build(est, kind, X, rows, want)
            got = np.asarray(predictor.predict(rows))
    except ToolchainError as exc:  # the generated C does not build (-Werror): the compiler's bug
        return Outcome("crash", f"{what}: C does not build: {exc}"[:600])
    except TinyccError as exc:
        return Outcome("error", f"{what}: {exc}"[:300])
    except Exception as exc:  # noqa: BLE001
        frame = traceback.extract_tb(exc.__traceback__)[-1]
        return Outcome("crash", f"{what}: {type(exc).__name__} at {Path(frame.filename).name}:{frame.lineno}: "
                                f"{exc}"[:600])
    bad = _wrong(est, kind, rows, want, got)
    if np.any(bad):
        i = int(np.flatnonzero(bad)[0])
        return Outcome("crash", f"{what}: wrong on {int(bad.sum())} of {len(rows)} rows (row {i}: library "
                                f"{want[i]!r}, C {got[i]!r}, row's largest |x| {np.nanmax(np.abs(rows[i])):.3g})"[:600],
                       rows=len(rows))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            # more often where a feature is of an extreme size: the integer input shifts are then the question
            peaks = np.abs(X).max(axis=0)
            extreme = np.any(peaks > 1e9) or np.any((peaks > 0) & (peaks < 1e-9))
            sample = EXTREME_INT16_SAMPLE if extreme else INT16_SAMPLE
            problem = _int16_check(est, kind, X, rows) if rng.random() < sample and len(rows[0]) < 1000 else ""
            if not problem and rng.random() < SIM_SAMPLE and len(rows[0]) < 1000:
                problem = _sim_check(rng, est, kind, rows, want)
    except TinyccError as exc:
        problem = f"{type(exc).__name__} after compiling: {exc}"
    except Exception as exc:  # noqa: BLE001
        frame = traceback.extract_tb(exc.__traceback__)[-1]
        problem = f"{type(exc).__name__} at {Path(frame.filename).name}:{frame.lineno}: {exc}"
    if problem:
        return Outcome("crash", f"{what}: {problem}"[:600], rows=len(rows))
    return Outcome("ok", what, rows=len(rows))
