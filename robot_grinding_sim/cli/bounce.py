"""``grinding bounce``: the paper's bouncing ball (section 4.1, Figure 3, Table 1) on our engine.

A sphere (default 1 kg, radius 0.1 m) released at rest with its lowest point ``--height`` above a
rigid plane, gravity 9.81 m/s^2 downwards, contact stiffness K = 1.4e8 N/m, simulated with the
variable-step engine (``robot_grinding_sim.core.contact.engine``) at outer step ``--dt``.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import click

from robot_grinding_sim.cli.common import FINITE, emit_json, json_option, progress
from robot_grinding_sim.core.contact import registry
from robot_grinding_sim.core.errors import InputError
from robot_grinding_sim.core.outfiles import check_output, staged_dir

#: the registered contact laws
MODELS = registry.names()
#: the most outer steps of a run, and the most plot samples (checked before the run)
MAX_STEPS = 1e8
MAX_PLOT_SAMPLES = 1e7
PANELS = ("force_time", "force_penetration", "velocity_time", "velocity_penetration", "energy")


def _check(name: str, value: float, low: float, low_open: bool, high: float | None = None,
           high_open: bool = False) -> None:
    bad = not math.isfinite(value) or value < low or (low_open and value == low)
    if high is not None:
        bad = bad or value > high or (high_open and value == high)
    if bad:
        lo = "(" if low_open else "["
        hi = ("inf)" if high is None else f"{high:g}" + (")" if high_open else "]"))
        raise InputError(f"{name} must lie in {lo}{low:g}, {hi}, got {value!r}")


def make_model(model: str, stiffness: float, cr: float, convention: str = "clamped", exponent: float = 1.5):
    """The contact model named ``model`` (a registered law) realising restitution ``cr`` (``convention``:
    clamped or not, for laws that may pull; ``exponent`` for laws with one)."""
    return registry.get(model).model(stiffness=stiffness, cr=cr, exponent=exponent, clamped=convention == "clamped")


def simulate_ball(model: str = "kelvin_voigt", cr: float = 1.0, dt: float = 1e-3, duration: float = 3.0,
                  stiffness: float = 1.4e8, mass: float = 1.0, height: float = 1.0, gravity: float = 9.81,
                  convention: str = "clamped", exponent: float = 1.5, dense: bool = False,
                  show_progress: bool = False) -> tuple[Any, dict[str, Any]]:
    """Run the ball; returns (EngineResult, the JSON summary). ``dense`` adds plot samples."""
    from robot_grinding_sim.core.contact.engine import NormalContactEngine

    _check("--mass", mass, 0.0, True)
    _check("--cr", cr, 0.0, True, 1.0)
    _check("--dt", dt, 0.0, True)
    _check("--duration", duration, 0.0, False)
    _check("--stiffness", stiffness, 0.0, True)
    _check("--height", height, 0.0, False)
    _check("--gravity", gravity, 0.0, False)
    if model not in registry.names():
        raise InputError(f"--model must be one of {', '.join(registry.names())}, got {model!r}")
    if duration / dt > MAX_STEPS:
        raise InputError(f"--duration {duration:g} s at --dt {dt:g} s is {duration / dt:.3g} steps, more than "
                         f"{MAX_STEPS:.0e}: shorten the duration or lengthen the step")
    contact = make_model(model, stiffness, cr, convention, exponent)
    eng = NormalContactEngine(contact, mass, -mass * gravity, height, 0.0)
    kw: dict[str, float] = {}
    if dense:
        v0 = math.sqrt(2.0 * gravity * height) or 1.0
        t_c = contact.contact_time(mass, v0)  # the law's estimate of an impact's duration
        kw = {"output_dt": min(1e-3, max(duration, 1e-6) / 2000.0), "contact_output_dt": t_c / 200.0}
        if duration / kw["output_dt"] > MAX_PLOT_SAMPLES:
            raise InputError(f"--plot: {duration:g} s sampled every {kw['output_dt']:g} s is more than "
                             f"{MAX_PLOT_SAMPLES:.0e} samples; shorten the --duration")
    with progress(duration, "bounce", enabled=show_progress) as bar:
        result = eng.run(duration, dt, on_progress=lambda t: bar.update(completed=t), **kw)
    wall = result.wall_time_s  # the simulation itself (not the progress bar's start-up)
    bounces = [c.as_dict() for c in result.contacts if c.v_out is not None]
    summary = {
        "bounces": bounces,
        "steps": result.steps,
        "wall_time_s": wall,
        "phases": result.phases,
        "in_contact_at_end": result.in_contact_at_end,
        "model": model,
        "cr": cr,
        "dt": dt,
        "duration": duration,
    }
    return result, summary


def write_plots(result: Any, out_dir: Path, title: str, radius: float) -> list[str]:
    """The Figure 3 panels as PNG files in ``out_dir`` (one per panel plus figure3.png)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    t, v, f, d, e = result.t, result.v, result.force, result.penetration, result.energy
    contacts = list(result.contacts)[:6]

    def per_contact():
        for i, c in enumerate(contacts):
            t_end = c.t_exit if c.t_exit is not None else t[-1]
            sel = (t >= c.t_impact) & (t <= t_end)
            yield i, c, sel

    def panel(ax, name):
        if name == "force_time":
            for i, c, sel in per_contact():
                ax.plot((t[sel] - c.t_impact) * 1e3, f[sel] / 1e3, label=f"impact {i + 1}")
            ax.set(xlabel="time since impact (ms)", ylabel="contact force (kN)", title="force vs time")
        elif name == "force_penetration":
            for i, _c, sel in per_contact():
                ax.plot(d[sel] * 1e6, f[sel] / 1e3, label=f"impact {i + 1}")
            ax.set(xlabel="penetration (um)", ylabel="contact force (kN)", title="force vs penetration")
        elif name == "velocity_time":
            ax.plot(t, v)
            ax.set(xlabel="time (s)", ylabel="velocity (m/s, up +)", title="velocity vs time")
        elif name == "velocity_penetration":
            for i, _c, sel in per_contact():
                ax.plot(d[sel] * 1e6, v[sel], label=f"impact {i + 1}")
            ax.set(xlabel="penetration (um)", ylabel="velocity (m/s, up +)", title="velocity vs penetration")
        else:
            ax.plot(t, e)
            ax.set(xlabel="time (s)", ylabel="energy (J)", title="mechanical energy")
        ax.grid(True, alpha=0.3)
        if name in ("force_time", "force_penetration", "velocity_penetration") and contacts:
            ax.legend(fontsize=7)

    files = []
    for name in PANELS:
        fig, ax = plt.subplots(figsize=(6, 4))
        panel(ax, name)
        fig.suptitle(title, fontsize=9)
        fig.tight_layout()
        path = out_dir / f"{name}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        files.append(str(path))
    fig, axes = plt.subplots(2, 3, figsize=(15, 8))
    for ax, name in zip(axes.flat, PANELS, strict=False):
        panel(ax, name)
    ax = axes.flat[-1]
    ax.plot(t, result.x + radius, lw=0.8)
    ax.set(xlabel="time (s)", ylabel="centre height (m)", title="height vs time")
    ax.grid(True, alpha=0.3)
    fig.suptitle(title)
    fig.tight_layout()
    path = out_dir / "figure3.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    files.append(str(path))
    return files


