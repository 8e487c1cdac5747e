"""Helpers shared by the ``grinding`` subcommands: JSON output, progress bars, errors."""

from __future__ import annotations

import json
import math
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import click

from robot_grinding_sim.core.jsonsafe import json_safe

T = TypeVar("T")

class FiniteFloat(click.ParamType):
    """A float option that refuses NaN and inf, naming the option (click's float takes ``nan``)."""

    name = "float"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        v = click.FLOAT.convert(value, param, ctx)
        if not math.isfinite(v):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return v


class FiniteRange(click.FloatRange):
    """click.FloatRange that refuses NaN and inf (a NaN compares false with both bounds and passed)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        v = click.FLOAT.convert(value, param, ctx)
        if not math.isfinite(v):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return super().convert(v, param, ctx)


#: the type of every float option of the ``grinding`` commands
FINITE = FiniteFloat()

def workers_options(fn: Any) -> Any:
    """``--workers`` and ``--address``: the force-target optimisation's passes at once, for ``plan``,
    ``simulate`` and ``demo`` (:func:`~robot_grinding_sim.core.study.pool_choice.job_pool`)."""
    fn = click.option("--address", default=None,
                      help="Optimise the passes on this running Ray cluster (auto, HOST:6379, ray://HOST:10001); "
                           "--workers caps the passes in flight.")(fn)
    return click.option("--workers", type=click.IntRange(min=1), default=None,
                        help="Optimise this many passes at once on local processes (the same result as one; each "
                             "worker loads the robot and part first, a few seconds) [default: 1, in this "
                             "process].")(fn)


json_option = click.option(
    "--json", "as_json", is_flag=True, help="Print the result as JSON on stdout (nothing else)."
)


def emit_json(obj: Any) -> None:
    """Print ``obj`` as JSON on stdout."""
    click.echo(json.dumps(json_safe(obj), indent=2))


def _prog() -> str:
    """The command's name (``grinding plan``) for plain progress lines."""
    ctx = click.get_current_context(silent=True)
    return ctx.command_path if ctx is not None else "grinding"


