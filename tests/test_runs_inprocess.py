"""Run storage in one process, to the word: the lock's refusal and the pid it names, the lock
file's mode, what a release after a fork leaves, temp-file cleanup, run.json's command, versions,
weights and summary, and each OS-error wrapper of segtk.storage.runs.

"Another process" holding a lock is played by a second open file description of the lock file
in this process (flock locks belong to the open file description, so it conflicts as another
process's would). No subprocess: mutation testing (bench/mutation.sh, group runs) sees every
one of these.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import stat
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from segtk.core import SegtkError
from segtk.storage import layout, runs
from segtk.storage.provenance import versions
from segtk.storage.runs import RunDir, RunLock, append_line, make_run_dir, remove_temp_files

IN_USE_HINT = "wait for that run to finish (or stop it), or choose another --out"
FULL = "the disk is full: free space (or choose an --out on another disk), then rerun with --resume"
DENIED = "permission denied: choose an --out you can write to, or fix the folder's permissions"
READ_ONLY = "that file system is read-only: choose an --out on a writable disk"


def refusal(act: Callable[[], object]) -> tuple[str, str | None]:
    with pytest.raises(SegtkError) as err:
        act()
    return err.value.message, err.value.hint


def open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def touch(path: Path, text: str = "x") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@contextmanager
def held_elsewhere(folder: Path, content: bytes) -> Iterator[None]:
    """DIR/.lock flocked through an open file description that is not RunLock's, holding
    `content` where a run writes its pid: to RunLock, another process's lock."""
    make_run_dir(folder)
    fd = os.open(folder / layout.LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.ftruncate(fd, 0)
        os.pwrite(fd, content, 0)
        yield
    finally:
        os.close(fd)


# --- the lock -------------------------------------------------------------------------------

@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="counts fds in /proc (Linux)")
def test_a_run_held_elsewhere_is_refused_in_one_line_naming_its_pid(tmp_path, locked) -> None:
    out = tmp_path / "r"
    holder = b"4242424242424242\n"  # longer than any pid: the next owner must truncate it
    with held_elsewhere(out, holder):
        before, held = open_fds(), dict(runs._HELD)
        expected = (f"{out} is in use by process 4242424242424242", IN_USE_HINT)
        assert refusal(lambda: RunLock(out)) == expected
        assert refusal(lambda: RunDir(out, {"budget": 8}, resume=False, kind="attack")) == expected
        assert open_fds() == before  # the refused lock's fd is closed
        assert runs._HELD == held  # nor counts a holder
        assert (out / layout.LOCK).read_bytes() == holder  # a refusal does not touch the holder's pid
        assert not (out / layout.RUN).exists()  # nor writes anything
    lock = RunLock(out)  # freed: taken, and the pid in the file is ours alone
    try:
        assert locked(out)
        assert (out / layout.LOCK).read_bytes() == f"{os.getpid()}\n".encode()
    finally:
        lock.release()
    assert not locked(out)


def test_a_pid_that_cannot_be_written_leaves_no_stale_pid(tmp_path, monkeypatch, locked) -> None:
    """On a full disk the lock is still taken, and the file no longer names the previous run's
    pid (a refused run would name a process that is not the holder): it is empty, '(unknown)'."""
    out = tmp_path / "r"
    touch(out / layout.LOCK, "4242\n")  # left by a finished run

    def pwrite(fd: int, data: bytes, offset: int) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "pwrite", pwrite)
    lock = RunLock(out)
    try:
        assert locked(out) and (out / layout.LOCK).read_bytes() == b""
    finally:
        lock.release()


@pytest.mark.parametrize(("content", "shown"), [
    (b"", "(unknown)"),  # a holder that died before writing its pid
    (b" \n", "(unknown)"),
    (b"\xff\xfe\x00", "(unknown)"),  # not text
    (b"  77 \n", "77"),
    (b"8" * 40 + b"\n", "8" * 32),  # a foreign file: at most 32 bytes of it in the message
])
def test_the_refusal_names_what_the_lock_file_holds_or_unknown(tmp_path, content, shown) -> None:
    out = tmp_path / "r"
    with held_elsewhere(out, content):
        assert refusal(lambda: RunLock(out)) == (f"{out} is in use by process {shown}", IN_USE_HINT)


def test_an_unreadable_lock_file_names_no_pid(tmp_path, monkeypatch) -> None:
    out = tmp_path / "r"

    def pread(fd: int, n: int, offset: int) -> bytes:
        raise OSError(errno.EIO, "Input/output error")

    with held_elsewhere(out, b"4242\n"):
        monkeypatch.setattr(os, "pread", pread)
        assert refusal(lambda: RunLock(out)) == (f"{out} is in use by process (unknown)", IN_USE_HINT)


def test_the_lock_file_is_readable_by_all_writable_by_its_owner(tmp_path) -> None:
    make_run_dir(tmp_path / "r")
    old = os.umask(0o022)
    try:
        lock = RunLock(tmp_path / "r")
    finally:
        os.umask(old)
    lock.release()
    assert stat.S_IMODE((tmp_path / "r" / layout.LOCK).stat().st_mode) == 0o644


