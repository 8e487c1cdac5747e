"""Helpers shared by the ``grinding`` subcommands: JSON output, progress bars, errors."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import click

from robot_grinding_sim.core.jsonsafe import json_safe

T = TypeVar("T")

json_option = click.option(
    "--json", "as_json", is_flag=True, help="Print the result as JSON on stdout (nothing else)."
)


def emit_json(obj: Any) -> None:
    """Print ``obj`` as JSON on stdout."""
    click.echo(json.dumps(json_safe(obj), indent=2))


@contextmanager
def progress(total: float | None, description: str, enabled: bool = True) -> Iterator[Any]:
    """A rich progress bar on stderr; yields an object with ``advance(n)`` and ``update(completed=)``.

    Disabled (a no-op) when ``enabled`` is false or stderr is not a terminal, so JSON output and
    logs stay clean.
    """
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    console = Console(file=sys.stderr)

    class _Handle:
        def __init__(self, prog: Progress | None, task: Any) -> None:
            self._prog, self._task = prog, task

        @property
        def active(self) -> bool:
            """True if the bar shows (enabled, and stderr is a terminal)."""
            return self._prog is not None

        def advance(self, n: float = 1.0) -> None:
            if self._prog is not None:
                self._prog.advance(self._task, n)

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
                return
            self._prog.update(self._task, completed=completed, **kw)

    if not enabled or not console.is_terminal:
        yield _Handle(None, None)
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

    ``on_stage(msg)`` prints the stage line on stderr, only when ``enabled`` and stderr is a terminal
    (like the bar: logs and errors stay clean); ``on_progress(stage, done, total)`` sets the bar:
    ``total`` > 0 gives a percentage and an ETA (a new stage starts them afresh), 0 an open-ended bar.
    """
    with progress(None, description, enabled) as bar:
        def on_stage(msg: str) -> None:
            if enabled and sys.stderr.isatty():
                click.echo(msg, err=True)

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
