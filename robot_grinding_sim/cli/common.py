"""Helpers shared by the ``grinding`` subcommands: JSON output, progress bars, errors."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Iterator
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

        def advance(self, n: float = 1.0) -> None:
            if self._prog is not None:
                self._prog.advance(self._task, n)

        def update(self, completed: float, total: float | None = None, description: str | None = None) -> None:
            """Set the work done; ``total`` (> 0) once known turns an open-ended bar into one with
            a percentage and an ETA, and a new total (the next stage) starts the ETA afresh."""
            if self._prog is None:
                return
            kw: dict[str, Any] = {}
            if description is not None:
                kw["description"] = description
            current = next(t.total for t in self._prog.tasks if t.id == self._task)
            if total is not None and total > 0 and total != current:
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


def track(items: Iterable[T], description: str, total: int | None = None, enabled: bool = True) -> Iterator[T]:
    """Iterate over ``items`` with a progress bar (see :func:`progress`)."""
    if total is None and hasattr(items, "__len__"):
        total = len(items)  # type: ignore[arg-type]
    with progress(total, description, enabled) as bar:
        for item in items:
            yield item
            bar.advance(1)
