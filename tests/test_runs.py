"""Run directories: whole-line appends, strict resume, the lock, run.json provenance, strict JSON."""

from __future__ import annotations

import errno
import hashlib
import json
import math
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from segtk.core import SegtkError
from segtk.core._data import Dataset, Item, to_uint8
from segtk.jobs.edit import EditRun
from segtk.jobs.predict import predict_dataset
from segtk.storage import provenance
from segtk.storage.layout import MANIFEST, RESULTS, RUN, SKIPPED
from segtk.storage.runs import (
    RunDir,
    append_line,
    atomic_write_json,
    read_results,
)
from segtk.testing import TinySegmenter, toy_batch

REPO = Path(__file__).resolve().parents[1]


def constant(item: Item) -> Callable[[], Item]:
    """A dataset loader that returns `item`."""
    return lambda: item


def records(n: int) -> list[dict]:
    return [{"image": f"img{i}", "miou": i / 10} for i in range(n)]


def filled(path: Path, n: int = 3) -> RunDir:
    run = RunDir(path, {"budget": 8}, resume=False, kind="attack")
    for rec in records(n):
        run.append(rec)
    return run


@pytest.fixture
def flaky_write(monkeypatch):
    """os.write that misbehaves on results files only: `plan` lists, per call, how many bytes to
    write (an int, possibly short) or an errno to raise."""
    real = os.write
    plan: list[int | OSError] = []

    def write(fd: int, data) -> int:
        if plan and os.readlink(f"/proc/self/fd/{fd}").endswith(".jsonl"):
            step = plan.pop(0)
            if isinstance(step, OSError):
                raise step
            return real(fd, bytes(data)[:step])
        return real(fd, data)

    monkeypatch.setattr(os, "write", write)
    return plan


# --- append: a whole line or an error --------------------------------------------------------

def test_append_finishes_a_short_write(tmp_path, flaky_write) -> None:
    run = filled(tmp_path / "r", 2)
    flaky_write.extend([5, 3])  # two short writes, then the rest
    run.append({"image": "img2", "miou": 0.2})
    assert list(read_results(run.path / RESULTS)) == ["img0", "img1", "img2"]


@pytest.mark.parametrize("failure", [
    [OSError(errno.ENOSPC, "No space left on device")],
    [7, OSError(errno.ENOSPC, "No space left on device")],  # a short write, then a full disk
    [4, 0],  # a short write, then nothing written at all
    [OSError(errno.EIO, "Input/output error")],
])
def test_append_failure_leaves_the_file_as_it_was_and_says_so(tmp_path, flaky_write, failure) -> None:
    run = filled(tmp_path / "r", 2)
    before = (run.path / RESULTS).read_bytes()
    flaky_write.extend(failure)
    with pytest.raises(SegtkError, match="results.jsonl") as exc:
        run.append({"image": "img2", "miou": 0.2})
    assert exc.value.hint and "--resume" in str(exc.value.hint)
    assert (run.path / RESULTS).read_bytes() == before  # no torn line, no record it didn't say
    if isinstance(failure[-1], OSError) and failure[-1].errno == errno.ENOSPC:
        assert "disk" in str(exc.value.hint)


def test_append_fsync_failure_rolls_back(tmp_path, monkeypatch) -> None:
    run = filled(tmp_path / "r", 1)
    before = (run.path / RESULTS).read_bytes()

    def fsync(fd: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "fsync", fsync)
    with pytest.raises(SegtkError, match="Input/output error"):
        run.append({"image": "img1"})
    monkeypatch.undo()
    assert (run.path / RESULTS).read_bytes() == before


# --- resume: only a torn last line is dropped ------------------------------------------------

def test_torn_last_line_is_dropped_on_resume(tmp_path) -> None:
    run = filled(tmp_path / "r", 3)
    run.close()
    path = run.path / RESULTS
    raw = path.read_bytes()
    path.write_bytes(raw[:-7])  # the last line lost its end (and its newline)
    again = RunDir(run.path, {"budget": 8}, resume=True, kind="attack")
    assert list(again.done()) == ["img0", "img1"]
    assert path.read_bytes() == b"".join(raw.splitlines(keepends=True)[:2])


def test_corrupt_middle_line_is_refused_with_its_number_and_kept(tmp_path) -> None:
    run = filled(tmp_path / "r", 4)
    run.close()
    path = run.path / RESULTS
    lines = path.read_bytes().splitlines(keepends=True)
    lines[1] = lines[1][:10] + b"\n"
    path.write_bytes(b"".join(lines))
    again = RunDir(run.path, {"budget": 8}, resume=True, kind="attack")
    with pytest.raises(SegtkError, match=r"results.jsonl line 2 is not valid JSON") as exc:
        again.done()
    assert "line 2" in str(exc.value.hint)
    assert path.read_bytes() == b"".join(lines)  # nothing truncated away


