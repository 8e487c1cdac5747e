"""Comparing a simulated with a measured force run: alignment, error metrics (the
reports with plots and HTML: :mod:`~robot_grinding_sim.core.record.reports`).

ROS-free. Inputs are :class:`~robot_grinding_sim.core.record.bag.WrenchSeries` (and optionally
:class:`~robot_grinding_sim.core.record.bag.ProgressSeries`) read from bags by ``core.bag``.

Conventions (docs/compare.md has the long form):

- Force component compared (``component``): ``fz`` (z of the force in the message frame),
  ``norm`` (|F|), or ``normal`` (F projected on the run's own mean in-contact force direction, so
  the sensor and the simulated contact may be expressed in different frames).
- Lag: ``t_meas = t_sim + lag_s``; a positive lag means the measurement comes later.
- In contact: aligned samples where the measured component exceeds ``threshold`` in magnitude.
- Mean relative error (the paper's metric): mean(|F_sim - F_meas| / |F_meas|) over the in-contact
  aligned samples, a fraction (0.0275 is the paper's 2.75 %). RMSE, MAE, peak error in N;
  correlation is Pearson's r of the two aligned series.
- Alignment (``align``):
    ``time``      header stamps of both runs on one clock, plus a lag searched by
                  cross-correlation within ``max_lag`` of zero and applied;
    ``xcorr``     runs on unrelated clocks (different start times): the lag is searched over
                  every overlap by cross-correlation and applied;
    ``progress``  each sample mapped to (pass index, arc length) by the progress topic of its own
                  run, and the runs compared at equal arc length per pass (robust to different
                  speeds and start times); ``lag_s`` is then the median of t_meas - t_sim at equal
                  progress;
    ``auto``      progress when both runs have a progress topic, else time when the stamps
                  overlap, else xcorr.
- Passes: from the measured run's progress topic when present, else contiguous in-contact
  stretches of the measured force (gaps shorter than ``min_gap`` s merged, stretches shorter
  than ``min_pass`` s dropped), numbered from 0.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from robot_grinding_sim.core.errors import InputError
from robot_grinding_sim.core.record.bag import ProgressSeries, WrenchSeries
from robot_grinding_sim.core.record.force_filter import ForceFilter, median_period

COMPONENTS = ("fz", "normal", "norm")
ALIGNS = ("auto", "time", "xcorr", "progress")


# -- components ---------------------------------------------------------------------------------
def component_of(series: WrenchSeries, component: str, threshold: float) -> np.ndarray:
    """The scalar force compared, (N,) N (see the module docstring for the components).

    Raises:
        InputError: unknown component, or ``normal`` with no sample above ``threshold``.
    """
    f = series.force
    if component == "fz":
        return f[:, 2].copy()
    if component == "norm":
        return np.linalg.norm(f, axis=1)
    if component == "normal":
        mag = np.linalg.norm(f, axis=1)
        sel = mag > threshold
        if not np.any(sel):
            raise InputError(
                f"topic {series.topic} in bag {series.bag}: no force above {threshold:g} N, so no contact"
                " normal can be estimated; lower --threshold or use --component fz|norm"
            )
        n = f[sel].mean(axis=0)
        norm = np.linalg.norm(n)
        if norm <= 0.0:
            raise InputError(f"topic {series.topic} in bag {series.bag}: in-contact forces cancel out")
        return f @ (n / norm)
    raise InputError(f"component must be one of {COMPONENTS}, got {component!r}")


# -- resampling helpers -------------------------------------------------------------------------
def _valid_at(t: np.ndarray, query: np.ndarray, max_gap: float) -> np.ndarray:
    """(K,) bool: ``query`` lies inside ``t``'s span and between samples at most ``max_gap`` apart."""
    i = np.searchsorted(t, query, side="right")
    inside = (i > 0) & (i < t.shape[0])
    i = np.clip(i, 1, t.shape[0] - 1)
    gap = t[i] - t[i - 1]
    exact = np.isin(query, t)
    return (inside & (gap <= max_gap)) | exact


def _uniform(t: np.ndarray, y: np.ndarray, dt: float) -> np.ndarray:
    """``y`` resampled on ``t[0] + k dt`` (linear)."""
    n = int(math.floor((t[-1] - t[0]) / dt)) + 1
    return np.interp(t[0] + dt * np.arange(n), t, y)


