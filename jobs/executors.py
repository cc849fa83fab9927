"""Where benchmark shards run: in-process, a local process pool, or a Ray cluster.

Only the sharding and the merge are ours; distribution is the pool's or Ray's job.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any

import torch

from segtk.core.errors import PluginError, SegtkError

Task = Callable[[Any], Any]


def _single_threaded(fn: Task, shard: Any) -> Any:

    torch.set_num_threads(1)  # one process per core; more threads only fight each other
    return fn(shard)


class InlineExecutor:
    """Runs shards one after another in this process (workers=1, tests, debugging)."""

    def map(self, fn: Task, shards: Iterable[Any]) -> Iterator[Any]:
        for shard in shards:
            yield fn(shard)


class LocalExecutor:
    """A local process pool; results are yielded as shards finish."""

    def __init__(self, workers: int | None = None) -> None:
        self.workers = workers or os.cpu_count() or 1

    def map(self, fn: Task, shards: Iterable[Any]) -> Iterator[Any]:
        shards = list(shards)
        if self.workers == 1 or len(shards) <= 1:
            yield from InlineExecutor().map(fn, shards)
            return
        with ProcessPoolExecutor(max_workers=self.workers) as pool:
            futures = [pool.submit(_single_threaded, fn, s) for s in shards]
            for future in as_completed(futures):
                yield future.result()


class RayExecutor:
    """Ray: `address=None` starts a local cluster, otherwise joins the given one."""

    def __init__(self, address: str | None = None, workers: int | None = None) -> None:
        try:
            import ray
        except ImportError as exc:
            raise PluginError("--executor ray needs Ray", hint="pip install 'ray==2.60.0'") from exc
        self.ray = ray
        if not ray.is_initialized():
            kwargs: dict[str, Any] = {"address": address, "include_dashboard": False,
                                      "log_to_driver": False}
            if address is None and workers:
                kwargs["num_cpus"] = workers
            ray.init(**kwargs)

    def map(self, fn: Task, shards: Iterable[Any]) -> Iterator[Any]:
        remote = self.ray.remote(num_cpus=1)(_single_threaded)
        pending = [remote.remote(fn, s) for s in shards]
        while pending:
            done, pending = self.ray.wait(pending, num_returns=1)
            yield self.ray.get(done[0])


def make_executor(name: str, workers: int | None = None, address: str | None = None):
    if name == "local":
        return LocalExecutor(workers)
    if name == "inline":
        return InlineExecutor()
    if name == "ray":
        return RayExecutor(address, workers)
    raise SegtkError(f"unknown executor {name!r}", hint="use local, inline or ray")