@click.command("bounce")
@click.option("--cr", type=FINITE, default=1.0, show_default=True,
              help="Coefficient of restitution, in (0, 1].")
@click.option("--dt", type=FINITE, default=1e-3, show_default=True, help="Outer time step (s).")
@click.option("--duration", type=FINITE, default=3.0, show_default=True, help="Simulated time (s).")
@click.option("--model", type=click.Choice(MODELS), default="kelvin_voigt", show_default=True,
              help="Contact model: Kelvin-Voigt (closed form) or a Hunt-Crossley law (Hertz n = 1.5).")
@click.option("--stiffness", type=FINITE, default=1.4e8, show_default=True,
              help="Contact stiffness K (N/m; N/m^1.5 for the Hunt-Crossley models).")
@click.option("--mass", type=FINITE, default=1.0, show_default=True, help="Ball mass (kg).")
@click.option("--height", type=FINITE, default=1.0, show_default=True,
              help="Initial gap between the ball's lowest point and the plane (m).")
@click.option("--radius", type=FINITE, default=0.1, show_default=True, help="Ball radius (m), for the plots.")
@click.option("--gravity", type=FINITE, default=9.81, show_default=True, help="Gravity (m/s^2, downwards).")
@click.option("--convention", type=click.Choice(("clamped", "unclamped")), default="clamped",
              show_default=True,
              help="Kelvin-Voigt restitution: clamped F >= 0 (ends at F = 0) or unclamped (at d = 0).")
@click.option("--plot", "plot_dir", type=click.Path(file_okay=False), default=None,
              help="Write the Figure 3 panels as PNG into this directory.")
@json_option
def bounce(cr: float, dt: float, duration: float, model: str, stiffness: float, mass: float, height: float,
           radius: float, gravity: float, convention: str, plot_dir: str | None, as_json: bool) -> None:
    """Drop a ball on a rigid plane and report every bounce (speeds in m/s, forces in N, times in s)."""
    _check("--radius", radius, 0.0, True)
    if plot_dir is not None:
        check_output(plot_dir, "--plot", kind="dir")
    result, summary = simulate_ball(model, cr, dt, duration, stiffness, mass, height, gravity, convention,
                                    dense=plot_dir is not None, show_progress=not as_json)
    if plot_dir is not None:
        # the convention is the LINEAR family's (the others are always clamped)
        title = f"{model} ({convention})" if registry.get(model).family == 0 else model
        title += f", c_r = {cr:g}, dt = {dt * 1e3:g} ms, K = {stiffness:g}, m = {mass:g} kg"
        with staged_dir(plot_dir, "--plot") as tmp:  # every panel, or none
            files = write_plots(result, tmp, title, radius)
        summary["plots"] = [str(Path(plot_dir) / Path(f).name) for f in files]
    if as_json:
        emit_json(summary)
        return
    click.echo(f"{model}, c_r {cr:g}, step {dt * 1e3:g} ms: {len(summary['bounces'])} bounces in "
               f"{duration:g} s, {summary['steps']} steps, {summary['phases']} phases, "
               f"{summary['wall_time_s'] * 1e3:.1f} ms wall")
    click.echo(f"{'#':>3} {'t_impact s':>11} {'v_in m/s':>9} {'v_out m/s':>9} {'ratio':>7} {'peak N':>10} "
               f"{'max pen um':>10} {'contact ms':>10}")
    for i, b in enumerate(summary["bounces"], 1):
        click.echo(f"{i:>3} {b['t_impact']:>11.6f} {b['v_in']:>9.5f} {b['v_out']:>9.5f} "
                   f"{b['v_out'] / b['v_in'] if b['v_in'] else float('nan'):>7.4f} {b['peak_force']:>10.1f} "
                   f"{b['max_penetration'] * 1e6:>10.3f} {b['contact_duration'] * 1e3:>10.5f}")
    if summary["in_contact_at_end"]:
        click.echo("the ball is resting on the plane at the end")
    for p in summary.get("plots", []):
        click.echo(f"wrote {p}")
