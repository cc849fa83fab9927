"""Where benchmark shards run: in-process, a local process pool, or a Ray cluster.

Only the sharding and the merge are ours; distribution is the pool's or Ray's job.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any

import torch

from segtk.core import PluginError, SegtkError
from segtk.core._data import MAX_PIXELS_ENV

Task = Callable[[Any], Any]
PR_SET_PDEATHSIG = 1  # linux/prctl.h
PARENT_POLL_S = 0.5  # how often a worker checks that its parent lives, where prctl is missing


def _die_with_parent(owner: int) -> None:
    """Pool worker initializer: end when the process that started the pool (`owner`) ends.

    A SIGKILLed benchmark (an OOM kill) must not leave its workers computing on as orphans:
    Linux sends them SIGKILL when their parent dies (PR_SET_PDEATHSIG); elsewhere, or should
    the forking thread end first, a daemon thread sees the parent change (an orphan's parent is
    init). With forkserver the parent is the fork server, which ends with the owner. (The run's
    lock is closed in every forked child anyway: storage.runs.)
    """
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):
            pass
    parent = os.getppid()
    if parent != owner and not _alive(owner):  # the owner died before prctl took effect
        os._exit(1)
    threading.Thread(target=_watch_parent, args=(parent,), name="segtk-watch-parent",
                     daemon=True).start()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _watch_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(PARENT_POLL_S)
    os._exit(1)


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
        with ProcessPoolExecutor(max_workers=self.workers, initializer=_die_with_parent,
                                 initargs=(os.getpid(),)) as pool:
            futures = [pool.submit(_single_threaded, fn, s) for s in shards]
            for future in as_completed(futures):
                yield future.result()


class RayExecutor:
    """Ray: `address=None` starts a local cluster, otherwise joins the given one."""

    def __init__(self, address: str | None = None, workers: int | None = None) -> None:
        try:
            import ray
        except ImportError as exc:
            raise PluginError("--executor ray needs Ray",
                              hint="pip install -r extras/ray.txt (ray==2.60.0)") from exc
        self.ray = ray
        if not ray.is_initialized():
            kwargs: dict[str, Any] = {"address": address, "include_dashboard": False,
                                      "log_to_driver": False}
            if address is None and workers:
                kwargs["num_cpus"] = workers
            ray.init(**kwargs)

    def map(self, fn: Task, shards: Iterable[Any]) -> Iterator[Any]:
        remote = self.ray.remote(num_cpus=1)(_single_threaded)
        limit = os.environ.get(MAX_PIXELS_ENV)
        if limit:  # --max-pixels: Ray's workers, a joined cluster's too, lack our environment
            remote = remote.options(runtime_env={"env_vars": {MAX_PIXELS_ENV: limit}})
        pending = [remote.remote(fn, s) for s in shards]
        while pending:
            done, pending = self.ray.wait(pending, num_returns=1)
            yield self.ray.get(done[0])


def make_executor(name: str, workers: int | None = None, address: str | None = None,
                  device: str = "cpu"):
    """The executor `name`. On a GPU (`device` other than cpu) "local" runs the shards in this
    process, one after another: forked workers cannot use the CUDA context this process has
    made, and one GPU gains nothing from several processes."""
    if name == "local":
        return LocalExecutor(workers) if device == "cpu" else InlineExecutor()
    if name == "inline":
        return InlineExecutor()
    if name == "ray":
        return RayExecutor(address, workers)
    raise SegtkError(f"unknown executor {name!r}", hint="use local, inline or ray")
