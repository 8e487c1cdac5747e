"""Reports of force runs: per-pass statistics of one run against a target band, and the plots and
HTML pages of :func:`write_compare_report` (simulated vs measured) and :func:`write_run_report`.

ROS-free; figures with matplotlib (Agg), pages self-contained or with PNGs beside them. Forces in
N, times in s; conventions of the comparison: :mod:`robot_grinding_sim.core.record.compare`.
"""

from __future__ import annotations

import base64
import html
import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from robot_grinding_sim.core.errors import InputError
from robot_grinding_sim.core.outfiles import check_output, staged_dir
from robot_grinding_sim.core.record.bag import ProgressSeries, WrenchSeries
from robot_grinding_sim.core.record.compare import (
    Comparison,
    component_of,
    median_period,
    pass_of_progress,
    segment_passes,
)


@dataclass
class PassStats:
    """Force statistics of one pass (or the whole run, index -1) of a single run.

    Attributes:
        mean, std, min, max: of the in-contact component, N.
        samples: in-contact samples.
        duration_s: time from the first to the last in-contact sample, s.
        in_band: fraction of in-contact samples within target +- band (nan without target).
        mean_error: mean - target, N (nan without target).
        mean_relative_error: mean(|F - target|) / target (nan without target).
    """

    index: int
    samples: int
    duration_s: float
    mean: float
    std: float
    min: float
    max: float
    in_band: float = math.nan
    mean_error: float = math.nan
    mean_relative_error: float = math.nan


@dataclass
class RunReport:
    """The result of :func:`analyse_run`."""

    t: np.ndarray
    y: np.ndarray
    in_contact: np.ndarray
    pass_index: np.ndarray
    overall: PassStats
    passes: list[PassStats]
    component: str
    threshold: float
    target: float | None
    band: float | None
    source: dict[str, str]
    filter: str = "none"

    def to_json(self) -> dict[str, Any]:
        """The ``grinding report --json`` document."""
        return {
            "filter": self.filter,
            **{k: v for k, v in asdict(self.overall).items() if k != "index"},
            "passes": [asdict(p) for p in self.passes],
            "component": self.component,
            "threshold_n": self.threshold,
            "target_n": self.target,
            "band_n": self.band,
            "source": self.source,
        }


def _pass_stats(
    y: np.ndarray, t: np.ndarray, index: int, target: float | None, band: float | None
) -> PassStats:
    st = PassStats(
        index=index,
        samples=int(y.shape[0]),
        duration_s=float(t.max() - t.min()) if t.size else 0.0,
        mean=float(y.mean()),
        std=float(y.std()),
        min=float(y.min()),
        max=float(y.max()),
    )
    if target is not None:
        st.mean_error = st.mean - target
        if band is not None:
            st.in_band = float(np.mean(np.abs(y - target) <= band))
        if target != 0.0:
            st.mean_relative_error = float(np.mean(np.abs(y - target)) / abs(target))
    return st


def analyse_run(
    series: WrenchSeries,
    component: str = "normal",
    threshold: float = 1.0,
    target: float | None = None,
    band: float | None = None,
    progress: ProgressSeries | None = None,
    min_gap: float = 0.2,
    min_pass: float = 0.1,
    force_filter: Any = None,
) -> RunReport:
    """Force statistics of one run, overall and per pass, against an optional target band
    (``force_filter``: a :class:`~robot_grinding_sim.core.record.compare.ForceFilter` applied first).

    Raises:
        InputError: bad options or no sample above the threshold.
    """
    if not (math.isfinite(threshold) and threshold >= 0.0):
        raise InputError(f"threshold must be a finite force >= 0 N, got {threshold!r}")
    if target is not None and not math.isfinite(target):
        raise InputError(f"target must be a finite force in N, got {target!r}")
    from robot_grinding_sim.core.record.compare import ForceFilter

    flt = (force_filter or ForceFilter()).check()
    series = flt.apply(series)
    y = component_of(series, component, threshold)
    in_contact = np.abs(y) > threshold
    if not np.any(in_contact):
        raise InputError(
            f"topic {series.topic} in bag {series.bag}: no force above {threshold:g} N; lower --threshold"
        )
    if progress is not None:
        gap = 5.0 * median_period(progress.t) if len(progress) > 1 else math.inf
        pass_index = pass_of_progress(progress, series.t, gap)[0]
    else:
        pass_index = segment_passes(series.t, in_contact, min_gap, min_pass)
    overall = _pass_stats(y[in_contact], series.t[in_contact], -1, target, band)
    passes = []
    for k in sorted(set(pass_index.tolist()) - {-1}):
        sel = in_contact & (pass_index == k)
        if np.any(sel):
            passes.append(_pass_stats(y[sel], series.t[sel], int(k), target, band))
    return RunReport(
        t=series.t,
        y=y,
        in_contact=in_contact,
        pass_index=pass_index,
        overall=overall,
        passes=passes,
        component=component,
        threshold=float(threshold),
        target=target,
        band=band,
        source={"bag": series.bag, "topic": series.topic, "frame": series.frame},
        filter=flt.describe(),
    )