def _clock(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


class _Lines:
    """Progress as plain lines on stderr, for logs (stderr not a terminal): one line when a stage
    starts and one each time its work passes another tenth of its total (or every PLAIN_PERIOD s
    of an open-ended stage), with the elapsed time and, with a total, the time left. Same methods
    as the bar's handle; ``active`` is False (no bar shows)."""

    active = False
    #: an open-ended stage reports at most this often, s
    PLAIN_PERIOD = 30.0
    #: no two lines closer than this, s (a quick stage prints its name only)
    MIN_GAP = 2.0

    def __init__(self, description: str, total: float | None) -> None:
        self.prefix = _prog()
        self.description, self.total, self.done = description, total, 0.0
        self._start(description, total)

    def _start(self, description: str, total: float | None) -> None:
        self.description, self.total, self.done = description, total if total and total > 0 else None, 0.0
        self.t0 = self.t_last = time.monotonic()
        self.tenth = 0
        click.echo(f"{self.prefix}: {description}", err=True)

    def advance(self, n: float = 1.0) -> None:
        self.update(self.done + n)

    def update(self, completed: float, total: float | None = None, description: str | None = None) -> None:
        if description is not None and description != self.description:
            self._start(description, total)  # a new stage
        elif total is not None and total > 0 and total != self.total:
            self.total = total  # its total is known now (or changed): the same stage goes on
        self.done = float(completed)
        now = time.monotonic()
        elapsed = now - self.t0
        if self.total:
            tenth = int(10 * min(self.done / self.total, 1.0))
            if tenth > self.tenth and now - self.t_last >= self.MIN_GAP:
                self.tenth = tenth
                left = elapsed * (self.total - self.done) / self.done if self.done > 0 else float("nan")
                click.echo(f"{self.prefix}: {self.description} {100 * self.done / self.total:3.0f}% "
                           f"({_clock(elapsed)} elapsed" + (f", {_clock(left)} left)" if left == left else ")"),
                           err=True)
                self.t_last = now
        elif now - self.t_last >= self.PLAIN_PERIOD:
            self.t_last = now
            click.echo(f"{self.prefix}: {self.description} ({_clock(elapsed)} elapsed)", err=True)


@contextmanager
def progress(total: float | None, description: str, enabled: bool = True, plain: bool = True) -> Iterator[Any]:
    """A rich progress bar on stderr; yields an object with ``advance(n)`` and ``update(completed=)``.

    When stderr is not a terminal (a log), plain progress lines instead (:class:`_Lines`; ``plain``
    False: nothing, for callers that only feed a bar on a terminal). A no-op when ``enabled`` is
    false (``--json``: stdout is the document, stderr only errors).
    """
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    console = Console(file=sys.stderr)

    class _Handle:
        def __init__(self, prog: Progress | None, task: Any) -> None:
            self._prog, self._task = prog, task
            self._eta_shown = False  # this stage's time remaining has been drawn at least once

        def _show_eta(self) -> None:
            # rich redraws on its own 10 Hz clock, so a stage shorter than a few redraws (the
            # optimisation on a fast machine) would never show its time remaining: draw once as soon
            # as rich can estimate it (a total and two timed samples), then leave it to the clock.
            if self._prog is None or self._eta_shown:
                return
            task = next(t for t in self._prog.tasks if t.id == self._task)
            if task.total is not None and task.time_remaining is not None and not task.finished:
                self._eta_shown = True
                self._prog.refresh()

        @property
        def active(self) -> bool:
            """True if the bar shows (enabled, and stderr is a terminal)."""
            return self._prog is not None

        def advance(self, n: float = 1.0) -> None:
            if self._prog is not None:
                self._prog.advance(self._task, n)
                self._show_eta()

        def update(self, completed: float, total: float | None = None, description: str | None = None) -> None:
            """Set the work done; ``total`` (> 0) once known turns an open-ended bar into one with
            a percentage and an ETA, and a new total or a new description with a total (the next
            stage) starts the ETA afresh."""
            if self._prog is None:
                return
            kw: dict[str, Any] = {}
            if description is not None:
                kw["description"] = description
            task = next(t for t in self._prog.tasks if t.id == self._task)
            new_stage = description is not None and description != task.description
            if total is not None and total > 0 and (total != task.total or new_stage):
                self._prog.reset(self._task, total=total, completed=completed, **kw)
                self._eta_shown = False
                return
            self._prog.update(self._task, completed=completed, **kw)
            self._show_eta()

    if not enabled:
        yield _Handle(None, None)
        return
    if not console.is_terminal:
        yield _Lines(description, total) if plain else _Handle(None, None)
        return
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.percentage:>3.0f}%"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=True,
    ) as prog:
        yield _Handle(prog, prog.add_task(description, total=total))


@contextmanager
def stage_progress(description: str, enabled: bool = True
                   ) -> Iterator[tuple[Callable[[str], None], Callable[[str, float, float], None]]]:
    """:func:`progress` wired to a core job's callbacks: yields ``(on_stage, on_progress)``.

    ``on_stage(msg)`` prints the stage line on stderr when ``enabled`` (on a terminal as it is; in a
    log as a plain progress line); ``on_progress(stage, done, total)`` sets the bar (or the plain
    lines): ``total`` > 0 gives a percentage and an ETA (a new stage starts them afresh), 0 an
    open-ended stage.
    """
    with progress(None, description, enabled) as bar:
        def on_stage(msg: str) -> None:
            if not enabled:
                return
            click.echo(msg if sys.stderr.isatty() else f"{_prog()}: {msg}", err=True)

        def on_progress(stage: str, done: float, total: float) -> None:
            bar.update(done, total if total > 0 else None, description=stage)

        yield on_stage, on_progress


def track(items: Iterable[T], description: str, total: int | None = None, enabled: bool = True) -> Iterator[T]:
    """Iterate over ``items`` with a progress bar (see :func:`progress`)."""
    if total is None and hasattr(items, "__len__"):
        total = len(items)  # type: ignore[arg-type]
    with progress(total, description, enabled) as bar:
        for item in items:
            yield item
            bar.advance(1)
