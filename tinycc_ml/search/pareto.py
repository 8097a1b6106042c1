"""Candidates as records, the Pareto front, the choice and the tables printed about them.

The front: measured candidates that no other measured candidate beats on validation accuracy, flash
and latency at once (at least as good on all three, better on one); latency is left out where the
target counts none (host). The choice: the feasible candidate of highest validation accuracy; ties go
to the smaller flash, then the fewer cycles, then the earlier candidate (a fixed order).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tinycc_ml.search.candidates import describe_settings

STATUSES = ("measured", "pruned", "skipped", "failed")


@dataclass
class Candidate:
    id: int
    family: str
    settings: dict
    precision: str
    status: str = "measured"  # or "pruned" (predicted not to fit), "skipped" (time budget), "failed"
    val_accuracy: float | None = None
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

    @property
    def feasible(self) -> bool:
        return self.status == "measured" and not self.failed

    @property
    def label(self) -> str:
        return f"{self.family} {describe_settings(self.family, self.settings)} {self.precision}"

    def as_json(self, count_unit: str | None) -> dict:
        return {
            "id": self.id, "family": self.family, "settings": self.settings, "precision": self.precision,
            "status": self.status, "val_accuracy": self.val_accuracy, "flash_bytes": self.flash_bytes,
            "ram_bytes": self.ram_bytes, "static_ram_bytes": self.static_ram_bytes, "stack_bytes": self.stack_bytes,
            "const_bytes": self.const_bytes, "firmware_flash_bytes": self.firmware_flash_bytes,
            "firmware_ram_bytes": self.firmware_ram_bytes,
            "cycles": self.count if count_unit == "cycles" else None,
            "instructions": self.count if count_unit == "instructions" else None,
            "ms": self.ms, "predicted_flash_bytes": self.predicted_flash_bytes, "train_seconds": self.train_seconds,
            "feasible": self.feasible, "failed": self.failed,
            "note": self.note, "on_front": self.on_front,
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
    """Feasible candidates, best first (see the module doc)."""
    feasible = [c for c in candidates if c.feasible]
    return sorted(feasible, key=lambda c: (-c.val_accuracy, c.flash_bytes, c.count or 0, c.id))


def closest(candidates: list[Candidate], n: int = 3) -> list[Candidate]:
    """Measured candidates nearest to feasible: fewest limits broken, then the least excess."""
    measured = [c for c in candidates if c.status == "measured"]
    return sorted(measured, key=lambda c: (len(c.failed), c.flash_bytes or 1 << 40, c.count or 0, c.id))[:n]


def _fmt(value, spec: str = ",") -> str:
    return "-" if value is None else format(value, spec)


def table(rows: list[Candidate], count_unit: str | None, chosen: Candidate | None = None) -> str:
    """A text table of candidates (the chosen one marked with *)."""
    unit = {"cycles": "cycles", "instructions": "instr."}.get(count_unit or "", "")
    head = ["", "family", "setting", "precision", "val acc %", "flash B", "RAM B"]
    if unit:
        head += [unit, "ms"]
    head += ["fits"]
    lines = []
    for c in rows:
        row = ["*" if c is chosen else "", c.family, describe_settings(c.family, c.settings), c.precision,
               "-" if c.val_accuracy is None else f"{100 * c.val_accuracy:.2f}", _fmt(c.flash_bytes),
               _fmt(c.ram_bytes)]
        if unit:
            row += [_fmt(c.count), "-" if c.ms is None else f"{c.ms:.2f}"]
        if c.feasible:
            fits = "yes"
        elif c.status == "measured":
            fits = "no: " + ", ".join(c.failed)
        else:
            fits = c.status + (f" ({', '.join(c.failed)})" if c.failed else "")
        row += [fits]
        lines.append(row)
    widths = [max(len(str(r[i])) for r in [head, *lines]) for i in range(len(head))]
    right = {4, 5, 6, 7, 8}

    def fmt(r):
        return "  ".join(str(v).rjust(w) if i in right else str(v).ljust(w) for i, (v, w) in enumerate(zip(r, widths)))

    return "\n".join([fmt(head), "  ".join("-" * w for w in widths), *map(fmt, lines)]).rstrip()


def why(chosen: Candidate, ranked: list[Candidate], candidates: list[Candidate]) -> str:
    """One paragraph: why the winner won."""
    n_feasible = len(ranked)
    measured = sum(c.status == "measured" for c in candidates)
    text = (f"chose {chosen.label}: the highest validation accuracy ({100 * chosen.val_accuracy:.2f}%) of "
            f"{n_feasible} candidates that meet every limit ({measured} measured)")
    others = [c for c in ranked if c.family != chosen.family]
    if len(ranked) > 1:
        runner = ranked[1]
        text += f"; next best {runner.label} at {100 * runner.val_accuracy:.2f}%"
        if runner.val_accuracy == chosen.val_accuracy:
            text += " (a tie, broken by the smaller flash)"
    if others and (len(ranked) < 2 or others[0] is not ranked[1]):
        text += f"; best other family {others[0].label} at {100 * others[0].val_accuracy:.2f}%"
    better = [c for c in candidates if c.status == "measured" and c.failed and c.val_accuracy is not None
              and c.val_accuracy > chosen.val_accuracy]
    if better:
        top = max(better, key=lambda c: (c.val_accuracy, -c.id))
        text += (f"; {len(better)} more accurate candidates break a limit (best {top.label} at "
                 f"{100 * top.val_accuracy:.2f}%: {', '.join(top.failed)})")
    return text
