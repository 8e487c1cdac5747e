"""Worker pools: run calls of one function on workers and hand back each result as it arrives.

Every pool has the same three methods, so the study's driver (and later the passes of one job run
in parallel) does not know where the work runs:

- ``share(obj)``: a handle to pass as an argument to many calls (Ray puts it in its object store
  once; the local pools pass the object itself);
- ``map_unordered(fn, calls)``: ``fn(*args)`` for each ``args`` of ``calls``; yields ``(i, value)``
  as each call ends (``i`` its position in ``calls``), ``value`` the call's return value or, if
  the call could not run (a worker died), the :class:`WorkerLost` exception;
- ``close()``: stop: calls not yet ended are cancelled, the workers end.

``fn`` must be a module-level function (it is pickled by reference) and should catch its own
errors (:func:`~.worker.run_study_job` does). :class:`SerialPool` runs in this process (tests,
debugging); :class:`ProcessPool` on local processes (``concurrent.futures``, the baseline Ray's
overhead is measured against); :class:`~.ray_pool.RayPool` on Ray.
"""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing
import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol


class WorkerLost(RuntimeError):
    """A call that could not run to its end because its worker died (or the pool broke)."""


class Pool(Protocol):
    """What the study's driver needs of a pool (see the module docstring)."""

    workers: int

    def share(self, obj: Any) -> Any: ...

    def map_unordered(self, fn: Callable[..., Any], calls: Sequence[tuple[Any, ...]]
                      ) -> Iterator[tuple[int, Any]]: ...

    def close(self) -> None: ...


class SerialPool:
    """Every call in this process, one after the other, in order."""

    workers = 1

    def share(self, obj: Any) -> Any:
        return obj

    def map_unordered(self, fn: Callable[..., Any], calls: Sequence[tuple[Any, ...]]
                      ) -> Iterator[tuple[int, Any]]:
        for i, args in enumerate(calls):
            yield i, fn(*args)

    def close(self) -> None:
        pass


class ProcessPool:
    """Calls on ``workers`` local processes (spawned: fresh interpreters, as Ray's workers are).

    Args:
        workers: processes (default: the cores of this machine).
    """

    def __init__(self, workers: int | None = None) -> None:
        self.workers = int(workers or os.cpu_count() or 1)
        self._ex = cf.ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("spawn"))
        self._pending: set[cf.Future[Any]] = set()

    def share(self, obj: Any) -> Any:
        return obj

    def map_unordered(self, fn: Callable[..., Any], calls: Sequence[tuple[Any, ...]]
                      ) -> Iterator[tuple[int, Any]]:
        index = {self._ex.submit(fn, *args): i for i, args in enumerate(calls)}
        self._pending = set(index)
        for fut in cf.as_completed(index):
            self._pending.discard(fut)
            try:
                yield index[fut], fut.result()
            except cf.process.BrokenProcessPool as exc:
                yield index[fut], WorkerLost(f"worker process died: {exc}")

    def close(self) -> None:
        for fut in self._pending:
            fut.cancel()
        self._ex.shutdown(wait=True, cancel_futures=True)
