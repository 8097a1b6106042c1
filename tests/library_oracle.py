"""The source library as the oracle: a model trained with scikit-learn, XGBoost or LightGBM (a random kind,
loss or objective, size and data), compiled to float C for the host, must predict what the library's own
``predict`` says on every row, crafted rows at the model's thresholds included (±1 float32 step, ±0,
subnormals, huge values, NaN where the library takes missing values), or be refused with one clean error.

A case is a crash when the compiled C disagrees with the library on a row the library does not decide by a
hair (its top two class scores, or a regression value, apart by more than float32 arithmetic can move them),
when compiling raises anything but a tinycc_ml error, or when the model cannot be built (the generator's
bug). ``scripts/fuzz.py --target library`` runs it; tests/test_fuzz_surfaces.py a few cases.
"""

from __future__ import annotations

import traceback
import warnings
from pathlib import Path

import numpy as np

import tinycc_ml
from tests.fuzzing import Outcome
from tinycc_ml.errors import TinyccError

FLOAT32_NEAR_TIE = 1e-4  # relative: closer decisions may flip between float32 C and the library's float64


def _data(rng, task: str):
    n, d = int(rng.integers(60, 240)), int(rng.integers(2, 24))
    scales = 10.0 ** rng.uniform(-3, 3, size=d)
    X = rng.normal(size=(n, d)) * scales
    integer = rng.random(d) < 0.3
    X[:, integer] = np.round(X[:, integer] / scales[integer] * 3)
    w = rng.normal(size=d) / scales
    margin = X @ w + 0.3 * rng.normal(size=n)
    if task == "regression":
        return X, margin
    if task == "positive":  # Poisson / gamma / Tweedie targets
        return X, np.exp(np.clip(margin, -3, 3))
    k = {"multiclass": int(rng.integers(2, 5)), "multiclass3": int(rng.integers(3, 5))}.get(task, 2)
    cuts = np.quantile(margin, np.linspace(0, 1, k + 1)[1:-1])
    return X, np.searchsorted(cuts, margin)


def _sklearn(rng, name: str):
    from sklearn import ensemble, linear_model, naive_bayes, neural_network, svm, tree

    pick = lambda options: options[int(rng.integers(len(options)))]  # noqa: E731
    depth = int(rng.integers(1, 7))
    seed = int(rng.integers(1000))
    if name == "tree":
        cls = pick([tree.DecisionTreeClassifier, tree.DecisionTreeRegressor])
        return cls(max_depth=depth, random_state=seed), "regression" if "Regressor" in cls.__name__ else "multiclass"
    if name == "forest":
        cls = pick([ensemble.RandomForestClassifier, ensemble.ExtraTreesClassifier, ensemble.RandomForestRegressor])
        task = "regression" if "Regressor" in cls.__name__ else "multiclass"
        return cls(n_estimators=int(rng.integers(2, 8)), max_depth=depth, random_state=seed), task
    if name == "gb":
        loss = pick(["log_loss", "exponential", "squared_error", "absolute_error", "huber", "quantile"])
        if loss in ("log_loss", "exponential"):
            task = "binary" if loss == "exponential" else pick(["binary", "multiclass"])
            return ensemble.GradientBoostingClassifier(loss=loss, n_estimators=int(rng.integers(2, 8)),
                                                       max_depth=depth, random_state=seed), task
        return ensemble.GradientBoostingRegressor(loss=loss, n_estimators=int(rng.integers(2, 8)), max_depth=depth,
                                                  random_state=seed), "regression"
    if name == "hgb":
        loss = pick(["log_loss", "squared_error", "absolute_error", "poisson", "gamma"])
        common = {"max_iter": int(rng.integers(2, 8)), "max_depth": depth + 1, "random_state": seed}
        if loss == "log_loss":
            return ensemble.HistGradientBoostingClassifier(**common), pick(["binary", "multiclass"])
        return ensemble.HistGradientBoostingRegressor(loss=loss, **common), (
            "positive" if loss in ("poisson", "gamma") else "regression")
    if name == "linear":
        return pick([linear_model.LogisticRegression(max_iter=300), linear_model.RidgeClassifier(),
                     linear_model.Ridge()]), "multiclass"
    if name == "nb":
        return naive_bayes.GaussianNB(), "multiclass"
    if name == "svc":
        return svm.SVC(kernel=pick(["rbf", "linear", "poly"]), gamma="scale"), "multiclass"
    if name == "mlp":
        return neural_network.MLPClassifier((int(rng.integers(2, 12)),), activation=pick(["relu", "tanh",
                                                                                        "logistic"]),
                                            max_iter=50, random_state=seed), "multiclass"
    raise ValueError(name)


def _booster(rng, name: str):
    pick = lambda options: options[int(rng.integers(len(options)))]  # noqa: E731
    common = {"n_estimators": int(rng.integers(2, 8)), "random_state": int(rng.integers(1000))}
    if name == "xgboost":
        import xgboost

        objective = pick(["binary:logistic", "multi:softprob", "reg:squarederror", "reg:logistic",
                          "count:poisson", "reg:gamma", "reg:absoluteerror"])
        task = {"binary:logistic": "binary", "multi:softprob": "multiclass3", "reg:logistic": "unit",
                "count:poisson": "positive", "reg:gamma": "positive"}.get(objective, "regression")
        cls = xgboost.XGBClassifier if objective.startswith(("binary", "multi")) else xgboost.XGBRegressor
        return cls(objective=objective, max_depth=int(rng.integers(1, 6)), **common), task
    import lightgbm

    objective = pick(["binary", "multiclass", "regression", "regression_l1", "poisson", "huber"])
    task = {"binary": "binary", "multiclass": "multiclass3", "poisson": "positive"}.get(objective, "regression")
    cls = lightgbm.LGBMClassifier if objective in ("binary", "multiclass") else lightgbm.LGBMRegressor
    return cls(objective=objective, num_leaves=int(rng.integers(2, 16)), min_child_samples=5, verbose=-1,
               **common), task


KINDS = ("tree", "forest", "gb", "hgb", "linear", "nb", "svc", "mlp", "xgboost", "lightgbm")
MISSING_OK = ("hgb", "xgboost", "lightgbm")  # libraries that define what a NaN input does


def _thresholds(model) -> list[tuple[int, float]]:
    """(feature, threshold) of some decision nodes, where crafted rows go."""
    found = []
    for est in np.ravel(getattr(model, "estimators_", [model])):
        t = getattr(est, "tree_", None)
        if t is not None:
            found += [(int(f), float(v)) for f, v in zip(t.feature, t.threshold) if f >= 0]
    return found[:40]


def crafted_rows(rng, model, X: np.ndarray, missing: bool) -> np.ndarray:
    rows = [X[int(rng.integers(len(X)))].copy() for _ in range(20)]
    d = X.shape[1]
    for f, t in _thresholds(model):
        t32 = np.float32(t)
        for v in (t, t32, np.nextafter(t32, np.float32(np.inf)), np.nextafter(t32, np.float32(-np.inf))):
            row = X[int(rng.integers(len(X)))].copy()
            row[f] = float(v)
            rows.append(row)
    for v in (0.0, -0.0, 1e-40, -1e-40, 1e-30, 1e30, -1e30, *([np.nan] if missing else [])):
        row = X[int(rng.integers(len(X)))].copy()
        row[int(rng.integers(d))] = v
        rows.append(row)
    return np.array(rows)


def _decided(est, X: np.ndarray) -> np.ndarray:
    """Rows the library decides by more than float32 arithmetic can move (its top two scores apart)."""
    for method in ("predict_proba", "decision_function"):
        if hasattr(est, method):
            try:
                s = np.asarray(getattr(est, method)(X), dtype=np.float64)
            except (AttributeError, NotImplementedError):
                continue
            if s.ndim == 1:
                return np.abs(s - (0.5 if method == "predict_proba" else 0.0)) > FLOAT32_NEAR_TIE * (1 + np.abs(s))
            top = np.sort(s, axis=1)
            return top[:, -1] - top[:, -2] > FLOAT32_NEAR_TIE * (1 + np.abs(top[:, -1]))
    return np.ones(len(X), bool)


def library_case(rng) -> Outcome:
    kind = KINDS[int(rng.integers(len(KINDS)))]
    try:
        est, task = _booster(rng, kind) if kind in ("xgboost", "lightgbm") else _sklearn(rng, kind)
        X, y = _data(rng, "binary" if task == "unit" else task)
        if task == "unit":
            y = y.astype(float)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est.fit(X, y)
        rows = crafted_rows(rng, est, X, kind in MISSING_OK)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = np.asarray(est.predict(rows))
    except ImportError as exc:
        return Outcome("error", f"{kind}: {exc}")
    except Exception as exc:  # noqa: BLE001 - a model the generator cannot build is the fuzzer's bug
        return Outcome("crash", f"generator {kind}: {type(exc).__name__}: {exc}"[:400])
    what = f"{type(est).__name__}({getattr(est, 'loss', getattr(est, 'objective', ''))})"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            predictor = tinycc_ml.compile(est, target="host").load()
            got = np.asarray(predictor.predict(rows))
    except TinyccError as exc:
        return Outcome("error", f"{what}: {exc}"[:300])
    except Exception as exc:  # noqa: BLE001
        frame = traceback.extract_tb(exc.__traceback__)[-1]
        return Outcome("crash", f"{what}: {type(exc).__name__} at {Path(frame.filename).name}:{frame.lineno}: "
                                f"{exc}"[:600])
    if want.dtype.kind == "f":  # regression: the value, to float32 arithmetic
        scale = 1.0 + np.abs(want)
        bad = ~(np.abs(got - want) <= 1e-3 * scale) & np.isfinite(want)
    else:
        bad = (got.astype(str) != want.astype(str)) & _decided(est, rows)
    if np.any(bad):
        i = int(np.flatnonzero(bad)[0])
        return Outcome("crash", f"{what}: wrong on {int(bad.sum())} of {len(rows)} rows (row {i}: library "
                                f"{want[i]!r}, C {got[i]!r})"[:600])
    return Outcome("ok", what)
