"""A killed run leaves no stale lock and no orphans: forked children do not keep OUT/.lock, and
pool workers end with the benchmark process (a SIGKILL or OOM kill of `segtk bench attacks`)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from segtk.storage import layout
from segtk.storage.runs import RunLock, make_run_dir

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc (Linux)")


def proc_stat(pid: int | str) -> list[str] | None:
    """/proc/PID/stat fields after the command name (state, ppid, pgrp, ...), None if gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2:].split()


def living(pid: int | str) -> bool:
    fields = proc_stat(pid)
    return fields is not None and fields[0] not in ("Z", "X")  # a zombie has ended


def processes(where) -> list[int]:
    """Living pids whose stat fields satisfy `where`."""
    found = []
    for entry in Path("/proc").iterdir():
        fields = proc_stat(entry.name) if entry.name.isdigit() else None
        if fields is not None and fields[0] not in ("Z", "X") and where(fields):
            found.append(int(entry.name))
    return found


def cpu_seconds(pid: int) -> float:
    fields = proc_stat(pid)
    return 0.0 if fields is None else (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_a_forked_child_does_not_keep_the_run_locked(tmp_path, locked) -> None:
    make_run_dir(tmp_path / "run")
    lock = RunLock(tmp_path / "run")
    read, write = os.pipe()
    ready_read, ready_write = os.pipe()
    child = os.fork()
    if child == 0:  # a worker that outlives its parent's hold on the run
        os.close(write)
        os.write(ready_write, b"r")  # fork has returned here: the fork hooks have run
        os.read(read, 1)
        os._exit(0)
    os.close(read)
    try:
        assert os.read(ready_read, 1) == b"r"
        lock.release()  # what the parent's death does
        assert living(child)
        assert not locked(tmp_path / "run"), "the forked child still holds the run's lock"
    finally:
        os.close(write)
        os.waitpid(child, 0)
        os.close(ready_read)
        os.close(ready_write)


BENCH = ["bench", "attacks", "--attacks", "random", "--budgets", "150", "--repeats", "1",
         "--limit", "2", "--chunk", "1", "--workers", "2"]


@pytest.mark.slow
def test_sigkill_of_a_bench_leaves_no_workers_and_no_lock(tmp_path, locked) -> None:
    """`bench edits` runs its shards through the same LocalExecutor, so this covers it too."""
    pytest.importorskip("segtk_demo")
    out = tmp_path / "out"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "COLUMNS": "200"}
    command = [sys.executable, "-m", "segtk.cli", *BENCH, "--out", str(out)]
    main = subprocess.Popen(command, env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    group = main.pid  # its own session: the workers share this process group
    try:
        deadline = time.monotonic() + 120
        busy: list[int] = []
        while time.monotonic() < deadline and main.poll() is None and len(busy) < 2:
            workers = processes(lambda f: int(f[1]) == main.pid)
            busy = [w for w in workers if cpu_seconds(w) >= 0.5]
            time.sleep(0.05)
        assert len(busy) == 2, "the pool's two workers never got busy"
        main.kill()
        main.wait()
        results = out / layout.RESULTS
        assert not results.exists() or results.read_text().count("\n") < 2, "the bench had finished"
        deadline = time.monotonic() + 10
        while processes(lambda f: int(f[2]) == group) and time.monotonic() < deadline:
            time.sleep(0.05)
        left = processes(lambda f: int(f[2]) == group)
        assert not left, f"processes {left} of the killed bench are still running"
        assert not locked(out)
        assert (out / layout.LOCK).read_text().strip() == str(main.pid)  # the dead owner's pid
    finally:
        for pid in processes(lambda f: int(f[2]) == group):
            os.kill(pid, 9)
    resumed = subprocess.run([*command, "--resume"], env=env, capture_output=True, text=True,
                             timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert (out / layout.RESULTS).read_text().count("\n") == 2