def estimate_lag(
    t_sim: np.ndarray,
    y_sim: np.ndarray,
    t_meas: np.ndarray,
    y_meas: np.ndarray,
    dt: float,
    window: tuple[float, float] | None = None,
) -> tuple[float, float]:
    """Lag of the measured series behind the simulated one by cross-correlation.

    Both series are resampled on uniform grids of step ``dt`` starting at their own first sample,
    and Pearson's correlation coefficient over the overlap is computed for every lag (sums by FFT
    and cumulative sums); lags whose overlap is shorter than half the shorter run are not
    considered. The peak is refined by a parabola through its neighbours (sub-sample accuracy).

    Args:
        t_sim, y_sim: (N,) simulated times (s) and values.
        t_meas, y_meas: (M,) measured times (s) and values.
        dt: grid step, s.
        window: (lo, hi) s, the lags searched; None: every lag with some overlap.

    Returns:
        (lag_s, Pearson's r at the lag) with ``t_meas = t_sim + lag_s``.
    """
    from scipy.signal import correlate, correlation_lags

    a = _uniform(t_meas, y_meas, dt)
    b = _uniform(t_sim, y_sim, dt)
    # Means removed only to keep the sums below well conditioned (Pearson's r ignores offsets).
    a = a - a.mean()
    b = b - b.mean()
    if np.ptp(a) <= 0.0 or np.ptp(b) <= 0.0:
        raise InputError("cannot estimate the lag: a force series is constant")
    na, nb = a.shape[0], b.shape[0]
    lags = correlation_lags(na, nb, mode="full")
    # Pearson's r over the overlap of each lag (a[l] against b[l - k]): a plain correlation
    # favours the lags with the longest overlap and is biased towards zero lag.
    sab = correlate(a, b, mode="full", method="fft")
    ca = np.r_[0.0, np.cumsum(a)]
    ca2 = np.r_[0.0, np.cumsum(a * a)]
    cb = np.r_[0.0, np.cumsum(b)]
    cb2 = np.r_[0.0, np.cumsum(b * b)]
    lo_a = np.maximum(lags, 0)
    hi_a = np.minimum(na, nb + lags)
    lo_b, hi_b = lo_a - lags, hi_a - lags
    n = (hi_a - lo_a).astype(float)
    sa, sa2 = ca[hi_a] - ca[lo_a], ca2[hi_a] - ca2[lo_a]
    sb, sb2 = cb[hi_b] - cb[lo_b], cb2[hi_b] - cb2[lo_b]
    with np.errstate(divide="ignore", invalid="ignore"):
        cov = sab - sa * sb / n
        var = (sa2 - sa * sa / n) * (sb2 - sb * sb / n)
        c = np.where(var > 0.0, cov / np.sqrt(np.maximum(var, 1e-300)), -np.inf)
    # Lags with a short overlap give spurious perfect matches: require half the shorter run.
    c = np.where(n >= 0.5 * min(na, nb), c, -np.inf)
    lag_s = (t_meas[0] - t_sim[0]) + lags * dt
    if window is not None:
        sel = (lag_s >= window[0]) & (lag_s <= window[1])
        if not np.any(sel):
            raise InputError(
                f"no overlap between the runs within lags {window[0]:g}..{window[1]:g} s;"
                " the runs are on different clocks: use --align xcorr or progress"
            )
        c = np.where(sel, c, -np.inf)
    k = int(np.argmax(c))
    if not np.isfinite(c[k]):
        raise InputError("cannot estimate the lag: the runs do not overlap enough (half the shorter run)")
    frac = 0.0
    if 0 < k < c.shape[0] - 1 and np.isfinite(c[k - 1]) and np.isfinite(c[k + 1]):
        den = c[k - 1] - 2.0 * c[k] + c[k + 1]
        if den < 0.0:
            frac = 0.5 * (c[k - 1] - c[k + 1]) / den
    return float(lag_s[k] + frac * dt), float(c[k])


