"""Comparing runs (core.compare and `grinding compare` / `grinding report`).

Two runs with known relations are written as bags by independent writers (``rosbags``' Writer in
sqlite3 and MCAP, the ``mcap`` library's Writer), and the metrics and the lag are checked against
values computed here from the relation itself:

- measured = a * simulated(t - lag): MRE = |1 - a| / a exactly (sim / meas = 1 / a everywhere);
- measured = simulated + b: MRE = mean(b / meas) over the measured in-contact samples;
- measured = simulated + N(0, sigma): RMSE -> sigma, MAE -> sigma sqrt(2 / pi).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from test_bag import F64, WS, mcap_file, progress_msg, rosbags_bag, wrench_stamped

from robot_grinding_sim.cli import main as grinding
from robot_grinding_sim.core.errors import InputError
from robot_grinding_sim.core.record.bag import read_progress, read_wrench
from robot_grinding_sim.core.record.compare import (
    compare_runs,
    error_metrics,
    estimate_lag,
    parse_band,
    segment_passes,
)
from robot_grinding_sim.core.record.reports import analyse_run, write_compare_report, write_run_report

PASS_STARTS = (0.5, 3.0, 5.5)  # s
PASS_LEN = 2.0  # s
RAMP = 0.1  # s


def profile(t: np.ndarray) -> np.ndarray:
    """Normal force of a 3-pass job, N: 0 off the passes, ramps of 0.1 s, 5 N +- 1 N inside."""
    f = np.zeros_like(t)
    for k, t0 in enumerate(PASS_STARTS):
        tau = t - t0
        inside = (tau >= 0) & (tau <= PASS_LEN)
        ramp = np.clip(np.minimum(tau, PASS_LEN - tau) / RAMP, 0.0, 1.0)
        f = np.where(inside, ramp * (5.0 + (1.0 + 0.2 * k) * np.sin(2 * np.pi * 0.7 * tau + k)), f)
    return f


def unit(v: tuple[float, float, float]) -> np.ndarray:
    v = np.asarray(v, float)
    return v / np.linalg.norm(v)


def run_messages(topic: str, t: np.ndarray, f: np.ndarray, direction, stamp0: float, frame: str):
    """WrenchStamped messages: force f * direction at header stamps stamp0 + t, logged 1 ms later."""
    d = unit(direction)
    out = []
    for ti, fi in zip(t, f, strict=True):
        ns = int(round((stamp0 + ti) * 1e9))
        out.append((topic, WS, ns + 1_000_000, wrench_stamped(ns, fi * d, frame=frame)))
    return out


T_SIM = np.arange(0.0, 8.0, 1e-3)  # 1 kHz
T_MEAS = np.arange(0.0, 8.0, 2e-3)  # 500 Hz
SIM_DIR = (0.0, 0.0, 1.0)  # contact frame: normal along +z
MEAS_DIR = (0.6, 0.0, -0.8)  # sensor frame: the same force seen rotated


def make_pair(tmp_path: Path, sim_storage: str, meas_writer: str, scale=1.0, offset=0.0, lag=0.0,
              noise=0.0, meas_clock=100.0, seed=0):
    """Write a sim bag and a measured bag; measured(t) = scale * profile(t - lag) + offset + noise."""
    sim_msgs = run_messages("/contact/wrench", T_SIM, profile(T_SIM), SIM_DIR, 100.0, "tcp")
    f_meas = scale * profile(T_MEAS - lag) + offset
    f_meas = f_meas + np.random.default_rng(seed).normal(0.0, noise, T_MEAS.shape) if noise else f_meas
    meas_msgs = run_messages("/ft_sensor/wrench", T_MEAS, f_meas, MEAS_DIR, meas_clock, "ft_sensor")
    sim = rosbags_bag(tmp_path / f"sim_{sim_storage}", sim_storage, sim_msgs)
    if meas_writer == "mcap":
        meas = mcap_file(tmp_path / "meas.mcap", meas_msgs)
    else:
        meas = rosbags_bag(tmp_path / f"meas_{meas_writer}", meas_writer, meas_msgs)
    return sim, meas, f_meas


# -- metrics recovered from bags ----------------------------------------------------------------
@pytest.mark.parametrize(("sim_storage", "meas_writer"), [("sqlite3", "mcap"), ("mcap", "sqlite3")])
def test_scale_and_lag_recovered(tmp_path: Path, sim_storage: str, meas_writer: str) -> None:
    sim, meas, _ = make_pair(tmp_path, sim_storage, meas_writer, scale=1.05, lag=0.05)
    cmp = compare_runs(read_wrench(sim, "contact/wrench"), read_wrench(meas, "/ft_sensor/wrench"),
                       align="time", component="normal", threshold=1.0)
    assert cmp.aligned.method == "time"
    assert cmp.aligned.lag_s == pytest.approx(0.05, abs=5e-4)
    assert cmp.overall.mean_relative_error == pytest.approx(0.05 / 1.05, abs=2e-4)
    assert cmp.overall.correlation == pytest.approx(1.0, abs=1e-4)
    assert [p.index for p in cmp.passes] == [0, 1, 2]
    for p in cmp.passes:
        assert p.mean_relative_error == pytest.approx(0.05 / 1.05, abs=3e-4)
        assert p.duration_s == pytest.approx(PASS_LEN, abs=0.1)
    # RMSE of sim - meas = (1/a - 1) * meas over the in-contact samples, computed from the samples
    m = 1.05 * profile(T_MEAS - 0.05)
    m = m[np.abs(m) > 1.0]
    assert cmp.overall.rmse == pytest.approx(np.sqrt(np.mean(((1 / 1.05 - 1) * m) ** 2)), rel=5e-3)
    assert cmp.overall.peak_error == pytest.approx(np.max(np.abs((1 / 1.05 - 1) * m)), rel=5e-3)


def test_offset_gives_exact_mre(tmp_path: Path) -> None:
    sim, meas, f_meas = make_pair(tmp_path, "mcap", "mcap", offset=0.4)
    cmp = compare_runs(read_wrench(sim, "/contact/wrench"), read_wrench(meas, "/ft_sensor/wrench"),
                       align="time", component="norm", threshold=2.0)
    sel = np.abs(f_meas) > 2.0
    expected = np.mean(0.4 / f_meas[sel])
    assert cmp.overall.mean_relative_error == pytest.approx(expected, rel=2e-3)
    assert cmp.overall.mae == pytest.approx(0.4, abs=2e-3)
    assert cmp.overall.rmse == pytest.approx(0.4, abs=2e-3)
    assert cmp.overall.mean_measured - cmp.overall.mean_sim == pytest.approx(0.4, abs=2e-3)
    assert abs(cmp.aligned.lag_s) < 1e-3


def test_noise_statistics(tmp_path: Path) -> None:
    sigma = 0.2
    sim, meas, _ = make_pair(tmp_path, "mcap", "mcap", noise=sigma, lag=-0.02)
    cmp = compare_runs(read_wrench(sim, "/contact/wrench"), read_wrench(meas, "/ft_sensor/wrench"),
                       align="time", component="normal", threshold=1.0)
    n = cmp.overall.samples
    assert n > 2500
    # sample RMSE of n Gaussian draws: relative standard error 1 / sqrt(2 n)
    assert cmp.overall.rmse == pytest.approx(sigma, rel=4 / math.sqrt(2 * n))
    assert cmp.overall.mae == pytest.approx(sigma * math.sqrt(2 / math.pi), rel=0.05)
    assert cmp.aligned.lag_s == pytest.approx(-0.02, abs=1e-3)
    assert cmp.overall.correlation > 0.97


def test_xcorr_aligns_runs_on_unrelated_clocks(tmp_path: Path) -> None:
    # measured run recorded an hour later on another clock, plus 0.13 s lag
    sim, meas, _ = make_pair(tmp_path, "sqlite3", "mcap", scale=0.9, lag=0.13, meas_clock=3700.0)
    s, m = read_wrench(sim, "/contact/wrench"), read_wrench(meas, "/ft_sensor/wrench")
    with pytest.raises(InputError, match="xcorr"):
        compare_runs(s, m, align="time")
    for align in ("xcorr", "auto"):
        cmp = compare_runs(s, m, align=align, component="normal", threshold=1.0)
        assert cmp.aligned.method == "xcorr"
        assert cmp.aligned.lag_s == pytest.approx(3600.0 + 0.13, abs=1e-3)
        assert cmp.overall.mean_relative_error == pytest.approx(0.1 / 0.9, abs=5e-4)


def test_fz_component_in_one_frame(tmp_path: Path) -> None:
    # fz only makes sense when both runs are in one frame: compare the sim bag with itself scaled
    sim_msgs = run_messages("/a", T_SIM, profile(T_SIM), SIM_DIR, 10.0, "tcp")
    meas_msgs = run_messages("/b", T_SIM, 1.1 * profile(T_SIM), SIM_DIR, 10.0, "tcp")
    bag = rosbags_bag(tmp_path / "one", "mcap", sim_msgs + meas_msgs)
    cmp = compare_runs(read_wrench(bag, "/a"), read_wrench(bag, "/b"), component="fz", threshold=0.5)
    assert cmp.aligned.lag_s == pytest.approx(0.0, abs=2e-4)
    assert cmp.overall.mean_relative_error == pytest.approx(0.1 / 1.1, abs=1e-6)


# -- progress alignment -------------------------------------------------------------------------
def progress_run(speed: float, start: float, force_scale: float, stamp0: float, n_passes: int = 3,
                 length: float = 0.08, rate: float = 1000.0, gap: float = 0.7):
    """(t, force, progress rows) of a run over passes of ``length`` m at ``speed`` m/s.

    Force as a function of arc length s on pass k: 5 + sin(2 pi s / 0.02 + k) (N), times scale.
    Progress rows at 100 Hz: (t, pass, s); -1 between passes.
    """
    t_all, f_all, prog = [], [], []
    t0 = start
    for k in range(n_passes):
        dur = length / speed
        t = t0 + np.arange(0.0, dur, 1.0 / rate)
        s = (t - t0) * speed
        t_all.append(t)
        f_all.append(force_scale * (5.0 + np.sin(2 * np.pi * s / 0.02 + k)))
        for tp in np.arange(t0, t0 + dur, 0.01):
            prog.append((tp, k, (tp - t0) * speed))
        prog.append((t0 + dur + 0.01, -1, 0.0))
        tg = t0 + dur + np.arange(0.02, gap, 1.0 / rate)
        t_all.append(tg)
        f_all.append(np.zeros_like(tg))
        t0 = t0 + dur + gap
    t = np.concatenate(t_all)
    return t, np.concatenate(f_all), [(stamp0 + tp, k, s) for tp, k, s in prog]


def progress_bag(path: Path, storage: str, speed: float, start: float, scale: float, stamp0: float) -> Path:
    t, f, prog = progress_run(speed, start, scale, stamp0)
    msgs = run_messages("/ft_sensor/wrench", t, f, SIM_DIR, stamp0, "ft")
    topic = "/grinding/progress"
    msgs += [(topic, F64, int(tp * 1e9) + 500_000, progress_msg([k, s, tp])) for tp, k, s in prog]
    msgs.sort(key=lambda m: m[2])
    return rosbags_bag(path, storage, msgs)


def test_progress_alignment_is_robust_to_speed_and_start(tmp_path: Path) -> None:
    sim = progress_bag(tmp_path / "sim", "mcap", speed=0.02, start=0.3, scale=1.0, stamp0=50.0)
    meas = progress_bag(tmp_path / "meas", "sqlite3", speed=0.015, start=1.1, scale=1.08, stamp0=900.0)
    s, m = read_wrench(sim, "/ft_sensor/wrench"), read_wrench(meas, "/ft_sensor/wrench")
    ps, pm = read_progress(sim), read_progress(meas)
    cmp = compare_runs(s, m, align="auto", component="normal", threshold=1.0, prog_sim=ps, prog_meas=pm)
    assert cmp.aligned.method == "progress"
    assert [p.index for p in cmp.passes] == [0, 1, 2]
    assert cmp.overall.mean_relative_error == pytest.approx(0.08 / 1.08, abs=5e-4)
    assert cmp.overall.correlation > 0.999
    # time alignment cannot match different speeds: the progress alignment must beat it clearly
    by_time = compare_runs(s, m, align="xcorr", component="normal", threshold=1.0)
    assert by_time.overall.mean_relative_error > 3 * cmp.overall.mean_relative_error
    # lag at equal progress: median of t_meas - t_sim, between the start offsets of the passes
    assert 850.0 + 0.8 < cmp.aligned.lag_s < 850.0 + 0.8 + 3 * (0.08 / 0.015 - 0.08 / 0.02) + 2.0


# -- building blocks ----------------------------------------------------------------------------
def test_estimate_lag_sub_sample() -> None:
    t = np.arange(0.0, 5.0, 0.01)
    y = np.exp(-((t - 2.0) ** 2) / 0.05)
    for lag in (0.0, 0.0237, -0.31):
        est, peak = estimate_lag(t, y, t + 7.0 + lag, y, 0.01)
        assert est == pytest.approx(7.0 + lag, abs=1e-3)
        assert peak == pytest.approx(1.0, abs=0.02)


def test_error_metrics_by_hand() -> None:
    m = error_metrics(np.array([1.0, 2.0, 4.0]), np.array([2.0, 2.0, 5.0]))
    assert m.mean_relative_error == pytest.approx((0.5 + 0.0 + 0.2) / 3)
    assert m.rmse == pytest.approx(math.sqrt(2 / 3))
    assert m.mae == pytest.approx(2 / 3)
    assert m.peak_error == 1.0
    assert m.correlation == pytest.approx(np.corrcoef([1, 2, 4], [2, 2, 5])[0, 1])


def test_segment_passes() -> None:
    t = np.arange(0.0, 3.0, 0.01)
    spans = [(0.2, 0.8), (0.9, 1.2), (2.0, 2.05), (2.3, 2.9)]
    on = np.any([(t > a) & (t < b) for a, b in spans], axis=0)
    idx = segment_passes(t, on, min_gap=0.2, min_pass=0.1)
    assert set(idx[(t > 0.2) & (t < 1.2) & on]) == {0}  # the 0.1 s gap is bridged
    assert set(idx[(t > 2.0) & (t < 2.05)]) == {-1}  # too short
    assert set(idx[(t > 2.3) & (t < 2.9)]) == {1}


def test_parse_band() -> None:
    assert parse_band("0.5", 5.0) == 0.5
    assert parse_band("10%", 5.0) == pytest.approx(0.5)
    for bad in ("x", "-1", "nan"):
        with pytest.raises(InputError, match="band"):
            parse_band(bad, 5.0)


def test_bad_options(tmp_path: Path) -> None:
    sim, meas, _ = make_pair(tmp_path, "mcap", "mcap")
    s, m = read_wrench(sim, "/contact/wrench"), read_wrench(meas, "/ft_sensor/wrench")
    with pytest.raises(InputError, match="component"):
        compare_runs(s, m, component="fx")
    with pytest.raises(InputError, match="threshold"):
        compare_runs(s, m, threshold=-1.0)
    with pytest.raises(InputError, match="above 100"):
        compare_runs(s, m, component="norm", threshold=100.0)
    with pytest.raises(InputError, match="progress"):
        compare_runs(s, m, align="progress")


# -- single run ---------------------------------------------------------------------------------
def test_analyse_run_against_target(tmp_path: Path) -> None:
    _, meas, f_meas = make_pair(tmp_path, "mcap", "mcap")
    rep = analyse_run(read_wrench(meas, "/ft_sensor/wrench"), component="normal", threshold=1.0,
                      target=5.0, band=parse_band("10%", 5.0))
    assert [p.index for p in rep.passes] == [0, 1, 2]
    sel = np.abs(f_meas) > 1.0
    assert rep.overall.mean == pytest.approx(f_meas[sel].mean(), rel=1e-9)
    assert rep.overall.in_band == pytest.approx(np.mean(np.abs(f_meas[sel] - 5.0) <= 0.5), rel=1e-9)
    assert rep.overall.samples == int(sel.sum())


# -- reports and the CLI ------------------------------------------------------------------------
def test_compare_report_files(tmp_path: Path) -> None:
    sim, meas, _ = make_pair(tmp_path, "mcap", "mcap", scale=1.05, lag=0.05)
    cmp = compare_runs(read_wrench(sim, "/contact/wrench"), read_wrench(meas, "/ft_sensor/wrench"))
    index = write_compare_report(cmp, tmp_path / "rep")
    names = {p.name for p in (tmp_path / "rep").iterdir()}
    assert names == {"index.html", "traces.png", "error.png", "passes.png", "scatter.png", "metrics.json"}
    page = index.read_text()
    for png in ("traces.png", "error.png", "passes.png", "scatter.png"):
        assert f'src="{png}"' in page
        assert (tmp_path / "rep" / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    doc = json.loads((tmp_path / "rep" / "metrics.json").read_text())
    assert doc["mean_relative_error"] == pytest.approx(0.05 / 1.05, abs=2e-4)
    embedded = write_compare_report(cmp, tmp_path / "rep2", embed=True).read_text()
    assert embedded.count("data:image/png;base64,") == 4
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".report-")]  # no temp left


def test_cli_compare_json_and_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sim, meas, _ = make_pair(tmp_path, "sqlite3", "mcap", scale=1.05, lag=0.05)
    code = grinding(["compare", str(sim), str(meas), "--topic-sim", "contact/wrench", "--align", "time",
                     "--threshold", "1", "--json", "--report", str(tmp_path / "out")])
    out = capsys.readouterr()
    assert code == 0, out.err
    doc = json.loads(out.out)
    for key in ("mean_relative_error", "rmse", "mae", "peak_error", "correlation", "lag_s", "passes"):
        assert key in doc
    assert doc["mean_relative_error"] == pytest.approx(0.05 / 1.05, abs=2e-4)
    assert doc["lag_s"] == pytest.approx(0.05, abs=5e-4)
    assert len(doc["passes"]) == 3 and doc["passes"][0]["index"] == 0
    assert (tmp_path / "out" / "index.html").exists()
    # human output
    assert grinding(["compare", str(sim), str(meas), "--topic-sim", "/contact/wrench"]) == 0
    text = capsys.readouterr().out
    assert "mean relative error" in text and "4.76 %" in text


def test_cli_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, meas, _ = make_pair(tmp_path, "mcap", "mcap")
    code = grinding(["report", str(meas), "--target", "5", "--band", "10%", "--json",
                     "--report", str(tmp_path / "rr")])
    out = capsys.readouterr()
    assert code == 0, out.err
    doc = json.loads(out.out)
    assert len(doc["passes"]) == 3 and doc["band_n"] == pytest.approx(0.5)
    assert 0.0 < doc["in_band"] < 1.0
    assert (tmp_path / "rr" / "index.html").exists() and (tmp_path / "rr" / "force.png").exists()


@pytest.mark.parametrize("case", ["missing_topic", "not_wrench", "empty", "truncated", "no_bag"])
def test_cli_errors_are_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture, case: str) -> None:
    sim, meas, _ = make_pair(tmp_path, "mcap", "mcap")
    topic = "/contact/wrench"
    if case == "missing_topic":
        topic = "/no/such/topic"
    elif case == "not_wrench":
        sim = rosbags_bag(tmp_path / "prog", "mcap", [("/contact/wrench", F64, 10**9, progress_msg([0, 0]))])
    elif case == "empty":
        sim = rosbags_bag(tmp_path / "empty", "sqlite3", [])
    elif case == "truncated":
        data = meas.read_bytes()
        meas.write_bytes(data[: len(data) // 2])
    elif case == "no_bag":
        sim = tmp_path / "nothing_here"
    code = grinding(["compare", str(sim), str(meas), "--topic-sim", topic])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1, err
    bad_bag = meas if case == "truncated" else sim
    assert str(bad_bag) in err[0]
    if case in ("missing_topic", "not_wrench", "empty"):
        assert topic in err[0]
    assert err[0].startswith("grinding compare: error:")


def test_report_dir_that_is_a_file(tmp_path: Path) -> None:
    sim, meas, _ = make_pair(tmp_path, "mcap", "mcap")
    (tmp_path / "f").write_text("x")
    rep = analyse_run(read_wrench(meas, "/ft_sensor/wrench"))
    with pytest.raises(InputError, match="is a file"):
        write_run_report(rep, tmp_path / "f")
