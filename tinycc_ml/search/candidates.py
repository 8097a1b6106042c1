"""The model families the search tries and the ladder of sizes each one climbs.

A family has one size knob (``size``): ProtoNN's and Bonsai's ``budget_bytes`` (the papers' count,
4 bytes per parameter), the nearest-prototype classifier's prototypes per class, SNC's number of
reference points; the linear family and kNN have a fixed size (one rung). ``settings(size)`` turns
a size into the estimator's parameters.

Sizes follow the limits: the first rung is small; once it is measured, each precision's flash per
unit of size (``const bytes / size``) and the fixed code around the constants (``flash - const``)
give the largest size that fits the flash limit at that precision, and the ladder takes those sizes
and halvings below them (see ``Ladder``). Sizes grow along the ladder, so a family whose rung breaks
the latency limit at every precision stops climbing.
"""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass

from tinycc_ml.errors import DataError
from tinycc_ml.models.protonn_trainer import min_budget_bytes
from tinycc_ml.plugins import import_object

NOMINAL_BYTES = {"float": 4, "int16": 2, "int8": 1}  # per stored weight; int8 keeps 16-bit activations
MAX_VALUES = 32 * 1024  # ladder ceiling in stored weights: beyond it training is slow and chips are full
HOST_FLASH = 4 * MAX_VALUES  # flash to plan for on the host without max_flash


TREE_FAMILIES = ("random-forest", "gradient-boosting")


def _protonn_prototypes(n_classes: int) -> int:
    return 40 if n_classes <= 2 else 10 * n_classes


def _protonn_widest(n_features: int) -> int:
    """ProtoNN's widest projection: 32, and never more than the features it projects."""
    return min(32, n_features)