# -- alignment ----------------------------------------------------------------------------------
@dataclass
class Aligned:
    """Two runs on a common grid.

    Attributes:
        t: (K,) time of each grid point on the measured clock, s.
        x: (K,) abscissa for plots: time since the first grid point (s), or for ``progress``
            the arc length accumulated over the passes (m).
        x_label: axis label of ``x``.
        sim: (K,) simulated component, N.
        meas: (K,) measured component, N.
        pass_index: (K,) int pass of each grid point, -1 off a pass.
        lag_s: the lag (``t_meas = t_sim + lag_s``), s.
        method: the alignment used (``time``, ``xcorr`` or ``progress``).
        xcorr_peak: normalised cross-correlation at the lag (nan for progress).
    """

    t: np.ndarray
    x: np.ndarray
    x_label: str
    sim: np.ndarray
    meas: np.ndarray
    pass_index: np.ndarray
    lag_s: float
    method: str
    xcorr_peak: float = math.nan


def segment_passes(t: np.ndarray, in_contact: np.ndarray, min_gap: float, min_pass: float) -> np.ndarray:
    """(K,) pass index of each sample from contiguous in-contact stretches (-1 elsewhere).

    Args:
        t: (K,) sorted times, s.
        in_contact: (K,) bool.
        min_gap: shorter gaps between stretches are bridged, s.
        min_pass: shorter stretches are dropped, s.
    """
    idx = np.full(t.shape[0], -1, dtype=int)
    on = np.flatnonzero(in_contact)
    if on.size == 0:
        return idx
    breaks = np.flatnonzero(np.diff(t[on]) > min_gap)
    starts = np.r_[on[0], on[breaks + 1]]
    ends = np.r_[on[breaks], on[-1]]
    k = 0
    for s, e in zip(starts, ends, strict=True):
        if t[e] - t[s] >= min_pass:
            idx[s : e + 1] = k
            k += 1
    return idx


def pass_of_progress(prog: ProgressSeries, t: np.ndarray, max_gap: float) -> tuple[np.ndarray, np.ndarray]:
    """(pass index, arc length) at times ``t`` from a progress series (-1 / nan off a pass).

    A time gets the pass of the progress samples around it when both have that pass and are at
    most ``max_gap`` apart; the arc length is interpolated linearly between them.
    """
    i = np.searchsorted(prog.t, t, side="right")
    lo = np.clip(i - 1, 0, len(prog) - 1)
    hi = np.clip(i, 0, len(prog) - 1)
    same = (
        (i > 0)
        & (i < len(prog))
        & (prog.pass_index[lo] == prog.pass_index[hi])
        & (prog.t[hi] - prog.t[lo] <= max_gap)
    )
    exact = (i > 0) & (prog.t[lo] == t)
    ok = (same | exact) & (prog.pass_index[lo] >= 0)
    span = np.where(prog.t[hi] > prog.t[lo], prog.t[hi] - prog.t[lo], 1.0)
    w = np.clip((t - prog.t[lo]) / span, 0.0, 1.0)
    arc = prog.arc_length[lo] + w * (prog.arc_length[hi] - prog.arc_length[lo])
    return np.where(ok, prog.pass_index[lo], -1), np.where(ok, arc, np.nan)


def align_time(
    sim: WrenchSeries,
    y_sim: np.ndarray,
    meas: WrenchSeries,
    y_meas: np.ndarray,
    search: str = "time",
    max_lag: float = 1.0,
    dt: float | None = None,
) -> Aligned:
    """Align by time: estimate the lag by cross-correlation, then resample on a common grid.

    Args:
        search: ``time`` (lag within ``max_lag`` of zero: one clock) or ``xcorr`` (any lag).
        dt: grid step, s; default the coarser of the two median sample periods.
    """
    p_sim, p_meas = median_period(sim.t), median_period(meas.t)
    if not (math.isfinite(p_sim) and math.isfinite(p_meas)):
        raise InputError("each run needs at least two samples at distinct times to be aligned")
    step = float(dt) if dt else max(p_sim, p_meas)
    window = (-max_lag, max_lag) if search == "time" else None
    lag, peak = estimate_lag(sim.t, y_sim, meas.t, y_meas, step, window)
    lo = max(sim.t[0] + lag, meas.t[0])
    hi = min(sim.t[-1] + lag, meas.t[-1])
    if hi - lo < step:
        raise InputError(f"the runs do not overlap in time after a lag of {lag:.6g} s")
    grid = lo + step * np.arange(int(math.floor((hi - lo) / step)) + 1)
    valid = _valid_at(sim.t, grid - lag, 3.0 * p_sim) & _valid_at(meas.t, grid, 3.0 * p_meas)
    grid = grid[valid]
    return Aligned(
        t=grid,
        x=grid - grid[0] if grid.size else grid,
        x_label="time (s)",
        sim=np.interp(grid - lag, sim.t, y_sim),
        meas=np.interp(grid, meas.t, y_meas),
        pass_index=np.full(grid.shape[0], -1, dtype=int),
        lag_s=lag,
        method=search,
        xcorr_peak=peak,
    )