def test_invalid_last_line_with_its_newline_is_refused(tmp_path) -> None:
    """An interrupted append never leaves a newline-terminated fragment: someone edited it."""
    run = filled(tmp_path / "r", 2)
    with open(run.path / RESULTS, "ab") as fh:
        fh.write(b'{"image": "img2", "mi\n')
    with pytest.raises(SegtkError, match="line 3 is not valid JSON"):
        run.done()


@pytest.mark.parametrize("line", [b'{"name": "img9"}\n', b"[1, 2]\n", b'{"image": 3}\n'])
def test_results_line_without_the_key_is_one_error(tmp_path, line) -> None:
    run = filled(tmp_path / "r", 1)
    with open(run.path / RESULTS, "ab") as fh:
        fh.write(line)
    with pytest.raises(SegtkError, match=r"results.jsonl line 2 has no 'image'"):
        run.done()


@pytest.mark.parametrize("content", [b'{"command": "segtk at', b"[]", b'{"config": 3}',
                                     b'{"kind": 3, "config": {}}'])
def test_torn_run_json_is_one_error_naming_file_and_fix(tmp_path, content) -> None:
    filled(tmp_path / "r", 1).close()
    (tmp_path / "r" / RUN).write_bytes(content)
    with pytest.raises(SegtkError, match="run.json") as exc:
        RunDir(tmp_path / "r", {"budget": 8}, resume=True, kind="attack")
    assert "restore" in str(exc.value.hint)


@pytest.mark.parametrize("resume", [False, True])
def test_results_without_run_json_are_refused(tmp_path, resume) -> None:
    filled(tmp_path / "r", 1).close()
    (tmp_path / "r" / RUN).unlink()
    with pytest.raises(SegtkError, match="no run.json"):
        RunDir(tmp_path / "r", {"budget": 8}, resume=resume, kind="attack")


# --- the lock --------------------------------------------------------------------------------

def test_read_only_run_dir_changes_nothing(tmp_path) -> None:
    run = filled(tmp_path / "r", 2)
    with open(run.path / RESULTS, "ab") as fh:
        fh.write(b'{"image": "im')  # another process is mid-append
    before = {p.name: p.read_bytes() for p in run.path.iterdir() if p.is_file()}
    reader = RunDir(run.path, {"budget": 8}, resume=True, read_only=True, kind="attack")
    assert list(reader.done()) == ["img0", "img1"]
    with pytest.raises(SegtkError, match="read-only"):
        reader.append({"image": "img2"})
    assert {p.name: p.read_bytes() for p in run.path.iterdir() if p.is_file()} == before


# --- run.json provenance ---------------------------------------------------------------------

def test_run_json_records_git_commit_and_weight_hashes(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    weights = tmp_path / "w.safetensors"
    weights.write_bytes(b"weights" * 1000)
    config = {"model": f"espnet:camvid={weights}", "models": [f"torchscript:{weights},bgr", "demo"]}
    run = RunDir(tmp_path / "r", config, resume=False, kind="attack")
    record = json.loads((run.path / RUN).read_text())
    assert record["weights"] == {str(weights): hashlib.sha256(weights.read_bytes()).hexdigest()}
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True)
    assert record["git_commit"] == (head.stdout.strip() if head.returncode == 0 else None)


def test_git_commit_is_none_outside_a_checkout_or_without_git(tmp_path, monkeypatch) -> None:
    provenance.git_commit.cache_clear()
    monkeypatch.setattr(provenance, "SOURCE", tmp_path)
    assert provenance.git_commit() is None
    provenance.git_commit.cache_clear()
    monkeypatch.setattr(provenance, "SOURCE", REPO)
    monkeypatch.setenv("PATH", str(tmp_path))  # no git
    assert provenance.git_commit() is None
    provenance.git_commit.cache_clear()


