"""pareto.png: validation accuracy (with its standard error as a bar) against flash, RAM and latency, every
limit drawn, the legend beside the panels (never over a point), with matplotlib (the optional ``plot``
extra). Drawn on a Figure of its own (no pyplot, no global backend change)."""

from __future__ import annotations

import io
import logging

from tinycc_ml.search.pareto import not_measured

log = logging.getLogger(__name__)

MARKERS = {"float": "s", "int16": "o", "int8": "^"}


def pareto_png(res) -> tuple[bytes | None, str]:
    """(PNG bytes, "") or (None, why there is no plot)."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        note = "no pareto.png: matplotlib is not installed (pip install 'tinycc-ml[plot]')"
        log.warning("fit: %s", note)
        return None, note

    limits = res.limits
    measured = [c for c in res.candidates if c.status == "measured" and c.val_accuracy is not None]
    panels = [("flash_bytes", "model flash (bytes)", limits.max_flash),
              ("ram_bytes", "model RAM: static + peak stack (bytes)", limits.max_ram)]
    if limits.count_unit is not None:
        panels.append(("ms", f"latency (ms at {limits.clock_hz / 1e6:g} MHz)", limits.max_ms))
    fig = Figure(figsize=(4.6 * len(panels) + 2.0, 4.4), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    families = sorted({c.family for c in measured}, key=[c.family for c in measured].index)
    colours = {f: f"C{i}" for i, f in enumerate(families)}
    accs = [100 * c.val_accuracy for c in measured]
    low = min(accs) if accs else 0.0
    for i, (key, xlabel, limit) in enumerate(panels):
        ax = fig.add_subplot(1, len(panels), i + 1)
        xs = [getattr(c, key) for c in measured]
        top = max([x for x in xs if x is not None] + [limit or 0]) * 1.08 or 1.0
        if limit is not None:
            ax.axvspan(0, limit, color="tab:green", alpha=0.08, label="meets this limit")
            ax.axvline(limit, color="tab:green", lw=1, ls="--")
        for c in measured:
            x = getattr(c, key)
            if x is None:
                continue
            filled = c.feasible
            if c.val_se:
                ax.errorbar([x], [100 * c.val_accuracy], yerr=[100 * c.val_se], fmt="none",
                            ecolor=colours[c.family], alpha=0.45, lw=0.8, zorder=2)
            ax.scatter([x], [100 * c.val_accuracy], marker=MARKERS.get(c.precision, "o"), s=36,
                       facecolors=colours[c.family] if filled else "none", edgecolors=colours[c.family],
                       linewidths=1.2, zorder=3)
        front = sorted((c for c in res.front if getattr(c, key) is not None), key=lambda c: getattr(c, key))
        best, xs_front, ys_front = -1.0, [], []
        for c in front:  # the 2-D staircase of this panel's front
            if c.val_accuracy > best:
                best = c.val_accuracy
                xs_front.append(getattr(c, key))
                ys_front.append(100 * c.val_accuracy)
        if xs_front:
            ax.step(xs_front, ys_front, where="post", color="0.4", lw=1, zorder=2, label="front")
        chosen_x = getattr(res.chosen, key)
        if chosen_x is not None:
            ax.scatter([chosen_x], [100 * res.chosen.val_accuracy], marker="*", s=260, facecolors="gold",
                       edgecolors="black", zorder=4, label="chosen")
            ax.annotate(res.chosen.label, (chosen_x, 100 * res.chosen.val_accuracy), textcoords="offset points",
                        xytext=(8, -14), ha="left", fontsize=8)
        ax.set_xlim(0, top)
        ax.set_ylim(max(0.0, low - 2), 100.5 if not accs else min(100.5, max(accs) + 1.5))
        ax.set_xlabel(xlabel)
        ax.set_ylabel("validation accuracy (%)")
        ax.grid(alpha=0.3)
        if i == 0:
            for f in families:
                ax.scatter([], [], color=colours[f], label=f)
            for p, marker in MARKERS.items():
                if any(c.precision == p for c in measured):
                    ax.scatter([], [], marker=marker, color="0.45", label=p)
            ax.scatter([], [], facecolors="none", edgecolors="0.3", label="hollow: breaks a limit")
            ax.scatter([], [], color="0.45", label="filled: meets every limit")
            fig.legend(*ax.get_legend_handles_labels(), fontsize=7, loc="outside right upper")
    fig.suptitle(f"tinycc-ml fit: {limits.describe()}; bars: ±1 standard error", fontsize=10)
    skipped = not_measured(res.candidates)
    if skipped:  # what the plot cannot show as points: candidates never measured, and why
        fig.supxlabel("not measured: " + "; ".join(skipped), fontsize=7, wrap=True)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", metadata={"Software": None})
    return buffer.getvalue(), ""