def align_progress(
    sim: WrenchSeries,
    y_sim: np.ndarray,
    prog_sim: ProgressSeries,
    meas: WrenchSeries,
    y_meas: np.ndarray,
    prog_meas: ProgressSeries,
    ds: float | None = None,
) -> Aligned:
    """Align by pass index and arc length (see the module docstring).

    Args:
        ds: arc-length grid step, m; default the coarser of the runs' median arc step per sample.
    """

    def mapped(series: WrenchSeries, y: np.ndarray, prog: ProgressSeries) -> tuple[np.ndarray, ...]:
        gap = 5.0 * median_period(prog.t) if len(prog) > 1 else math.inf
        p, s = pass_of_progress(prog, series.t, gap)
        keep = p >= 0
        return p[keep], s[keep], y[keep], series.t[keep]

    ps, ss, ys, ts = mapped(sim, y_sim, prog_sim)
    pm, sm, ym, tm = mapped(meas, y_meas, prog_meas)
    common = sorted(set(ps.tolist()) & set(pm.tolist()))
    if not common:
        raise InputError(
            f"no pass in common between the progress topics of {sim.bag} and {meas.bag}"
            " (or no force sample during a pass)"
        )

    def arc_step(p: np.ndarray, s: np.ndarray) -> float:
        steps = [np.abs(np.diff(s[p == k])) for k in np.unique(p)]
        d = np.concatenate(steps) if steps else np.array([])
        d = d[d > 0]
        return float(np.median(d)) if d.size else math.inf

    step = float(ds) if ds else max(arc_step(ps, ss), arc_step(pm, sm))
    if not math.isfinite(step) or step <= 0.0:
        raise InputError("the progress topics give no arc-length change during the passes")
    parts: dict[str, list[np.ndarray]] = {k: [] for k in ("t", "x", "sim", "meas", "pass", "tsim")}
    offset = 0.0
    for k in common:
        out = []
        for p, s, y, t in ((ps, ss, ys, ts), (pm, sm, ym, tm)):
            sel = p == k
            order = np.argsort(s[sel], kind="stable")
            s_k, y_k, t_k = s[sel][order], y[sel][order], t[sel][order]
            s_u, first = np.unique(s_k, return_index=True)
            # Where the tool stood still (same arc length) average the force over the stop.
            y_u = np.add.reduceat(y_k, first) / np.diff(np.r_[first, s_k.shape[0]])
            out.append((s_u, y_u, t_k[first]))
        (s1, y1, t1), (s2, y2, t2) = out
        lo, hi = max(s1[0], s2[0]), min(s1[-1], s2[-1])
        if hi - lo < step:
            continue
        grid = lo + step * np.arange(int(math.floor((hi - lo) / step)) + 1)
        parts["sim"].append(np.interp(grid, s1, y1))
        parts["meas"].append(np.interp(grid, s2, y2))
        parts["t"].append(np.interp(grid, s2, t2))
        parts["tsim"].append(np.interp(grid, s1, t1))
        parts["x"].append(offset + grid - lo)
        parts["pass"].append(np.full(grid.shape[0], k, dtype=int))
        offset += hi - lo
    if not parts["t"]:
        raise InputError("the passes of the two runs do not overlap in arc length")
    t = np.concatenate(parts["t"])
    tsim = np.concatenate(parts["tsim"])
    return Aligned(
        t=t,
        x=np.concatenate(parts["x"]),
        x_label="arc length over the passes (m)",
        sim=np.concatenate(parts["sim"]),
        meas=np.concatenate(parts["meas"]),
        pass_index=np.concatenate(parts["pass"]),
        lag_s=float(np.median(t - tsim)),
        method="progress",
    )


