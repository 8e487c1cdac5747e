"""``grinding compare SIM_BAG REAL_BAG`` and ``grinding report BAG``: simulated against measured force.

See docs/compare.md for the alignment methods, the metrics and the progress topic.
"""

from __future__ import annotations

import math
from typing import Any

import click

from robot_grinding_sim.cli.common import FINITE, emit_json, json_option

ALIGN_CHOICES = ("auto", "time", "progress", "xcorr")
COMPONENT_CHOICES = ("fz", "normal", "norm")


def _progress_or_none(bag: str, topic: str, required: bool) -> Any:
    """The progress series of ``bag`` if it has ``topic`` with messages (required: else an error)."""
    from robot_grinding_sim.core.errors import InputError
    from robot_grinding_sim.core.record.bag import has_topic, read_progress

    if has_topic(bag, topic):
        return read_progress(bag, topic)
    if required:
        msg = f"bag {bag} has no messages on the progress topic {topic} (needed by --align progress)"
        raise InputError(msg)
    return None


def _pct(v: float) -> str:
    return "-" if not math.isfinite(v) else f"{100 * v:.2f} %"


def _num(v: float, unit: str = "") -> str:
    return "-" if not math.isfinite(v) else f"{v:.4g}{unit}"


def _common_options(fn: Any) -> Any:
    fn = click.option("--component", type=click.Choice(COMPONENT_CHOICES), default="normal",
                      show_default=True,
                      help="Force compared: fz (z in the message frame), normal (along the run's mean "
                      "in-contact force direction), norm (|F|).")(fn)
    fn = click.option("--threshold", type=FINITE, default=1.0, show_default=True,
                      help="In contact where the (measured) force exceeds this, N.")(fn)
    fn = click.option("--progress-topic", default="/grinding/progress", show_default=True,
                      help="Progress topic: Float64MultiArray [pass_index, arc_length_m, stamp_s, ...].")(fn)
    fn = click.option("--stamp", type=click.Choice(("header", "log")), default="header", show_default=True,
                      help="Sample time: header stamps, or the time each message was logged.")(fn)
    fn = click.option("--report", "report_dir", type=click.Path(file_okay=False), default=None,
                      help="Write PNG plots and index.html into this directory.")(fn)
    fn = click.option("--embed", is_flag=True,
                      help="Embed the plots in index.html (base64) instead of links.")(fn)
    fn = click.option("--lowpass", type=FINITE, default=None,
                      help="Low-pass both runs at this cut-off, Hz (Butterworth, 2nd order, zero phase).")(fn)
    fn = click.option("--notch", type=FINITE, multiple=True,
                      help="Remove this frequency, Hz (a belt's, a spindle's vibration; repeatable; zero phase).")(fn)
    fn = click.option("--decimate", type=click.IntRange(min=1), default=1, show_default=True,
                      help="Keep one sample in N after filtering.")(fn)
    return fn


def _filter(lowpass: float | None, notch: tuple[float, ...], decimate: int) -> Any:
    from robot_grinding_sim.core.record.compare import ForceFilter

    return ForceFilter(lowpass, tuple(notch), int(decimate)).check()


@click.command("compare")
@click.argument("sim_bag", type=click.Path())
@click.argument("real_bag", type=click.Path())
@click.option("--topic-sim", default="/contact/wrench", show_default=True,
              help="Simulated wrench topic in SIM_BAG (leading slash optional).")
@click.option("--topic-real", default="/ft_sensor/wrench", show_default=True,
              help="Measured wrench topic in REAL_BAG (leading slash optional).")
@click.option("--align", type=click.Choice(ALIGN_CHOICES), default="auto", show_default=True,
              help="time: header stamps + lag by cross-correlation within --max-lag; xcorr: lag searched "
              "over every overlap (runs on different clocks); progress: by pass index and arc length; "
              "auto: progress if both bags have it, else time if the stamps overlap, else xcorr.")
@click.option("--max-lag", type=FINITE, default=1.0, show_default=True,
              help="Lag search half-width for --align time, s.")
@click.option("--in-contact", "in_contact", is_flag=True,
              help="Metrics over the samples where both runs are in contact (default: where the measured is).")