# -- plots and HTML -----------------------------------------------------------------------------
def _figure(w: float = 9.0, h: float = 4.0) -> tuple[Any, Any]:
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(w, h), dpi=110)
    ax.grid(True, alpha=0.3)
    return fig, ax


def _save(fig: Any, path: Path) -> None:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _fmt(v: Any, pct: bool = False) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "-"
    if isinstance(v, float):
        return f"{100 * v:.2f} %" if pct else f"{v:.4g}"
    return html.escape(str(v))


def _html_page(title: str, summary: list[tuple[str, str]], table: tuple[list[str], list[list[str]]],
               images: Sequence[tuple[str, str]], embed_dir: Path | None) -> str:
    """One self-contained page: summary list, per-pass table, images (base64 when ``embed_dir``)."""
    rows = "".join(f"<tr><th>{html.escape(k)}</th><td>{v}</td></tr>" for k, v in summary)
    head = "".join(f"<th>{html.escape(h)}</th>" for h in table[0])
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in table[1])
    figs = []
    for name, caption in images:
        src = name
        if embed_dir is not None:
            src = "data:image/png;base64," + base64.b64encode((embed_dir / name).read_bytes()).decode()
        figs.append(f'<figure><img src="{src}" alt="{html.escape(caption)}"><figcaption>'
                    f"{html.escape(caption)}</figcaption></figure>")
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>{html.escape(title)}</title><style>body{{font-family:sans-serif;max-width:1000px;"
        "margin:auto}} table{border-collapse:collapse} td,th{border:1px solid #ccc;padding:3px 8px;"
        "text-align:right} img{max-width:100%}</style></head><body>"
        f"<h1>{html.escape(title)}</h1><table>{rows}</table><h2>Per pass</h2>"
        f"<table><tr>{head}</tr>{body}</table>{''.join(figs)}</body></html>\n"
    )


def write_compare_report(cmp: Comparison, out_dir: str | Path, embed: bool = False) -> Path:
    """Write traces.png, error.png, passes.png, scatter.png, metrics.json and index.html.

    Files are made in a temporary directory next to ``out_dir`` and moved in at the end, so a
    failure leaves nothing partial.

    Args:
        embed: embed the images in index.html as base64 (one self-contained file) instead of
            relative links.

    Returns:
        The path of index.html.
    """
    out = Path(out_dir)
    check_output(out, "report directory", kind="dir")
    a = cmp.aligned
    ic = cmp.in_contact
    unit = {"fz": "Fz", "normal": "normal force", "norm": "|F|"}[cmp.component]
    with staged_dir(out, "report directory") as tmp:
        fig, ax = _figure()
        ax.plot(a.x, a.meas, lw=0.8, label=f"measured ({cmp.meas_source['topic']})")
        ax.plot(a.x, a.sim, lw=0.8, label=f"simulated ({cmp.sim_source['topic']})")
        ax.set_xlabel(a.x_label)
        ax.set_ylabel(f"{unit} (N)")
        ax.set_title(f"Force, aligned by {a.method} (lag {a.lag_s:.4g} s); filter: {cmp.filter}", fontsize=9)
        ax.legend(loc="best")
        _save(fig, tmp / "traces.png")

        fig, ax = _figure()
        err = np.where(ic, a.sim - a.meas, np.nan)
        ax.plot(a.x, err, lw=0.8, color="C3")
        ax.axhline(0.0, color="k", lw=0.5)
        ax.set_xlabel(a.x_label)
        ax.set_ylabel("simulated - measured (N)")
        ax.set_title(f"Error in contact ({cmp.samples_in_contact}): RMSE {cmp.overall.rmse:.3g} N, MAE "
                     f"{cmp.overall.mae:.3g} N; filter: {cmp.filter}", fontsize=9)
        _save(fig, tmp / "error.png")

        fig, ax = _figure()
        idx = [p.index for p in cmp.passes]
        ax.bar([str(i) for i in idx], [100 * p.mean_relative_error for p in cmp.passes], color="C0")
        ax.axhline(100 * cmp.overall.mean_relative_error, color="C3", ls="--", label="overall")
        ax.set_xlabel("pass")
        ax.set_ylabel("mean relative error (%)")
        ax.set_title(f"Mean relative error per pass; filter: {cmp.filter}", fontsize=9)
        ax.legend(loc="best")
        _save(fig, tmp / "passes.png")

        fig, ax = _figure(5.5, 5.0)
        ax.scatter(a.meas[ic], a.sim[ic], s=3, alpha=0.4)
        if np.any(ic):
            lo = float(min(a.meas[ic].min(), a.sim[ic].min()))
            hi = float(max(a.meas[ic].max(), a.sim[ic].max()))
            ax.plot([lo, hi], [lo, hi], "k--", lw=0.8, label="simulated = measured")
            ax.legend(loc="best")
        ax.set_xlabel(f"measured {unit} (N)")
        ax.set_ylabel(f"simulated {unit} (N)")
        ax.set_title(f"r = {_fmt(cmp.overall.correlation)}; filter: {cmp.filter}", fontsize=8)
        _save(fig, tmp / "scatter.png")

        doc = cmp.to_json()
        (tmp / "metrics.json").write_text(json.dumps(_json_safe(doc), indent=2) + "\n")
        o = cmp.overall
        summary = [
            ("simulated", html.escape(f"{cmp.sim_source['topic']} in {cmp.sim_source['bag']}")),
            ("measured", html.escape(f"{cmp.meas_source['topic']} in {cmp.meas_source['bag']}")),
            ("alignment", html.escape(a.method)),
            ("component", html.escape(cmp.component)),
            ("in-contact threshold", f"{cmp.threshold:g} N ({html.escape(cmp.samples_in_contact)})"),
            ("filter", html.escape(cmp.filter)),
            ("mean relative error", _fmt(o.mean_relative_error, pct=True)),
            ("RMSE", f"{_fmt(o.rmse)} N"),
            ("MAE", f"{_fmt(o.mae)} N"),
            ("peak error", f"{_fmt(o.peak_error)} N"),
            ("correlation", _fmt(o.correlation)),
            ("lag", f"{_fmt(a.lag_s)} s"),
            ("in-contact samples", str(o.samples)),
        ]
        table = (
            ["pass", "samples", "MRE", "RMSE (N)", "MAE (N)", "peak (N)", "r", "mean sim (N)",
             "mean meas (N)"],
            [
                [str(p.index), str(p.samples), _fmt(p.mean_relative_error, True), _fmt(p.rmse), _fmt(p.mae),
                 _fmt(p.peak_error), _fmt(p.correlation), _fmt(p.mean_sim), _fmt(p.mean_measured)]
                for p in cmp.passes
            ],
        )
        images = [
            ("traces.png", "Simulated and measured force, aligned"),
            ("error.png", "Error over the in-contact samples"),
            ("passes.png", "Mean relative error per pass"),
            ("scatter.png", "Simulated against measured force"),
        ]
        page = _html_page("Simulated vs measured force", summary, table, images, tmp if embed else None)
        (tmp / "index.html").write_text(page)
    return out / "index.html"


def write_run_report(rep: RunReport, out_dir: str | Path, embed: bool = False) -> Path:
    """Write force.png, passes.png, stats.json and index.html for one run (see write_compare_report)."""
    out = Path(out_dir)
    check_output(out, "report directory", kind="dir")
    with staged_dir(out, "report directory") as tmp:
        t0 = rep.t[0]
        fig, ax = _figure()
        ax.plot(rep.t - t0, rep.y, lw=0.8, label=rep.source["topic"])
        if rep.target is not None:
            ax.axhline(rep.target, color="C2", lw=1.0, label=f"target {rep.target:g} N")
            if rep.band:
                ax.axhspan(rep.target - rep.band, rep.target + rep.band, color="C2", alpha=0.15,
                           label=f"band +-{rep.band:g} N")
        ax.set_xlabel("time (s)")
        ax.set_ylabel(f"{rep.component} force (N)")
        ax.set_title(f"filter: {rep.filter}", fontsize=9)
        ax.legend(loc="best")
        _save(fig, tmp / "force.png")

        fig, ax = _figure()
        labels = [str(p.index) for p in rep.passes]
        ax.bar(labels, [p.mean for p in rep.passes], yerr=[p.std for p in rep.passes], capsize=3)
        if rep.target is not None:
            ax.axhline(rep.target, color="C2", lw=1.0)
            if rep.band:
                ax.axhspan(rep.target - rep.band, rep.target + rep.band, color="C2", alpha=0.15)
        ax.set_xlabel("pass")
        ax.set_ylabel("mean force +- std (N)")
        _save(fig, tmp / "passes.png")

        (tmp / "stats.json").write_text(json.dumps(_json_safe(rep.to_json()), indent=2) + "\n")
        o = rep.overall
        summary = [
            ("run", html.escape(f"{rep.source['topic']} in {rep.source['bag']}")),
            ("component", html.escape(rep.component)),
            ("filter", html.escape(rep.filter)),
            ("target", "-" if rep.target is None else f"{rep.target:g} N +- {_fmt(rep.band)} N"),
            ("mean force", f"{_fmt(o.mean)} N (std {_fmt(o.std)} N)"),
            ("in band", _fmt(o.in_band, pct=True)),
            ("mean relative error to target", _fmt(o.mean_relative_error, pct=True)),
            ("in-contact samples", str(o.samples)),
        ]
        table = (
            ["pass", "samples", "duration (s)", "mean (N)", "std (N)", "min (N)", "max (N)", "in band",
             "mean - target (N)"],
            [
                [str(p.index), str(p.samples), _fmt(p.duration_s), _fmt(p.mean), _fmt(p.std), _fmt(p.min),
                 _fmt(p.max), _fmt(p.in_band, True), _fmt(p.mean_error)]
                for p in rep.passes
            ],
        )
        images = [("force.png", "Force over time"), ("passes.png", "Mean force per pass")]
        (tmp / "index.html").write_text(
            _html_page("Grinding run", summary, table, images, tmp if embed else None)
        )
    return out / "index.html"


def _json_safe(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_safe(v) for v in obj]
    if isinstance(obj, (np.floating, np.integer)):
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj
