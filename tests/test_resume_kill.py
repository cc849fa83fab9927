"""Kill `segtk attack` mid-run, resume it, and get the uninterrupted run's table."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

ARGS = ["attack", "--plugin", "dla", "--budget", "30", "--batch-size", "1"]


def segtk(*args: str, **kwargs) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "segtk.cli", *args], env=env, capture_output=True,
                          text=True, **kwargs)


def table_of(output: str) -> str:
    return output[output.index("dataset mIoU"):output.index("results:")]


@pytest.mark.slow
def test_killed_run_resumes_to_the_same_table(tmp_path) -> None:
    pytest.importorskip("segtk_demo")
    full = segtk(*ARGS, "--out", str(tmp_path / "full"), check=True)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "segtk.cli", *ARGS, "--out", str(tmp_path / "cut")],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    results = tmp_path / "cut" / "results.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if results.exists() and results.read_text().count("\n") >= 3:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done = results.read_text().count("\n")
    assert 3 <= done < 8, f"kill landed after {done} images"
    resumed = segtk(*ARGS, "--out", str(tmp_path / "cut"), "--resume", check=True)
    assert table_of(resumed.stdout) == table_of(full.stdout)
    assert results.read_text().count("\n") == 8