def test_weight_hashes_are_cached_by_path_mtime_and_size(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    weights = tmp_path / "w.pt"
    weights.write_bytes(b"a" * 3_000_000)
    calls = []
    real = provenance.sha256_file
    def counted(path: Path) -> str:
        calls.append(path)
        return real(path)

    monkeypatch.setattr(provenance, "sha256_file", counted)
    first = provenance.spec_file_hashes([f"torchscript:{weights}"])
    assert provenance.spec_file_hashes([f"torchscript:{weights}"]) == first and len(calls) == 1
    weights.write_bytes(b"b" * 3_000_001)
    changed = provenance.spec_file_hashes([f"torchscript:{weights}"])
    assert len(calls) == 2 and changed[str(weights)] == hashlib.sha256(b"b" * 3_000_001).hexdigest()


# --- strict JSON -----------------------------------------------------------------------------

def test_json_outputs_are_strict(tmp_path) -> None:
    table = [{"attack": "dla", "psnr": math.inf, "miou_std": math.nan, "ok": 1.5, "n": [-math.inf]}]
    atomic_write_json(tmp_path / "t.json", table)

    def refuse(name: str) -> None:
        raise ValueError(f"not JSON: {name}")

    loaded = json.loads((tmp_path / "t.json").read_text(), parse_constant=refuse)
    assert loaded == [{"attack": "dla", "psnr": None, "miou_std": None, "ok": 1.5, "n": [None]}]


# --- run kinds -------------------------------------------------------------------------------

def test_run_json_records_the_kind(tmp_path) -> None:
    with RunDir(tmp_path / "r", {"budget": 8}, resume=False, kind="bench-attacks") as run:
        assert run.kind == "bench-attacks"
    assert json.loads((tmp_path / "r" / RUN).read_text())["kind"] == "bench-attacks"


@pytest.mark.parametrize("resume", [False, True])
def test_a_folder_holding_another_kind_of_run_is_refused(tmp_path, resume) -> None:
    filled(tmp_path / "r", 1).close()
    before = (tmp_path / "r" / RUN).read_bytes()
    with pytest.raises(SegtkError) as err:
        RunDir(tmp_path / "r", {"budget": 8}, resume=resume, kind="bench-attacks")
    assert err.value.message.endswith("holds a `segtk attack` run, not a `segtk bench attacks` one")
    assert err.value.hint == "choose another --out"
    assert (tmp_path / "r" / RUN).read_bytes() == before  # its run.json is kept


def test_an_edit_folder_is_no_attack_out_even_before_its_first_edit(tmp_path) -> None:
    EditRun(tmp_path / "e", {"seed": 0}, resume=False).close()  # run.json only, no manifest yet
    with pytest.raises(SegtkError, match="holds a `segtk edit` run, not a `segtk attack` one"):
        RunDir(tmp_path / "e", {"budget": 8}, resume=False, kind="attack")


def test_a_run_json_from_before_kinds_resumes_and_gets_its_kind(tmp_path) -> None:
    filled(tmp_path / "r", 2).close()
    record = json.loads((tmp_path / "r" / RUN).read_text())
    del record["kind"]
    (tmp_path / "r" / RUN).write_text(json.dumps(record))
    with RunDir(tmp_path / "r", {"budget": 8}, resume=True, kind="attack") as run:
        assert list(run.done()) == ["img0", "img1"]
    assert json.loads((tmp_path / "r" / RUN).read_text())["kind"] == "attack"


@pytest.mark.parametrize("kind", ["", "Attack", "bench attacks", "bench-", "-x"])
def test_a_malformed_kind_is_refused_before_anything_is_written(tmp_path, kind) -> None:
    with pytest.raises(SegtkError, match="bad run kind"):
        RunDir(tmp_path / "r", {"budget": 8}, resume=False, kind=kind)
    assert not (tmp_path / "r").exists()


# --- edit runs follow the same rules ---------------------------------------------------------

def test_edit_run_is_strict_like_a_run_dir(tmp_path) -> None:
    with EditRun(tmp_path / "e", {"seed": 0}, resume=False) as run:
        for name in ("a__red", "b__red", "c__red"):
            append_line(run.path / MANIFEST, {"name": name})
    lines = (tmp_path / "e" / MANIFEST).read_bytes().splitlines(keepends=True)
    (tmp_path / "e" / MANIFEST).write_bytes(lines[0] + b"{oops\n" + lines[2])
    with pytest.raises(SegtkError, match="manifest.jsonl line 2 is not valid JSON"):
        EditRun(tmp_path / "e", {"seed": 0}, resume=True).done()
    (tmp_path / "e" / RUN).unlink()
    with pytest.raises(SegtkError, match="no run.json"):
        EditRun(tmp_path / "e", {"seed": 0}, resume=True)


def test_edit_run_is_a_run_dir_of_kind_edit(tmp_path) -> None:
    with EditRun(tmp_path / "e", {"seed": 0}, resume=False) as run:
        assert isinstance(run, RunDir) and run.kind == "edit"
        run.append({"name": "a__red", "value": "red"})
        append_line(run.path / SKIPPED, {"name": "b__red", "reason": "tiny-object"})
        assert list(run.done()) == ["a__red"] and list(run.skipped()) == ["b__red"]
        assert (run.path / MANIFEST).is_file() and not (run.path / RESULTS).exists()
    assert json.loads((tmp_path / "e" / RUN).read_text())["kind"] == "edit"
    with pytest.raises(SegtkError, match="already holds an edited dataset"):
        EditRun(tmp_path / "e", {"seed": 0}, resume=False)
    with pytest.raises(SegtkError, match=r"holds a run with other settings \(seed\)"):
        EditRun(tmp_path / "e", {"seed": 1}, resume=True)


def test_predict_summary_is_strict_json_when_no_pixel_is_labelled(tmp_path) -> None:
    """Every label ignored: mIoU is NaN, and summary.json must still be JSON other tools read."""
    images, _ = toy_batch(2, 9, 11)
    items = [Item(f"img{i}", to_uint8(images)[i], np.full((9, 11), 255, dtype=np.int64))
             for i in range(2)]
    data = Dataset("all-ignored", TinySegmenter().classes, [(it.name, constant(it)) for it in items])
    summary = predict_dataset(TinySegmenter(), data, tmp_path / "p")
    assert math.isnan(summary["miou"])
    text = (tmp_path / "p" / "summary.json").read_text()
    assert json.loads(text, parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}"))["miou"] is None
