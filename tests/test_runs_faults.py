"""Runs under faults, through the CLI: OS errors are one line, run.json says what ran, --table-only
reads a locked run, and runs killed or corrupted at random points resume to the same records."""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import subprocess
import sys
import tempfile
import textwrap
import types
from pathlib import Path
from unittest import mock

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from segtk.benchmarks import attacks as bench_attacks
from segtk.benchmarks import edits as bench_edits
from segtk.cli import cli
from segtk.core import SegmenterPlugin, SegtkError, hookimpl, registry
from segtk.core._plugins import get_plugin_manager, reset_plugin_manager
from segtk.jobs import attack as attack_job
from segtk.storage import layout, runs
from segtk.storage.runs import RunDir, read_results
from segtk.testing import TinySegmenter

DEMO = ["attack", "--plugin", "dla", "--limit", "1", "--budget", "2"]  # the bundled demo model


def one_line_error(result, *fragments: str) -> None:
    """Exit 1, 'Error: ...' and a hint, no traceback."""
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, SystemExit), result.exc_info
    assert "Error:" in result.output and "hint:" in result.output
    assert "Traceback" not in result.output
    for fragment in fragments:
        assert fragment in result.output


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args))


# --- OS errors -------------------------------------------------------------------------------

def test_out_under_a_regular_file(tmp_path) -> None:
    pytest.importorskip("segtk_demo")
    (tmp_path / "file").write_text("not a folder")
    one_line_error(invoke(*DEMO, "--out", str(tmp_path / "file" / "run")),
                   "cannot create the run folder", "not a folder")


@pytest.mark.parametrize("err,hint", [
    (PermissionError(errno.EACCES, "Permission denied"), "permission"),
    (OSError(errno.EROFS, "Read-only file system"), "read-only"),
])
def test_unwritable_out(tmp_path, err, hint) -> None:
    """As root chmod can't make a folder unwritable, so mkdir raises what it would."""
    pytest.importorskip("segtk_demo")
    with mock.patch.object(Path, "mkdir", side_effect=err):
        result = invoke(*DEMO, "--out", str(tmp_path / "run"))
    one_line_error(result, "cannot create the run folder", err.strerror, hint)


def test_disk_full_while_appending_exits_1_and_counts_only_what_is_written(tmp_path) -> None:
    pytest.importorskip("segtk_demo")
    real = os.write

    def write(fd, data):
        if os.readlink(f"/proc/self/fd/{fd}").endswith(layout.RESULTS):
            real(fd, bytes(data)[:9])  # a short write, then the disk is full
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(fd, data)

    with mock.patch.object(os, "write", write):
        result = invoke(*DEMO, "--out", str(tmp_path / "run"))
    one_line_error(result, "No space left on device", "disk is full")
    assert "dataset mIoU" not in result.output  # no table of records the file does not hold
    assert (tmp_path / "run" / layout.RESULTS).read_bytes() == b""


def test_any_other_os_error_is_one_line(tmp_path) -> None:
    """An OSError from anywhere in a command (here writing an image) is caught once, in the CLI."""
    pytest.importorskip("segtk_demo")
    full = OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "run" / "images"))
    with mock.patch.object(attack_job, "write_png", side_effect=full):
        result = invoke(*DEMO, "--out", str(tmp_path / "run"))
    one_line_error(result, "No space left on device", str(tmp_path / "run" / "images"), "--resume")


def test_debug_still_shows_the_traceback(tmp_path) -> None:
    pytest.importorskip("segtk_demo")
    (tmp_path / "file").write_text("")
    result = invoke("--debug", *DEMO, "--out", str(tmp_path / "file" / "run"))
    assert result.exit_code == 1 and result.exception is not None
    assert not isinstance(result.exception, SystemExit)


# --- the lock --------------------------------------------------------------------------------