@_common_options
@json_option
def compare(sim_bag: str, real_bag: str, topic_sim: str, topic_real: str, align: str, max_lag: float,
            in_contact: bool, component: str, threshold: float, progress_topic: str, stamp: str,
            report_dir: str | None, embed: bool, lowpass: float | None, notch: tuple[float, ...], decimate: int,
            as_json: bool) -> None:
    """Compare the simulated force in SIM_BAG with the measured force in REAL_BAG.

    Metrics over the in-contact samples, overall and per pass: mean relative error
    mean(|F_sim - F_meas| / |F_meas|) (the paper's metric), RMSE, MAE, peak error, correlation
    and the lag (t_meas = t_sim + lag). SIM_BAG and REAL_BAG may be the same bag (predicted and
    measured force recorded in one real run). Bags: rosbag2 directories (sqlite3 or MCAP) or bare
    .mcap/.db3 files.
    """
    from robot_grinding_sim.core.outfiles import check_output
    from robot_grinding_sim.core.record.bag import read_wrench
    from robot_grinding_sim.core.record.compare import compare_runs
    from robot_grinding_sim.core.record.reports import write_compare_report

    flt = _filter(lowpass, notch, decimate)
    if report_dir:
        check_output(report_dir, "--report", kind="dir")
    sim = read_wrench(sim_bag, topic_sim, stamp=stamp)
    real = read_wrench(real_bag, topic_real, stamp=stamp)
    _refuse_raw(real_bag, real.topic)
    need = align == "progress"
    prog_sim = _progress_or_none(sim_bag, progress_topic, need) if align in ("auto", "progress") else None
    prog_real = _progress_or_none(real_bag, progress_topic, need)
    cmp = compare_runs(sim, real, align=align, component=component, threshold=threshold,
                       prog_sim=prog_sim, prog_meas=prog_real, max_lag=max_lag, force_filter=flt,
                       both_in_contact=in_contact)
    index = write_compare_report(cmp, report_dir, embed=embed) if report_dir else None
    if as_json:
        doc = cmp.to_json()
        if index is not None:
            doc["report"] = str(index)
        emit_json(doc)
        return
    o, a = cmp.overall, cmp.aligned
    lines = [
        f"simulated : {sim.topic} in {sim_bag} ({len(sim)} samples, frame {sim.frame or '-'})",
        f"measured  : {real.topic} in {real_bag} ({len(real)} samples, frame {real.frame or '-'})",
        f"alignment : {a.method}{' (auto)' if align == 'auto' else ''}, lag {a.lag_s:.6g} s (t_meas = t_sim + lag)",
        f"component : {component}, in contact above {threshold:g} N ({cmp.samples_in_contact}): {o.samples} "
        "aligned samples",
        f"filter    : {cmp.filter}",
        f"mean relative error : {_pct(o.mean_relative_error)}",
        f"RMSE                : {_num(o.rmse, ' N')}",
        f"MAE                 : {_num(o.mae, ' N')}",
        f"peak error          : {_num(o.peak_error, ' N')}",
        f"correlation         : {_num(o.correlation)}",
        f"mean force sim/meas : {_num(o.mean_sim)} / {_num(o.mean_measured)} N",
    ]
    if cmp.passes:
        head = f"{'pass':>5} {'samples':>8} {'MRE':>9} {'RMSE N':>8} {'MAE N':>8} {'peak N':>8} {'r':>7}"
        lines.append(head)
        for p in cmp.passes:
            lines.append(f"{p.index:>5} {p.samples:>8} {_pct(p.mean_relative_error):>9} {_num(p.rmse):>8} "
                         f"{_num(p.mae):>8} {_num(p.peak_error):>8} {_num(p.correlation):>7}")
    if index is not None:
        lines.append(f"report    : {index}")
    click.echo("\n".join(lines))


def _refuse_raw(bag: str, topic: str) -> None:
    """A raw imported reading (tool weight and bias in) is not a contact force: refuse it by name."""
    from robot_grinding_sim.core.errors import InputError
    from robot_grinding_sim.core.record.importlog import declared

    decl = declared(bag)
    if decl is not None and decl.get("topic") == topic and not decl.get("compensated", True):
        raise InputError(f"bag {bag}: {topic} is a raw reading (tool weight and bias in, imported --raw): compare "
                         "the /measured/wrench that `grinding replay` writes (compensated, at the tcp)")


@click.command("report")
@click.argument("bag", type=click.Path())
@click.option("--topic", default="/ft_sensor/wrench", show_default=True,
              help="Wrench topic (leading slash optional).")
@click.option("--target", type=FINITE, default=None, help="Target force, N (e.g. 5).")
@click.option("--band", default="5%", show_default=True,
              help="Half-width of the target band: newtons (0.5) or a percentage of the target (10%).")
@_common_options
@json_option
def report(bag: str, topic: str, target: float | None, band: str, component: str, threshold: float,
           progress_topic: str, stamp: str, report_dir: str | None, embed: bool, lowpass: float | None,
           notch: tuple[float, ...], decimate: int, as_json: bool) -> None:
    """Force statistics of one run in BAG, overall and per pass, against a target band."""
    from robot_grinding_sim.core.outfiles import check_output
    from robot_grinding_sim.core.record.bag import read_wrench
    from robot_grinding_sim.core.record.compare import parse_band
    from robot_grinding_sim.core.record.reports import analyse_run, write_run_report

    # the values first (no bag read for a bad one), then the bag
    band_n = parse_band(band, target) if target is not None else None
    flt = _filter(lowpass, notch, decimate)
    if report_dir:
        check_output(report_dir, "--report", kind="dir")
    series = read_wrench(bag, topic, stamp=stamp)
    prog = _progress_or_none(bag, progress_topic, False)
    rep = analyse_run(series, component=component, threshold=threshold, target=target, band=band_n,
                      progress=prog, force_filter=flt)
    index = write_run_report(rep, report_dir, embed=embed) if report_dir else None
    if as_json:
        doc = rep.to_json()
        if index is not None:
            doc["report"] = str(index)
        emit_json(doc)
        return
    o = rep.overall
    lines = [
        f"run       : {series.topic} in {bag} ({len(series)} samples, frame {series.frame or '-'})",
        f"component : {component}, in contact above {threshold:g} N: {o.samples} samples, "
        f"{len(rep.passes)} passes ({'progress topic' if prog is not None else 'from contact'})",
        f"force     : mean {_num(o.mean)} N, std {_num(o.std)} N, min {_num(o.min)} N, max {_num(o.max)} N",
        f"filter    : {rep.filter}",
    ]
    if target is not None:
        lines.append(f"target    : {target:g} N +- {band_n:g} N: {_pct(o.in_band)} of samples in band, "
                     f"mean - target {_num(o.mean_error)} N")
    lines.append(f"{'pass':>5} {'samples':>8} {'dur s':>7} {'mean N':>8} {'std N':>7} {'in band':>9}")
    for p in rep.passes:
        lines.append(f"{p.index:>5} {p.samples:>8} {p.duration_s:>7.3g} {_num(p.mean):>8} {_num(p.std):>7} "
                     f"{_pct(p.in_band):>9}")
    if index is not None:
        lines.append(f"report    : {index}")
    click.echo("\n".join(lines))