# -- metrics ------------------------------------------------------------------------------------
@dataclass
class Metrics:
    """Error metrics of aligned in-contact samples (fractions, N, s).

    Attributes:
        mean_relative_error: mean(|sim - meas| / |meas|).
        rmse, mae, peak_error: root-mean-square, mean absolute and largest absolute error, N.
        correlation: Pearson's r (nan for fewer than 2 samples or a constant series).
        samples: aligned in-contact samples used.
        mean_sim, mean_measured: mean forces, N.
        index: the pass (-1 for the whole run).
        duration_s: time covered on the measured clock, s.
    """

    mean_relative_error: float
    rmse: float
    mae: float
    peak_error: float
    correlation: float
    samples: int
    mean_sim: float
    mean_measured: float
    index: int = -1
    duration_s: float = 0.0


def error_metrics(sim: np.ndarray, meas: np.ndarray, index: int = -1, duration_s: float = 0.0) -> Metrics:
    """Metrics of (K,) aligned samples (the caller selects the in-contact ones)."""
    n = int(sim.shape[0])
    if n == 0:
        nan = math.nan
        return Metrics(nan, nan, nan, nan, nan, 0, nan, nan, index, duration_s)
    err = sim - meas
    ae = np.abs(err)
    corr = math.nan
    if n > 1 and np.std(sim) > 0 and np.std(meas) > 0:
        corr = float(np.corrcoef(sim, meas)[0, 1])
    return Metrics(
        mean_relative_error=float(np.mean(ae / np.abs(meas))),
        rmse=float(np.sqrt(np.mean(err**2))),
        mae=float(np.mean(ae)),
        peak_error=float(ae.max()),
        correlation=corr,
        samples=n,
        mean_sim=float(sim.mean()),
        mean_measured=float(meas.mean()),
        index=index,
        duration_s=duration_s,
    )


@dataclass
class Comparison:
    """The result of :func:`compare_runs`: aligned data, metrics overall and per pass."""

    aligned: Aligned
    in_contact: np.ndarray
    overall: Metrics
    passes: list[Metrics]
    component: str
    threshold: float
    sim_source: dict[str, str]
    meas_source: dict[str, str]
    notes: list[str] = field(default_factory=list)
    filter: str = "none"
    samples_in_contact: str = "measured run"

    def to_json(self) -> dict[str, Any]:
        """The ``grinding compare --json`` document (fractions, seconds, newtons)."""
        o = self.overall
        return {
            "mean_relative_error": o.mean_relative_error,
            "rmse": o.rmse,
            "mae": o.mae,
            "peak_error": o.peak_error,
            "correlation": o.correlation,
            "lag_s": self.aligned.lag_s,
            "passes": [asdict(p) for p in self.passes],
            "samples": o.samples,
            "mean_sim": o.mean_sim,
            "mean_measured": o.mean_measured,
            "align": self.aligned.method,
            "component": self.component,
            "threshold_n": self.threshold,
            "xcorr_peak": self.aligned.xcorr_peak,
            "sim": self.sim_source,
            "real": self.meas_source,
            "filter": self.filter,
            "in_contact": self.samples_in_contact,
            "notes": self.notes,
        }