@contextlib.contextmanager
def held_by_another_process(path: Path):
    """A second process holding the lock on `path` (as a run does) until the block ends;
    yields its pid."""
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys
        from pathlib import Path
        from segtk.storage.runs import RunLock, make_run_dir
        make_run_dir(Path({str(path)!r}))
        lock = RunLock(Path({str(path)!r}))
        print("locked", flush=True)
        sys.stdin.read()
    """)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None
    try:
        assert holder.stdout.readline().strip() == "locked"
        yield holder.pid
    finally:
        holder.communicate("", timeout=60)


def test_another_process_is_refused_until_it_ends(tmp_path) -> None:
    with held_by_another_process(tmp_path / "r") as pid:
        with pytest.raises(SegtkError, match=f"r is in use by process {pid}") as exc:
            RunDir(tmp_path / "r", {"budget": 8}, resume=True, kind="attack")
        assert "--out" in str(exc.value.hint)
        reader = RunDir(tmp_path / "r", {"budget": 8}, resume=True, read_only=True, kind="attack")
        assert reader.done() == {}  # a read-only look (e.g. --table-only) takes no lock
    with RunDir(tmp_path / "r", {"budget": 8}, resume=True, kind="attack") as run:  # freed when it exits
        run.append({"image": "img0"})


def test_one_process_may_reopen_its_run_and_then_frees_the_lock(tmp_path, locked) -> None:
    first = RunDir(tmp_path / "r", {"budget": 8}, resume=False, kind="attack")
    second = RunDir(tmp_path / "r", {"budget": 8}, resume=True, kind="attack")  # shares this process's lock
    first.close()
    assert locked(tmp_path / "r")  # still held for `second`
    assert (tmp_path / "r" / layout.LOCK).read_text().strip() == str(os.getpid())
    del second  # dropped without close(): the lock goes with it
    assert not locked(tmp_path / "r")


def test_second_process_on_one_out_is_one_line(tmp_path) -> None:
    pytest.importorskip("segtk_demo")
    with held_by_another_process(tmp_path / "run") as pid:
        one_line_error(invoke(*DEMO, "--out", str(tmp_path / "run")), f"is in use by process {pid}")


# --- run.json and table.json -----------------------------------------------------------------

def test_run_json_records_limit_commit_and_weights(tmp_path, monkeypatch) -> None:
    pytest.importorskip("segtk_demo")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    result = invoke(*DEMO, "--out", str(tmp_path / "run"))
    assert result.exit_code == 0, result.output
    record = json.loads((tmp_path / "run" / layout.RUN).read_text())
    assert record["config"]["limit"] == 1
    assert "git_commit" in record and record["weights"] == {}  # the demo model has no file
    more = invoke(*DEMO[:3], "--limit", "2", *DEMO[5:], "--out", str(tmp_path / "run"), "--resume")
    assert more.exit_code == 0, more.output  # a larger --limit continues the run
    assert json.loads((tmp_path / "run" / layout.RUN).read_text())["config"]["limit"] == 2
    assert len(read_results(tmp_path / "run" / layout.RESULTS)) == 2


def strict(path: Path):
    def refuse(name: str) -> None:
        raise AssertionError(f"{path} holds {name}")

    return json.loads(path.read_text(), parse_constant=refuse)


def test_bench_tables_are_strict_json(tmp_path) -> None:
    rows = [{"model": "m", "attack": "dla", "budget": 10, "miou_mean": 1.0, "miou_std": math.nan,
             "psnr": math.inf, "ssim": 1.0}]
    bench_attacks.write_outputs(bench_attacks.BenchResult(rows, {"m": {"dla": [math.nan, 1.0]}}),
                                tmp_path)
    assert strict(tmp_path / "table.json")[0]["psnr"] is None
    assert strict(tmp_path / "curves.json") == {"m": {"dla": [None, 1.0]}}
    table = {"models": ["m"], "subsets": ["original", "color"],
             "miou": {"m": {"original": 50.0, "color": math.nan}},
             "images": {"m": {"original": 1, "color": 0}}, "groups": []}
    bench_edits.write_outputs(table, tmp_path)
    assert strict(tmp_path / "table.json")["miou"]["m"]["color"] is None


# --- the tiny model, for the fault-injection runs --------------------------------------------

@pytest.fixture
def tiny():
    reset_plugin_manager()
    plugin = types.SimpleNamespace(register_models=hookimpl(lambda register: register(
        SegmenterPlugin("tiny", lambda arg: TinySegmenter(), "tiny", "--model tiny"))))
    get_plugin_manager().register(plugin, name="tiny-faults-test")
    registry.reset()
    yield "tiny"
    reset_plugin_manager()
    registry.reset()


@pytest.fixture
def bench_args(tiny, folder_dataset) -> list[str]:
    return ["bench", "attacks", "--model", "tiny", "--data", f"folder:{folder_dataset}", "--attacks", "random",
            "--budgets", "3", "--repeats", "1", "--executor", "inline"]


def test_table_only_reads_a_run_another_process_holds(tmp_path, bench_args) -> None:
    out = str(tmp_path / "b")
    assert invoke(*bench_args, "--out", out).exit_code == 0
    run_json = (tmp_path / "b" / layout.RUN).read_bytes()
    with held_by_another_process(tmp_path / "b"):
        shown = invoke(*bench_args, "--out", out, "--table-only")
        assert shown.exit_code == 0, shown.output
        assert "random" in shown.output
        assert (tmp_path / "b" / layout.RUN).read_bytes() == run_json  # --table-only wrote nothing
        resumed = invoke(*bench_args, "--out", out, "--resume")
        one_line_error(resumed, "is in use by process")


# --- fault injection -------------------------------------------------------------------------

class Interrupt(KeyboardInterrupt):
    """A stand-in for Ctrl-C or a kill: nothing in segtk may catch it."""


@pytest.fixture
def attack_case(tiny, folder_dataset, tmp_path):
    """The attack's arguments and an uninterrupted run's records and images (made once: every
    hypothesis example shares them)."""
    args = ["attack", "--plugin", "dla", "--model", "tiny", "--data", f"folder:{folder_dataset}",
            "--budget", "5", "--batch-size", "2"]
    out = tmp_path / "full"
    assert invoke(*args, "--out", str(out)).exit_code == 0
    return args, read_results(out / layout.RESULTS), images_of(out)


def images_of(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((out / "images").glob("*.png"))}


FAULTS = st.lists(st.tuples(
    st.sampled_from(["before-append", "mid-append", "while-saving"]),
    st.integers(0, 5),  # at the k-th event of that kind (past the last: the run just finishes)
    st.integers(0, 400),  # bytes torn off the last line afterwards (0: none; capped to that line)
), min_size=1, max_size=3)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(faults=FAULTS, seed=st.integers(0, 2**16))
def test_killed_and_corrupted_runs_resume_to_the_same_records(attack_case, faults, seed) -> None:
    args, want, want_images = attack_case
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run"
        for where, k, tear in faults:
            resume = ["--resume"] if (out / layout.RUN).exists() else []  # none: no run to resume
            with inject(where, k, seed):
                result = invoke(*args, "--out", str(out), *resume)
            assert result.exit_code in (0, 1), result.output
            assert "Traceback" not in result.output
            results = out / layout.RESULTS
            if tear and results.exists():
                raw = results.read_bytes()
                last = raw.rstrip(b"\n").rfind(b"\n") + 1  # where the last line starts
                results.write_bytes(raw[:max(last, len(raw) - tear)])
            del result  # its traceback holds the run (and its lock) until dropped
        final = invoke(*args, "--out", str(out), "--resume")
        assert final.exit_code == 0, final.output
        lines = (out / layout.RESULTS).read_text().splitlines()
        assert len(lines) == len(want)  # each image once, no torn or duplicate lines
        assert read_results(out / layout.RESULTS) == want
        assert images_of(out) == want_images


def inject(where: str, k: int, seed: int):
    """Raise Interrupt (or a full disk, while saving) at the k-th event `where`."""
    count = {"n": 0}

    def due() -> bool:
        count["n"] += 1
        return count["n"] == k + 1

    if where == "before-append":
        real_append = runs.append_line

        def append_line(path, record):
            if due():
                raise Interrupt
            real_append(path, record)

        return mock.patch.object(runs, "append_line", append_line)
    if where == "mid-append":
        real_write = os.write

        def write(fd, data):
            if os.readlink(f"/proc/self/fd/{fd}").endswith(layout.RESULTS) and due():
                real_write(fd, bytes(data)[:1 + seed % max(len(data) - 1, 1)])
                raise Interrupt  # killed between a short write and the rest
            return real_write(fd, data)

        return mock.patch.object(os, "write", write)
    real_png = attack_job.write_png

    def write_png(path, *a, **kw):
        if due():
            raise (Interrupt() if seed % 2 else OSError(errno.ENOSPC, "No space left on device"))
        real_png(path, *a, **kw)

    return mock.patch.object(attack_job, "write_png", write_png)