@pytest.mark.parametrize(("error", "hint"), [
    (OSError(errno.EACCES, "Permission denied"), DENIED),
    (OSError(errno.EROFS, "Read-only file system"), READ_ONLY),
])
def test_a_lock_file_that_cannot_be_created_is_one_line(tmp_path, monkeypatch, error, hint) -> None:
    """As root no folder is unwritable, so os.open raises what it would."""
    make_run_dir(tmp_path / "r")
    real_open = os.open

    def fake_open(path, flags, mode=0o777, **kw):
        if str(path).endswith(layout.LOCK):
            raise error
        return real_open(path, flags, mode, **kw)

    monkeypatch.setattr(os, "open", fake_open)
    assert refusal(lambda: RunLock(tmp_path / "r")) == (
        f"cannot create {tmp_path / 'r' / layout.LOCK}: {error.strerror}", hint)


def test_a_lock_in_a_missing_folder_says_the_folder_is_missing(tmp_path) -> None:
    assert refusal(lambda: RunLock(tmp_path / "gone")) == (
        f"cannot create {tmp_path / 'gone' / layout.LOCK}: No such file or directory",
        "check the path: a folder in it does not exist")


def test_closing_twice_and_closing_a_reader_are_harmless(tmp_path, locked) -> None:
    out = tmp_path / "r"
    run = RunDir(out, {"budget": 8}, resume=False, kind="attack")
    run.close()
    run.close()
    assert not locked(out)
    with RunDir(out, {"budget": 8}, resume=True, read_only=True, kind="attack") as reader:
        assert reader.done() == {}
    with RunDir(out, {"budget": 8}, resume=True, kind="attack"):  # free for the next writer
        assert locked(out)


def test_a_lock_released_after_a_fork_forgot_it_is_a_no_op(tmp_path, monkeypatch, locked) -> None:
    """In a forked child the at-fork hook has closed the inherited lock fds; releasing the lock
    object the child inherited must then do nothing (no KeyError, no close of a reused fd).
    Played in this process on a private lock table."""
    monkeypatch.setattr(runs, "_HELD", {})
    make_run_dir(tmp_path / "r")
    lock = RunLock(tmp_path / "r")
    runs._forget_inherited_locks()
    assert runs._HELD == {} and not locked(tmp_path / "r")
    lock.release()
    assert lock.key is None


# --- appends, run folders and run.json ------------------------------------------------------

def test_an_append_written_one_byte_at_a_time_is_whole(tmp_path, monkeypatch) -> None:
    path = tmp_path / layout.RESULTS
    real_write = os.write
    calls = []

    def one_byte(fd: int, data) -> int:
        calls.append(1)
        return real_write(fd, bytes(data)[:1])

    monkeypatch.setattr(os, "write", one_byte)
    append_line(path, {"image": "a"})
    assert path.read_bytes() == b'{"image":"a"}\n' and len(calls) == 14


def test_a_run_folder_gets_its_missing_parents(tmp_path) -> None:
    make_run_dir(tmp_path / "a" / "b" / "c")
    make_run_dir(tmp_path / "a" / "b" / "c")  # and may exist already
    assert (tmp_path / "a" / "b" / "c").is_dir()


def test_a_run_folder_under_a_file_is_one_line(tmp_path) -> None:
    (tmp_path / "file").write_text("x")
    assert refusal(lambda: make_run_dir(tmp_path / "file" / "run")) == (
        f"cannot create the run folder {tmp_path / 'file' / 'run'}: Not a directory",
        "part of that path is a file, not a folder: choose another --out (or move the file)")


def test_a_run_json_that_cannot_be_read_is_one_line(tmp_path) -> None:
    (tmp_path / "r" / layout.RUN).mkdir(parents=True)
    assert refusal(lambda: RunDir(tmp_path / "r", {}, resume=True, kind="attack")) == (
        f"cannot read {tmp_path / 'r' / layout.RUN}: Is a directory",
        "that path is a folder where a file is needed: choose another path")


@pytest.mark.parametrize(("error", "hint"), [
    (OSError(errno.ENOSPC, "No space left on device"), FULL),
    (OSError(errno.EROFS, "Read-only file system"), READ_ONLY),
])
def test_a_run_json_that_cannot_be_written_is_one_line(tmp_path, monkeypatch, error, hint) -> None:
    def fail(path, record) -> None:
        raise error

    monkeypatch.setattr(runs, "atomic_write_json", fail)
    assert refusal(lambda: RunDir(tmp_path / "r", {}, resume=False, kind="attack")) == (
        f"cannot write {tmp_path / 'r' / layout.RUN}: {error.strerror}", hint)


