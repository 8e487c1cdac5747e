"""The Ray worker pool: a local Ray cluster on this machine (default) or an existing cluster.

Local (``address`` None): ``ray.init(address="local")`` starts a new head node (even with
RAY_ADDRESS set) on loopback only: Ray's own rule for a laptop
(``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``, set before ray is imported) makes the node's address
127.0.0.1, so the GCS, the raylet, the object manager and the workers' gRPC servers listen
on 127.0.0.1 and nothing else (checked after start: :class:`RayPool` refuses a local node on
another address); no dashboard (``include_dashboard=False``), a small object store (jobs return
kilobytes), one CPU per worker, as many workers as ``workers`` (default: every core). It starts in
a few seconds (measured in docs/study.md) and :meth:`RayPool.close` shuts it down.

Cluster (``address``: ``auto``, ``ray://host:10001`` or ``host:6379``): connects to it; each job
asks for one CPU; ``workers`` (default: the cluster's CPUs) caps the jobs in flight. Every worker
needs this package installed at the same version (the job refuses another code version).

Each call is a Ray task (``num_cpus=1``; a task whose worker dies is retried once, then reported
as :class:`~.pools.WorkerLost`). At most ``2 x workers`` tasks are in flight, so a stop cancels
little and the ETA follows the work.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from robot_grinding_sim.core.errors import InputError
from robot_grinding_sim.core.study.pools import WorkerLost

#: object store of a local cluster, bytes (Ray's minimum is 75 MB; a job returns ~0.5 MB)
LOCAL_OBJECT_STORE = 128 * 1024 * 1024
LOOPBACK = ("127.0.0.1", "::1", "localhost")


def import_ray() -> Any:
    """``import ray``, with the one-line error of a missing extra."""
    try:
        import ray
    except ImportError:
        raise InputError("Ray is not installed: pip install 'robot_grinding_sim[study]' (or pip install ray), "
                         "or run without Ray (--pool process)") from None
    return ray


class RayPool:
    """Ray tasks as a pool (see the module docstring).

    Args:
        address: a running cluster's address; None: start a local one on loopback.
        workers: local: the cluster's CPUs (default: this machine's cores); cluster: the most jobs in
            flight (default: the cluster's CPUs).
    """

    def __init__(self, address: str | None = None, workers: int | None = None) -> None:
        local = address is None
        if local:  # read when ray is imported; if it was imported already, the check after start refuses
            os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
        ray = import_ray()
        self._ray = ray
        self._pending: dict[Any, int] = {}
        self._started = False
        if ray.is_initialized():
            raise InputError("Ray is already initialised in this process: one study pool at a time")
        if local:
            n = int(workers or os.cpu_count() or 1)
            ray.init(address="local", num_cpus=n, include_dashboard=False, logging_level=logging.ERROR,
                     log_to_driver=False, object_store_memory=LOCAL_OBJECT_STORE, configure_logging=True)
            self._started = True
            ip = ray.util.get_node_ip_address()
            if ip not in LOOPBACK:
                self.close()
                raise InputError(f"the local Ray node came up on {ip}, not on loopback (was ray imported before "
                                 "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 was set?): refusing to listen off this machine")
            self.workers = n
        else:
            try:
                ray.init(address=address, logging_level=logging.WARNING, log_to_driver=False)
            except (ConnectionError, RuntimeError, ValueError) as exc:
                raise InputError(f"--address {address}: cannot connect to the Ray cluster ({exc})") from None
            self._started = True
            cpus = int(ray.cluster_resources().get("CPU", 1))
            self.workers = int(workers or cpus)

    def share(self, obj: Any) -> Any:
        return self._ray.put(obj)

    def map_unordered(self, fn: Callable[..., Any], calls: Sequence[tuple[Any, ...]]
                      ) -> Iterator[tuple[int, Any]]:
        ray = self._ray
        task = ray.remote(fn).options(num_cpus=1, max_retries=1)
        todo = list(enumerate(calls))[::-1]
        self._pending = {}
        while todo or self._pending:
            while todo and len(self._pending) < 2 * self.workers:
                i, args = todo.pop()
                self._pending[task.remote(*args)] = i
            done, _ = ray.wait(list(self._pending), num_returns=1)
            for ref in done:
                i = self._pending.pop(ref)
                try:
                    value = ray.get(ref)
                except ray.exceptions.RayError as exc:
                    value = WorkerLost(f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
                yield i, value

    def close(self) -> None:
        """Cancel the tasks in flight and shut Ray down (a local cluster's processes end)."""
        ray = self._ray
        for ref in list(self._pending):
            try:
                ray.cancel(ref, force=True)
            except (ray.exceptions.RayError, ValueError, TypeError):
                pass  # already ended
        self._pending = {}
        if self._started:
            ray.shutdown()
            self._started = False
