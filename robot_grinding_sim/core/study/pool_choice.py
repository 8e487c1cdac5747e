"""Which worker pool runs the work: the study's ``--pool`` and one job's ``--workers`` / ``--address``
(the pools themselves: :mod:`~.pools`, :mod:`~.ray_pool`)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from robot_grinding_sim.core.errors import InputError
from robot_grinding_sim.core.study.pools import ProcessPool, SerialPool


def make_pool(kind: str, workers: int | None, address: str | None) -> Any:
    """The pool of ``kind`` (ray: local or on the cluster at ``address``; process; serial)."""
    if kind == "ray":
        from robot_grinding_sim.core.study.ray_pool import RayPool

        return RayPool(address, workers)
    if kind == "process":
        return ProcessPool(workers)
    return SerialPool()


@contextmanager
def job_pool(workers: int | None, address: str | None) -> Iterator[Any]:
    """The pool one job spreads its optimisation's passes over (``--workers``, ``--address`` of
    ``grinding plan`` and ``grinding simulate``): None (this process) for at most one worker and no
    address; local processes for ``workers`` > 1; the Ray cluster at ``address`` (``workers``: the
    most passes in flight). Closed on leaving."""
    if workers is not None and workers < 1:
        raise InputError(f"--workers must be >= 1, got {workers}")
    if address is None and (workers or 1) <= 1:
        yield None
        return
    pool = make_pool("ray" if address is not None else "process", workers, address)
    try:
        yield pool
    finally:
        pool.close()