def test_run_json_says_the_command_versions_every_models_weights_and_the_summary(
        tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(sys, "argv", ["segtk", "bench", "attacks", "--out", "r"])
    first, second = tmp_path / "a.pt", tmp_path / "b.pt"
    first.write_bytes(b"first")
    second.write_bytes(b"second")
    config = {"model": f"torchscript:{first}", "models": [f"torchscript:{second}", 3]}
    with RunDir(tmp_path / "r", config, resume=False, kind="bench-attacks") as run:
        record = json.loads((run.path / layout.RUN).read_text())
        assert record == {
            "command": "segtk bench attacks --out r", "kind": "bench-attacks",
            "versions": versions(), "git_commit": record["git_commit"],
            "weights": {str(first): hashlib.sha256(b"first").hexdigest(),
                        str(second): hashlib.sha256(b"second").hexdigest()},
            "config": config}
        run.write_run_file({"images": 2})
        assert json.loads((run.path / layout.RUN).read_text()) == {**record, "summary": {"images": 2}}


def test_a_resume_with_new_or_changed_settings_names_each(tmp_path) -> None:
    out = tmp_path / "r"
    with RunDir(out, {"budget": 8}, resume=False, kind="attack") as run:
        run.append({"image": "a"})
    assert refusal(lambda: RunDir(out, {"budget": 9, "limit": 2}, resume=True, kind="attack"))[0] == (
        f"{out} holds a run with other settings (budget, limit): "
        "budget 8 in run.json, 9 now; limit unset in run.json, 2 now")
    assert refusal(lambda: RunDir(out, {"budget": 8, "seed": 1}, resume=True, kind="attack"))[0] == (
        f"{out} holds a run with other settings (seed): seed unset in run.json, 1 now")


def test_a_setting_added_later_is_its_old_value_where_it_is_missing(tmp_path) -> None:
    """RunDir.ABSENT: a run.json from before `device` was recorded is a cpu run, and so is a
    config that does not say (a caller that never passes one), on either side of a resume."""
    assert RunDir.ABSENT == {"device": "cpu"}
    for old, new in (({"budget": 8}, {"budget": 8, "device": "cpu"}),
                     ({"budget": 8, "device": "cpu"}, {"budget": 8})):
        out = tmp_path / f"r{len(old)}"
        with RunDir(out, old, resume=False, kind="attack") as run:
            run.append({"image": "a"})
        with RunDir(out, new, resume=True, kind="attack") as run:
            assert list(run.done()) == ["a"]
    out = tmp_path / "r1"  # run.json now says cpu: another device is refused
    assert refusal(lambda: RunDir(out, {"budget": 8, "device": "cuda"}, resume=True, kind="attack"))[0] == (
        f"{out} holds a run with other settings (device): device \"cpu\" in run.json, \"cuda\" now")


# --- temp files of interrupted atomic writes ------------------------------------------------

def test_remove_temp_files_removes_exactly_the_temps_of_this_run(tmp_path) -> None:
    run = tmp_path / "run"
    touch(run / layout.RUN, "{}")
    touch(run / layout.LOCK, "")
    temp_dir = run / ".model.k2.tmp"
    touch(temp_dir / "sub" / "weights.bin")
    outside = touch(tmp_path / "elsewhere" / "keep.bin")
    (run / ".link.tmp").symlink_to(outside.parent, target_is_directory=True)  # never followed
    removed = {touch(run / ".results.jsonl.a1.tmp"), temp_dir,
               touch(run / "images" / ".x.png.b2.tmp"), touch(run / "images" / "deep" / ".y.c3.tmp")}
    kept = {touch(run / "notes.tmp"), touch(run / ".hidden"), touch(run / "tmp"),
            touch(run / "images" / "x.png")}
    # Runs nested in this one clean their own (under their own lock): one with only a run.json,
    # one with only a lock; each beside a temp of this run's, so a walk stopped at the first
    # nested run it meets (instead of skipping it) leaves the other folder's temp behind.
    for folder, marker in (("a", layout.RUN), ("b", layout.LOCK)):
        removed.add(touch(run / folder / ".table.json.d4.tmp"))
        touch(run / folder / "nested" / marker, "")
        kept.add(touch(run / folder / "nested" / ".results.jsonl.e5.tmp"))
    assert sorted(remove_temp_files(run)) == sorted(removed)
    assert not any(p.exists() for p in removed)
    assert all(p.exists() for p in kept)
    assert (run / ".link.tmp").is_symlink() and outside.read_text() == "x"
    assert remove_temp_files(run) == []


def test_remove_temp_files_is_best_effort(tmp_path, monkeypatch) -> None:
    """A temp that cannot be removed is clutter, not an error: the rest is still removed."""
    run = tmp_path / "run"
    stuck_file = touch(run / ".stuck.a.tmp")
    stuck_dir = run / ".dir.b.tmp"
    touch(stuck_dir / "stuck")
    gone = touch(run / "sub" / ".free.c.tmp")
    real_unlink = os.unlink

    def unlink(path, *args, **kw) -> None:
        if "stuck" in os.fspath(path):
            raise PermissionError(errno.EACCES, "Permission denied", os.fspath(path))
        real_unlink(path, *args, **kw)

    monkeypatch.setattr(os, "unlink", unlink)
    removed = remove_temp_files(run)
    assert gone in removed and stuck_file not in removed
    assert stuck_file.exists() and (stuck_dir / "stuck").exists() and not gone.exists()