def compare_runs(
    sim: WrenchSeries,
    meas: WrenchSeries,
    align: str = "auto",
    component: str = "normal",
    threshold: float = 1.0,
    prog_sim: ProgressSeries | None = None,
    prog_meas: ProgressSeries | None = None,
    max_lag: float = 1.0,
    min_gap: float = 0.2,
    min_pass: float = 0.1,
    dt: float | None = None,
    force_filter: ForceFilter | None = None,
    both_in_contact: bool = False,
) -> Comparison:
    """Align two runs and compute the error metrics overall and per pass.

    Args:
        sim, meas: the simulated and the measured force series.
        align: ``auto``, ``time``, ``xcorr`` or ``progress`` (module docstring).
        component: ``fz``, ``normal`` or ``norm``.
        threshold: in-contact threshold on |measured component|, N (>= 0).
        prog_sim, prog_meas: progress series of the runs (needed for ``progress``; the measured
            one also defines the passes in time alignment).
        max_lag: lag search half-width for ``time``, s.
        min_gap, min_pass: pass segmentation without a progress topic, s.
        dt: time grid step, s (default: the coarser sample period).
        force_filter: applied to both runs before anything else (:class:`ForceFilter`).
        both_in_contact: the metrics over the samples where both runs are in contact (|component|
            above ``threshold``), not only the measured one (``--in-contact``: the onsets where
            model and cell disagree on the contact itself left out).

    Raises:
        InputError: bad options, runs that cannot be aligned, no in-contact sample.
    """
    if align not in ALIGNS:
        raise InputError(f"align must be one of {ALIGNS}, got {align!r}")
    if component not in COMPONENTS:
        raise InputError(f"component must be one of {COMPONENTS}, got {component!r}")
    if not (math.isfinite(threshold) and threshold >= 0.0):
        raise InputError(f"threshold must be a finite force >= 0 N, got {threshold!r}")
    if not (math.isfinite(max_lag) and max_lag > 0.0):
        raise InputError(f"max_lag must be > 0 s, got {max_lag!r}")
    notes: list[str] = []
    flt = (force_filter or ForceFilter()).check()
    sim, meas = flt.apply(sim), flt.apply(meas)
    y_sim = component_of(sim, component, threshold)
    y_meas = component_of(meas, component, threshold)
    method = align
    if method == "auto":
        overlap = min(sim.t[-1], meas.t[-1]) - max(sim.t[0], meas.t[0])
        if prog_sim is not None and prog_meas is not None:
            method = "progress"
        elif overlap > 0.5 * min(sim.t[-1] - sim.t[0], meas.t[-1] - meas.t[0]):
            method = "time"
        else:
            method = "xcorr"
        notes.append(f"alignment chosen automatically: {method}")
    if method == "progress":
        missing = [s.bag for s, p in ((sim, prog_sim), (meas, prog_meas)) if p is None]
        if missing:
            raise InputError(f"--align progress needs the progress topic in {', '.join(missing)}")
        aligned = align_progress(sim, y_sim, prog_sim, meas, y_meas, prog_meas)  # type: ignore[arg-type]
    else:
        aligned = align_time(sim, y_sim, meas, y_meas, search=method, max_lag=max_lag, dt=dt)
        if prog_meas is not None:
            gap = 5.0 * median_period(prog_meas.t) if len(prog_meas) > 1 else math.inf
            aligned.pass_index = pass_of_progress(prog_meas, aligned.t, gap)[0]
    in_contact = np.abs(aligned.meas) > threshold
    if both_in_contact:
        in_contact &= np.abs(aligned.sim) > threshold
    if method != "progress" and prog_meas is None:
        aligned.pass_index = segment_passes(aligned.t, in_contact, min_gap, min_pass)
    if not np.any(in_contact):
        raise InputError(
            f"no aligned sample has a measured force above {threshold:g} N ({sim.topic} in {sim.bag},"
            f" {meas.topic} in {meas.bag}); lower --threshold or check --component"
        )

    def duration(sel: np.ndarray) -> float:
        t = aligned.t[sel]
        return float(t.max() - t.min()) if t.size else 0.0

    overall = error_metrics(aligned.sim[in_contact], aligned.meas[in_contact], -1, duration(in_contact))
    passes = []
    for k in sorted(set(aligned.pass_index.tolist()) - {-1}):
        sel = in_contact & (aligned.pass_index == k)
        if np.any(sel):
            passes.append(error_metrics(aligned.sim[sel], aligned.meas[sel], int(k), duration(sel)))
    return Comparison(
        aligned=aligned,
        in_contact=in_contact,
        overall=overall,
        passes=passes,
        component=component,
        threshold=float(threshold),
        sim_source={"bag": sim.bag, "topic": sim.topic, "frame": sim.frame},
        meas_source={"bag": meas.bag, "topic": meas.topic, "frame": meas.frame},
        notes=notes,
        filter=flt.describe(),
        samples_in_contact="both runs" if both_in_contact else "measured run",
    )


# -- single run against a target ----------------------------------------------------------------
def parse_band(band: str | float, target: float) -> float:
    """Half-width of the target band, N: ``"0.5"`` is 0.5 N, ``"10%"`` is 10 % of ``target``."""
    if not math.isfinite(target):
        raise InputError(f"target must be a finite force in N, got {target!r}")
    text = str(band).strip()
    try:
        if text.endswith("%"):
            value = float(text[:-1]) / 100.0 * abs(target)
        else:
            value = float(text)
    except ValueError:
        msg = f"band must be a force in N (0.5) or a percentage of the target (10%), got {band!r}"
        raise InputError(msg) from None
    if not (math.isfinite(value) and value >= 0.0):
        raise InputError(f"band must be finite and >= 0, got {band!r}")
    return value