@dataclass(frozen=True)
class Family:
    name: str
    knob: str  # what ``size`` is, in words
    fixed_size: bool = False

    def values_per_size(self, n_features: int, n_classes: int) -> float:
        """Stored weights per unit of size (nominal: before anything is measured)."""
        if self.name in ("protonn", "bonsai"):
            return 0.25  # budget_bytes counts 4 bytes per parameter
        if self.name == "nearest-prototype":
            return n_features * n_classes
        if self.name == "snc":
            return n_features
        if self.name == "linear":
            return n_features * (1 if n_classes == 2 else n_classes)
        if self.name in TREE_FAMILIES:  # per tree / boosting round: ~3 values per decision node (measured later)
            return 3 * 100 if self.name == "random-forest" else 3 * 7 * (1 if n_classes == 2 else n_classes)
        if self.name == "mlp":  # per hidden unit: its input weights and its weights into the outputs
            return n_features + 1 + (1 if n_classes == 2 else n_classes)
        if self.name == "naive-bayes":  # a mean and a variance per class and feature
            return 2 * n_features * n_classes
        return n_features  # knn: per training row

    def smallest(self, n_features: int, n_classes: int, n_rows: int) -> float:
        if self.name == "protonn":
            return max(min_budget_bytes(n_features, n_classes), 1024)
        if self.name == "bonsai":
            return 1024
        if self.name == "nearest-prototype":
            return 1
        if self.name == "snc":
            return n_classes
        if self.name in ("linear", "naive-bayes"):
            return 1
        if self.name in TREE_FAMILIES:
            return 2 if self.name == "random-forest" else 5
        if self.name == "mlp":
            return 4  # hidden units
        return n_rows  # knn keeps every training row

    def largest(self, n_features: int, n_classes: int, n_rows: int) -> float:
        if self.name == "protonn":  # the wide plan (see settings) stops growing at d̂ = min(32, D), its m
            # prototypes dense; below 16 features the trainer's own plan spends a budget on more prototypes
            m = _protonn_prototypes(n_classes)
            d = _protonn_widest(n_features) if n_features >= 16 else 32
            return math.ceil(min(MAX_VALUES, d * n_features + (d + n_classes) * m) * 4 / 256) * 256
        if self.name == "nearest-prototype":
            return min(15, max(1, n_rows // (2 * n_classes)))  # the paper's 15 per class at most
        if self.name == "snc":
            return max(n_classes, n_rows // 4)
        if self.name in TREE_FAMILIES:
            return 64 if self.name == "random-forest" else 200
        if self.fixed_size:
            return self.smallest(n_features, n_classes, n_rows)
        if self.name == "mlp":
            return min(256, MAX_VALUES / self.values_per_size(n_features, n_classes))
        return MAX_VALUES / self.values_per_size(n_features, n_classes)

    def round_size(self, size: float) -> int:
        if self.name in ("protonn", "bonsai"):
            return int(size // 256 * 256) if size >= 2048 else int(size)
        return int(math.floor(size))

    def settings(self, size: int, random_state: int, n_features: int, n_classes: int) -> dict:
        if self.name == "protonn":
            # Large budgets: 10 prototypes per class (40 when binary) and a wider projection (up to 32)
            # takes the rest, where the trainer's plan keeps d̂ <= 16 up to 64 KB and spends the rest on
            # prototypes. Each prototype costs RAM for its distance, the scarce resource on a
            # microcontroller; the projection costs only flash (USPS-10, validation split: d̂ 32 with 100
            # prototypes 97.1%, d̂ 24 with 150 97.7%, the plan's d̂ 16 with 120 96.7%; 170 and more do
            # not fit the ATmega328P's RAM beside a 256-feature input).
            m = _protonn_prototypes(n_classes)
            values = size / 4 - n_classes * m
            wide = int(min(_protonn_widest(n_features), values // (n_features + m)))
            if wide >= 16:
                return {"budget_bytes": size, "projection_dim": wide, "n_prototypes": m, "early_stopping": True,
                        "random_state": random_state}
            return {"budget_bytes": size, "early_stopping": True, "random_state": random_state}
        if self.name == "bonsai":
            return {"budget_bytes": size, "random_state": random_state}
        if self.name == "nearest-prototype":
            return {"prototypes_per_class": size, "n_restarts": 1, "random_state": random_state}
        if self.name == "snc":
            return {"n_prototypes": size, "random_state": random_state}
        if self.name == "linear":
            return {"C": 1.0, "max_iter": 2000, "random_state": random_state}
        if self.name == "random-forest":
            return {"n_estimators": size, "max_depth": 8, "random_state": random_state}
        if self.name == "gradient-boosting":
            return {"max_iter": size, "max_depth": 3, "early_stopping": False, "random_state": random_state}
        if self.name == "mlp":
            # trained until the training loss settles (scikit-learn's tol over 10 epochs), not stopped on a
            # tenth of the rows held out: that split's accuracy is noisy and stopped letter-26's MLP-32 at
            # epoch 82 with 76.8% where training on reaches 85.4% (screening rows) and 91.0% (all rows)
            return {"hidden_layer_sizes": (int(size),), "max_iter": 500, "early_stopping": False,
                    "random_state": random_state}
        if self.name == "naive-bayes":
            return {}
        return {"k": 1}

    def estimator(self, settings: dict):
        """A fresh, unfitted estimator with ``settings``."""
        spec, standardised = ESTIMATORS[self.name]
        estimator = import_object(spec)(**settings)
        if not standardised:
            return estimator
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import StandardScaler

        return make_pipeline(StandardScaler(), estimator)


# each family's estimator class, and whether it learns on standardised features (a StandardScaler before it)
ESTIMATORS = {
    "protonn": ("tinycc_ml.models.protonn_trainer:ProtoNNClassifier", False),
    "bonsai": ("tinycc_ml.models.bonsai_trainer:BonsaiClassifier", False),
    "nearest-prototype": ("tinycc_ml.models.npc:NearestPrototypeClassifier", False),
    "snc": ("tinycc_ml.models.snc:SNCClassifier", False),
    "linear": ("sklearn.linear_model:LogisticRegression", True),
    "mlp": ("sklearn.neural_network:MLPClassifier", True),
    "naive-bayes": ("sklearn.naive_bayes:GaussianNB", False),
    "knn": ("tinycc_ml.models.knn:KNNClassifier", False),
    "random-forest": ("sklearn.ensemble:RandomForestClassifier", False),
    "gradient-boosting": ("sklearn.ensemble:HistGradientBoostingClassifier", False),
}

FAMILIES = {f.name: f for f in (
    Family("protonn", "budget_bytes"),
    Family("bonsai", "budget_bytes"),
    Family("nearest-prototype", "prototypes per class"),
    Family("snc", "reference points"),
    Family("linear", "logistic regression", fixed_size=True),
    Family("mlp", "hidden units (one relu layer)"),
    Family("naive-bayes", "Gaussian naive Bayes", fixed_size=True),
    Family("knn", "training rows", fixed_size=True),
    Family("random-forest", "trees of depth <= 8"),  # scikit-learn's RandomForestClassifier (models/trees.py)
    Family("gradient-boosting", "boosting rounds of depth <= 3"),  # HistGradientBoostingClassifier
)}
FAMILY_ORDER = tuple(FAMILIES)


def describe_settings(family: str, settings: dict) -> str:
    """Short text of the knobs that matter (no seeds, no fixed options)."""
    # the trainers' budget counts float32 parameters (4 B each, as the papers do): not the build's flash
    if family == "protonn" and settings.get("projection_dim"):
        return (f"{settings['budget_bytes'] // 4:,} params, d={settings['projection_dim']}, "
                f"m={settings['n_prototypes']}")
    if family in ("protonn", "bonsai"):
        return f"<= {settings['budget_bytes'] // 4:,} params"
    if family == "nearest-prototype":
        return f"{settings['prototypes_per_class']}/class"
    if family == "snc":
        return f"{settings['n_prototypes']} points"
    if family == "linear":
        return f"logistic C={settings['C']:g}"
    if family == "random-forest":
        return f"{settings['n_estimators']} trees, depth <= {settings['max_depth']}"
    if family == "gradient-boosting":
        return f"{settings['max_iter']} rounds, depth <= {settings['max_depth']}"
    if family == "mlp":
        return f"{settings['hidden_layer_sizes'][0]} hidden units"
    if family == "naive-bayes":
        return "GaussianNB"
    return f"k={settings['k']}"


@dataclass
class Cost:
    """Flash of a family's build at one precision: ``code + per_size * size`` bytes."""

    code: float
    per_size: float
    measured: bool = False

    def flash(self, size: float) -> float:
        return self.code + self.per_size * size

    def largest_size(self, flash_limit: float) -> float:
        return max(0.0, (flash_limit - self.code) / self.per_size)


class Ladder:
    """The sizes one family tries.

    Rung 0 is the family's smallest size scaled toward the nominal capacity; once it is measured
    (``learn``), ``extend`` plans each precision's largest size under the flash limit and halvings of
    the smallest of those (at most ``n_rungs`` in all, each at least 1.25x the one before). When the
    planned rungs are done, ``refine`` adds a size for a precision whose largest fitting build still
    leaves more than 15% of the flash unused: the size where the line through that precision's two
    largest measured builds meets 97% of the limit (at most ``MAX_REFINEMENTS`` per family).
    """

    MAX_REFINEMENTS = 2
    FILL = 0.97

    def __init__(self, family: Family, precisions: tuple[str, ...], flash_limit: float, code_estimate: float,
                 n_features: int, n_classes: int, n_rows: int, n_rungs: int):
        self.family, self.precisions, self.flash_limit, self.n_rungs = family, precisions, flash_limit, n_rungs
        self.low = family.smallest(n_features, n_classes, n_rows)
        self.high = family.largest(n_features, n_classes, n_rows)
        per_value = family.values_per_size(n_features, n_classes)
        self.cost = {p: Cost(code_estimate, NOMINAL_BYTES[p] * per_value) for p in precisions}
        self.points: dict[str, dict[int, int]] = {p: {} for p in precisions}  # precision -> size -> flash
        self.blocked: dict[str, int] = {}  # precision -> smallest size that broke latency or RAM (or flash)
        self.refinements = 0
        if family.fixed_size:
            self.sizes = [family.round_size(self.low)]
        else:
            top = min(self.high, max(self._capacity().values()))
            first = max(self.low, top / 2 ** (n_rungs - 1)) if n_rungs > 1 else max(self.low, top)
            self.sizes = [family.round_size(min(first, self.high))]

    def _capacity(self) -> dict[str, float]:
        return {p: c.largest_size(self.flash_limit) for p, c in self.cost.items()}

    def is_blocked(self, precision: str, size: int) -> bool:
        return precision in self.blocked and size >= self.blocked[precision]

    def block(self, precision: str, size: int) -> None:
        """A build of ``size`` broke a limit that only grows with size: larger sizes are not tried."""
        self.blocked[precision] = min(size, self.blocked.get(precision, size))

    def learn(self, precision: str, size: int, const_bytes: int, flash_bytes: int) -> None:
        """A measured build of ``size`` at ``precision``."""
        if size <= 0 or const_bytes <= 0:
            return
        self.points[precision][size] = flash_bytes
        if len(self.points[precision]) == 1:
            self.cost[precision] = Cost(max(0.0, flash_bytes - const_bytes), const_bytes / size, measured=True)
            return
        (s1, f1), (s2, f2) = sorted(self.points[precision].items())[-2:]
        if f2 > f1:  # the secant through the two largest builds
            per_size = (f2 - f1) / (s2 - s1)
            self.cost[precision] = Cost(f2 - per_size * s2, per_size, measured=True)

    def extend(self) -> None:
        """Plan the rungs after the first, from what was learnt (called once, after rung 0)."""
        if self.family.fixed_size or len(self.sizes) > 1:
            return
        caps = sorted({min(self.high, c) for p, c in self._capacity().items() if p not in self.blocked}, reverse=True)
        wanted = list(caps)
        while caps and len(wanted) < self.n_rungs - 1:
            wanted.append(wanted[-1] / 2)
        sizes = sorted(self.family.round_size(s) for s in wanted[: self.n_rungs - 1])
        for s in sizes:
            if s >= 1.25 * self.sizes[-1] and s >= self.low:
                self.sizes.append(s)

    def refine(self) -> bool:
        """Add one size that fills the flash better (see the class doc); False when there is none."""
        if self.family.fixed_size or self.refinements >= self.MAX_REFINEMENTS:
            return False
        best = None
        for p in self.precisions:
            target = self._refined_size(p)
            if target is None or any(abs(target - s) <= 0.1 * s for s in self.sizes):  # tried or planned already
                continue
            if best is None or target > best:
                best = target
        if best is None:
            return False
        self.sizes.append(best)
        self.refinements += 1
        return True

    def _refined_size(self, p: str) -> int | None:
        """Between the largest build that fits and the smallest that does not (a secant, or the geometric
        mean when the larger one could not be built at all); beyond it along the fitted line when every
        build fits. None when the flash is already 85% full or nothing fits."""
        limit = self.flash_limit
        fitting = [(s, f) for s, f in self.points[p].items() if f <= limit]
        if not fitting:
            return None
        s_lo, f_lo = max(fitting)
        if f_lo >= 0.85 * limit:
            return None
        over = sorted((s, f) for s, f in self.points[p].items() if s > s_lo and f > limit)
        s_hi = min([s for s, _ in over] + ([self.blocked[p]] if p in self.blocked else []), default=None)
        if s_hi is None:
            if len(self.points[p]) < 2:
                return None
            target = min(self.high, self.cost[p].largest_size(self.FILL * limit))
        elif over and over[0][0] == s_hi:
            f_hi = over[0][1]
            target = s_lo + (self.FILL * limit - f_lo) * (s_hi - s_lo) / (f_hi - f_lo)
        else:
            target = math.sqrt(s_lo * s_hi)
        if s_hi is not None:
            target = min(target, 0.9 * s_hi)
        target = self.family.round_size(target)
        return target if target >= 1.1 * s_lo else None

    def predicted_flash(self, precision: str, size: int) -> float:
        return self.cost[precision].flash(size)


# the estimator classes a search may start from (``fit(start_from=...)``): their family, and the settings
# each family's ladder sets (the size knob), which the user's estimator cannot fix
START_CLASSES = {"ProtoNNClassifier": "protonn", "BonsaiClassifier": "bonsai",
                 "NearestPrototypeClassifier": "nearest-prototype", "SNCClassifier": "snc",
                 "LogisticRegression": "linear", "MLPClassifier": "mlp", "GaussianNB": "naive-bayes",
                 "KNNClassifier": "knn", "RandomForestClassifier": "random-forest",
                 "HistGradientBoostingClassifier": "gradient-boosting"}
SIZE_SETTINGS = {"protonn": ("budget_bytes", "projection_dim", "n_prototypes"), "bonsai": ("budget_bytes",),
                 "nearest-prototype": ("prototypes_per_class",), "snc": ("n_prototypes",),
                 "random-forest": ("n_estimators",), "gradient-boosting": ("max_iter",),
                 "mlp": ("hidden_layer_sizes",)}
_PLAIN = (bool, int, float, str, type(None))


def start_settings(estimator) -> tuple[str, dict]:
    """The family of the user's ``estimator`` (fitted or not; in a Pipeline after a scaler too) and the
    settings it gives apart from its class's defaults, less the size the ladder sets and the seed the search
    sets: what every candidate of the search keeps. ValueError (DataError) for what cannot start a search."""
    final = estimator.steps[-1][1] if hasattr(estimator, "steps") else estimator
    name = type(final).__name__
    if name not in START_CLASSES or not hasattr(final, "get_params"):
        raise DataError(f"start_from: a {name} cannot start a search; it can be one of {', '.join(START_CLASSES)} "
                        "(or a Pipeline ending in one)")
    family = START_CLASSES[name]
    defaults = type(final)().get_params(deep=False)
    own = {k: v for k, v in final.get_params(deep=False).items()
           if k not in SIZE_SETTINGS.get(family, ()) and k != "random_state" and not _same(v, defaults.get(k))}
    for key, value in own.items():
        values = value if isinstance(value, (list, tuple)) else [value]
        if not all(isinstance(v, _PLAIN) for v in values):
            raise DataError(f"start_from: {name}'s {key}={value!r} cannot be kept through the search (settings are "
                            "numbers, strings, booleans or lists of them)")
    return family, {k: list(v) if isinstance(v, tuple) else v for k, v in own.items()}


def estimator_from_text(text: str):
    """The unfitted estimator a text such as ``RandomForestClassifier(max_depth=12, criterion="entropy")``
    names: one of START_CLASSES called with literal keyword arguments (parsed, never evaluated: no names,
    calls or expressions). DataError (a ValueError) for anything else, naming what."""
    try:
        tree = ast.parse(text.strip(), mode="eval").body
    except SyntaxError:
        raise DataError(f"start {text!r}: not an estimator such as RandomForestClassifier(max_depth=12)") from None
    if isinstance(tree, ast.Name):  # the class alone: its defaults
        tree = ast.Call(func=tree, args=[], keywords=[])
    if not isinstance(tree, ast.Call) or not isinstance(tree.func, ast.Name) or tree.func.id not in START_CLASSES:
        name = tree.func.id if isinstance(tree, ast.Call) and isinstance(tree.func, ast.Name) else text
        raise DataError(f"start {text!r}: {name!r} cannot start a search; it can be one of "
                        f"{', '.join(START_CLASSES)}")
    if tree.args or any(k.arg is None for k in tree.keywords):
        raise DataError(f"start {text!r}: give the settings by name (max_depth=12), not by position")
    settings = {}
    for keyword in tree.keywords:
        try:
            settings[keyword.arg] = ast.literal_eval(keyword.value)
        except (ValueError, SyntaxError):
            raise DataError(f"start {text!r}: {keyword.arg}={ast.unparse(keyword.value)} is not a literal (a number, "
                            "string, boolean, None or a list/tuple of them)") from None
    family = START_CLASSES[tree.func.id]
    cls = import_object(ESTIMATORS[family][0])
    try:
        estimator = cls(**settings).set_params()  # set_params: scikit-learn's own check of the names
        validate = getattr(estimator, "_validate_params", None)
        if validate is not None:  # scikit-learn's own check of the values (C=-1, solver="foo"), before any data
            validate()
    except (TypeError, ValueError) as exc:
        raise DataError(f"start {text!r}: {' '.join(str(exc).split())}") from None
    return estimator


def estimator_from_model(model, source: str):
    """The unfitted estimator a search may start from for a model read from a file (``load_model``): its
    family's estimator with what the file says of its settings (an MLP's activation; a forest that averages
    its trees or boosting); DataError for what no family of ``fit`` trains."""
    family = model.family
    if family == "trees":  # averaged trees (a random forest) or a sum through a link (boosting)
        name = "RandomForestClassifier" if model.proba_rule == "normalise" else "HistGradientBoostingClassifier"
        return import_object(ESTIMATORS[START_CLASSES[name]][0])()
    if family == "mlp":
        activation = model.meta().get("activation", "relu")
        return import_object(ESTIMATORS["mlp"][0])(activation=activation)
    families = {"protonn": "protonn", "bonsai": "bonsai", "linear": "linear", "gaussian_nb": "naive-bayes"}
    if family not in families:
        hint = (" (nearest prototypes, SNC and kNN share the file format: name the class, e.g. "
                "--start SNCClassifier)" if family == "prototype" else "")
        raise DataError(f"start {source}: a {family} model file cannot start a search; fit trains "
                        f"{', '.join(FAMILY_ORDER)}{hint}")
    return import_object(ESTIMATORS[families[family]][0])()


def _same(a, b) -> bool:
    try:
        return bool(a == b) if type(a) is type(b) else False
    except (TypeError, ValueError):
        return False
