"""Candidates as records, the Pareto front, the choice and the tables printed about them.

The front: measured candidates that no other measured candidate beats on validation accuracy, flash
and latency at once (at least as good on all three, better on one); latency is left out where the
target counts none (host). The choice (the one-standard-error rule): among the feasible candidates whose
validation accuracy is within one standard error of the best one's (``standard_error``: binomial over
the n validation rows), the smallest flash, then the fewest cycles, then the higher accuracy, then the earlier
candidate (a fixed order). A difference smaller than the noise of the validation split does not buy a
larger build.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from tinycc_ml.search.candidates import describe_settings

STATUSES = ("measured", "pruned", "skipped", "failed")
NOTE_WIDTH = 90  # characters of a candidate's note in the tables (pareto.json keeps all of it)
RULE = "one-standard-error rule: the smallest flash within one SE of the best validation accuracy"


def standard_error(p: float | None, n: int) -> float | None:
    """Standard error of an accuracy ``p`` measured on ``n`` rows: binomial, with Agresti and Coull's two
    added successes and failures (p~ = (k + 2) / (n + 4)), so a perfect score on few rows is not certain."""
    if p is None or n <= 0:
        return None
    q = (p * n + 2) / (n + 4)
    return math.sqrt(q * (1 - q) / (n + 4))


@dataclass
class Candidate:
    id: int
    family: str
    settings: dict
    precision: str
    status: str = "measured"  # or "pruned" (predicted not to fit), "skipped" (time budget), "failed"
    val_accuracy: float | None = None
    val_se: float | None = None  # standard error of val_accuracy
    flash_bytes: int | None = None
    ram_bytes: int | None = None
    static_ram_bytes: int | None = None
    stack_bytes: int | None = None
    const_bytes: int | None = None
    firmware_flash_bytes: int | None = None
    firmware_ram_bytes: int | None = None
    count: int | None = None  # cycles (AVR) or instructions (Cortex-M0), max over the simulated rows
    ms: float | None = None
    predicted_flash_bytes: int | None = None  # pruned candidates: the cost model's flash
    train_seconds: float | None = None
    failed: list[str] = field(default_factory=list)  # limits broken: flash, ram, latency, chip, compile
    note: str = ""
    on_front: bool = False
    screen_rows: int | None = None  # trained on this many of the search's rows (screening); None: on all of them

    @property
    def feasible(self) -> bool:
        return self.status == "measured" and not self.failed

    @property
    def label(self) -> str:
        screened = "" if self.screen_rows is None else f" ({self.screen_rows:,} rows)"
        return f"{self.family} {describe_settings(self.family, self.settings)} {self.precision}{screened}"

    def as_json(self, count_unit: str | None) -> dict:
        return {
            "id": self.id, "family": self.family, "settings": self.settings, "precision": self.precision,
            "status": self.status, "val_accuracy": self.val_accuracy,
            "val_accuracy_se": None if self.val_se is None else round(self.val_se, 6), "flash_bytes": self.flash_bytes,
            "ram_bytes": self.ram_bytes, "static_ram_bytes": self.static_ram_bytes, "stack_bytes": self.stack_bytes,
            "const_bytes": self.const_bytes, "firmware_flash_bytes": self.firmware_flash_bytes,
            "firmware_ram_bytes": self.firmware_ram_bytes,
            "cycles": self.count if count_unit == "cycles" else None,
            "instructions": self.count if count_unit == "instructions" else None,
            "ms": self.ms, "predicted_flash_bytes": self.predicted_flash_bytes, "train_seconds": self.train_seconds,
            "feasible": self.feasible, "failed": self.failed,
            "note": self.note, "on_front": self.on_front, "screen_rows": self.screen_rows,
        }


def _dominates(a: Candidate, b: Candidate, use_count: bool) -> bool:
    ka = (a.val_accuracy, -a.flash_bytes, -(a.count or 0) if use_count else 0)
    kb = (b.val_accuracy, -b.flash_bytes, -(b.count or 0) if use_count else 0)
    return all(x >= y for x, y in zip(ka, kb)) and ka != kb


def pareto_front(candidates: list[Candidate]) -> list[Candidate]:
    """Measured candidates not dominated in (accuracy up, flash down, latency down), by flash."""
    pool = [c for c in candidates
            if c.status == "measured" and c.val_accuracy is not None and c.flash_bytes is not None]
    use_count = all(c.count is not None for c in pool)
    front = [c for c in pool if not any(_dominates(o, c, use_count) for o in pool if o is not c)]
    return sorted(front, key=lambda c: (c.flash_bytes, -c.val_accuracy, c.id))


def rank(candidates: list[Candidate]) -> list[Candidate]:
    """Feasible candidates, best first (see the module doc): those within one standard error of the most
    accurate, smallest first, then the rest by accuracy."""
    feasible = sorted((c for c in candidates if c.feasible),
                      key=lambda c: (-c.val_accuracy, c.flash_bytes, c.count or 0, c.id))
    if not feasible:
        return []
    floor = feasible[0].val_accuracy - (feasible[0].val_se or 0.0) - 1e-12
    near = sorted((c for c in feasible if c.val_accuracy >= floor),
                  key=lambda c: (c.flash_bytes, c.count or 0, -c.val_accuracy, c.id))
    return near + [c for c in feasible if c.val_accuracy < floor]


def closest(candidates: list[Candidate], n: int = 3) -> list[Candidate]:
    """Measured candidates nearest to feasible: fewest limits broken, then the least excess."""
    measured = [c for c in candidates if c.status == "measured"]
    return sorted(measured, key=lambda c: (len(c.failed), c.flash_bytes or 1 << 40, c.count or 0, c.id))[:n]


def _fmt(value, spec: str = ",") -> str:
    return "-" if value is None else format(value, spec)


def table(rows: list[Candidate], count_unit: str | None, chosen: Candidate | None = None) -> str:
    """A text table of candidates (the chosen one marked with *)."""
    unit = {"cycles": "cycles", "instructions": "instr."}.get(count_unit or "", "")
    head = ["", "family", "setting", "precision", "rows", "val acc %", "± SE", "flash B", "RAM B"]
    if unit:
        head += [unit, "ms"]
    head += ["fits"]
    lines = []
    for c in rows:
        row = ["*" if c is chosen else "", c.family, describe_settings(c.family, c.settings), c.precision,
               "all" if c.screen_rows is None else f"{c.screen_rows:,}",
               "-" if c.val_accuracy is None else f"{100 * c.val_accuracy:.2f}",
               "-" if c.val_se is None else f"{100 * c.val_se:.2f}", _fmt(c.flash_bytes),
               _fmt(c.ram_bytes)]
        if unit:
            row += [_fmt(c.count), "-" if c.ms is None else f"{c.ms:.2f}"]
        if c.feasible:
            fits = "yes"
        elif c.status == "measured":
            fits = "no: " + ", ".join(c.failed)
        else:  # pruned, skipped or failed: why
            fits = c.status + (f" ({', '.join(c.failed)})" if c.failed else "")
            if c.note:
                fits += ": " + (c.note if len(c.note) <= NOTE_WIDTH else c.note[: NOTE_WIDTH - 3] + "...")
        row += [fits]
        lines.append(row)
    widths = [max(len(str(r[i])) for r in [head, *lines]) for i in range(len(head))]
    right = {4, 5, 6, 7, 8, 9, 10}

    def fmt(r):
        return "  ".join(str(v).rjust(w) if i in right else str(v).ljust(w) for i, (v, w) in enumerate(zip(r, widths)))

    return "\n".join(line.rstrip() for line in [fmt(head), "  ".join("-" * w for w in widths), *map(fmt, lines)])


def not_measured(candidates: list[Candidate]) -> list[str]:
    """What was not measured, and why, one line per reason: counts per family."""
    reasons: dict[str, dict[str, int]] = {}
    for c in candidates:
        if c.status == "measured":
            continue
        if c.status == "skipped":
            why_not = "skipped: the time budget"
        elif c.status == "pruned" and "flash" in c.failed:
            why_not = "pruned: predicted flash above the limit"
        elif c.status == "pruned":
            why_not = "pruned: a smaller size broke the RAM or latency limit"
        else:
            # the note's first clause, whole (the rest of it is in the table and pareto.json)
            why_not = ("failed: could not be built for the chip" if "chip" in c.failed else
                       "failed: " + c.note.split("; ")[0].split(": ")[0])
        per_family = reasons.setdefault(why_not, {})
        per_family[c.family] = per_family.get(c.family, 0) + 1
    return [f"{why_not} ({', '.join(f'{f} {n}' for f, n in families.items())})"
            for why_not, families in reasons.items()]


def _pct(c: Candidate) -> str:
    return f"{100 * c.val_accuracy:.2f}%" + ("" if c.val_se is None else f" ± {100 * c.val_se:.2f}")


def why(chosen: Candidate, ranked: list[Candidate], candidates: list[Candidate]) -> str:
    """One paragraph: why the winner won (``ranked`` as ``rank`` orders them)."""
    n_feasible = len(ranked)
    measured = sum(c.status == "measured" for c in candidates)
    best = max(ranked, key=lambda c: (c.val_accuracy, -c.flash_bytes, -(c.count or 0), -c.id))
    floor = best.val_accuracy - (best.val_se or 0.0) - 1e-12
    near = [c for c in ranked if c.val_accuracy >= floor]
    text = f"chose {chosen.label}: validation accuracy {_pct(chosen)} (SE over the validation rows)"
    if best is chosen:
        text += f", the highest of {n_feasible} candidates that meet every limit ({measured} measured)"
    else:
        text += (f", within one standard error of the most accurate of {n_feasible} candidates that meet every "
                 f"limit ({best.label} at {_pct(best)}; {measured} measured)")
    text += f"; {RULE} ({len(near)} candidate{'s' if len(near) != 1 else ''} within it)"
    others = [c for c in ranked if c is not chosen]
    if others:
        text += f"; next {others[0].label} at {_pct(others[0])}, {others[0].flash_bytes:,} B"
    other_family = [c for c in ranked if c.family != chosen.family]
    if other_family and other_family[0] is not others[0]:
        text += f"; best other family {other_family[0].label} at {_pct(other_family[0])}"
    better = [c for c in candidates if c.status == "measured" and c.failed and c.val_accuracy is not None
              and c.val_accuracy > chosen.val_accuracy]
    if better:
        top = max(better, key=lambda c: (c.val_accuracy, -c.id))
        text += (f"; {len(better)} more accurate candidates break a limit (best {top.label} at "
                 f"{_pct(top)}: {', '.join(top.failed)})")
    return text
