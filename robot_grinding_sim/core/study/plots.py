"""Plots across a study: each figure against each swept name, one line per part.

``plots/<name>.png`` for every name the study varies (grid and cases; and ``part`` when there
are several parts): six panels, the mean normal force over the passes (with the target), the
largest pass error against the target, the mean in-pass force standard deviation, the removal's
coefficient of variation over the swath, the cycle time and the wall time. Each point is one job
that ended ok; the line joins each part's mean at each value (the mean over the other names'
values).
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from robot_grinding_sim.core.outfiles import write_files

#: (column, axis label, scale to the shown unit)
PANELS = (
    ("force_mean_n", "mean normal force over passes [N]", 1.0),
    ("force_error_max", "largest pass error vs target [%]", 100.0),
    ("force_std_n", "in-pass force std (mean over passes) [N]", 1.0),
    ("removal_cv", "removal depth CV over the swath [%]", 100.0),
    ("cycle_time_s", "cycle time [s]", 1.0),
    ("wall_time_s", "wall time of the job [s]", 1.0),
)


def _numeric(values: Sequence[Any]) -> bool:
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)


def _value(v: Any) -> bool:
    """A figure to draw: not None, not NaN."""
    return v is not None and not (isinstance(v, float) and math.isnan(v))


def _file_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name) + ".png"


def plot_against(rows: Sequence[Mapping[str, Any]], name: str, path: Path, title: str = "") -> None:
    """One figure of :data:`PANELS` against the column ``name`` of the ok rows."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ok = [r for r in rows if r["status"] == "ok"]
    xs_all = [r[name] if not isinstance(r[name], list) else str(r[name]) for r in ok]
    numeric = _numeric(xs_all)
    cats = list(dict.fromkeys(str(x) for x in xs_all))

    def pos(x: Any) -> float:
        return float(x) if numeric else float(cats.index(str(x)))

    parts = list(dict.fromkeys(r["part"] for r in ok))
    fig, axes = plt.subplots(2, 3, figsize=(14, 7.5), squeeze=False)
    for ax, (col, label, scale) in zip(axes.ravel(), PANELS, strict=True):
        for k, part in enumerate(parts):
            pts = [(pos(x), r[col] * scale) for x, r in zip(xs_all, ok, strict=True)
                   if r["part"] == part and _value(r[col])]
            if not pts:
                continue
            colour = f"C{k % 10}"
            ax.scatter([p[0] for p in pts], [p[1] for p in pts], s=14, alpha=0.45, color=colour)
            at: dict[float, list[float]] = {}
            for x, y in pts:
                at.setdefault(x, []).append(y)
            xs = sorted(at)
            ax.plot(xs, [sum(at[x]) / len(at[x]) for x in xs], "-o", ms=4, color=colour,
                    label=part if name != "part" else None)
        if col == "force_mean_n":
            targets = sorted({r["target_force_n"] for r in ok if r.get("target_force_n") is not None})
            for F in targets if len(targets) <= 3 else []:
                ax.axhline(F, color="g", ls="--", lw=0.8)
        ax.set_ylabel(label, fontsize=8)
        ax.set_xlabel(name, fontsize=8)
        ax.grid(alpha=0.3)
        if not numeric:
            ax.set_xticks(range(len(cats)))
            ax.set_xticklabels(cats, rotation=20, fontsize=7, ha="right")
    if len(parts) > 1 and name != "part":
        axes[0, 0].legend(fontsize=7)
    failed = sum(1 for r in rows if r["status"] == "failed")
    fig.suptitle(f"{title}: figures against {name} ({len(ok)} jobs ok" + (f", {failed} failed)" if failed else ")"),
                 fontsize=10)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90)
    plt.close(fig)
    write_files({path: buf.getvalue()})  # whole or not at all


def plot_study(study: Any, rows: Sequence[Mapping[str, Any]], folder: Path) -> list[Path]:
    """``folder/<name>.png`` for each swept name (and ``part`` with several parts); returns the
    files written (none when no job ended ok)."""
    if not any(r["status"] == "ok" for r in rows):
        return []
    names = list(study.swept) + (["part"] if len({r["part"] for r in rows}) > 1 else [])
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for name in names:
        path = folder / _file_name(name)
        plot_against(rows, name, path, study.name)
        out.append(path)
    return out
