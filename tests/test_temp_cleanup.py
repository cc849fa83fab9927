"""Temp files that atomic writes leave when a kill lands before their rename are removed when
the run is opened again (storage.runs.remove_temp_files, one implementation for every run kind)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from segtk.cli import cli
from segtk.core._data import temp_file
from segtk.jobs.train import TrainConfig, train
from segtk.storage import layout
from segtk.storage.runs import RunDir


def left_by_a_kill(path: Path) -> Path:
    """The temp file an atomic write of `path` has made when a SIGKILL lands before its rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = temp_file(path)
    os.write(fd, b"half a file")
    os.close(fd)
    return Path(tmp)


def files(folder: Path) -> set[Path]:
    return {p for p in folder.rglob("*") if p.is_file()}


def test_opening_a_run_removes_its_temp_files_but_not_a_nested_run_s(tmp_path) -> None:
    out = tmp_path / "run"
    RunDir(out, {"a": 1}, resume=False, kind="bench-augment").close()
    mine = [left_by_a_kill(out / "table.json"), left_by_a_kill(out / "edits" / "x.png")]
    temp_dir = out / "checkpoints" / ".model.abc123.tmp"  # a plugin's temp folder (hf save)
    (temp_dir / "sub").mkdir(parents=True)
    (temp_dir / "sub" / "weights.bin").write_bytes(b"w")
    nested = out / "train" / "baseline"  # a run of its own: it cleans its temps under its lock
    nested.mkdir(parents=True)
    (nested / layout.RUN).write_text("{}")
    theirs = left_by_a_kill(nested / "model.spec")
    kept = [out / "notes.tmp", out / ".hidden"]  # not an atomic write's temp
    for path in kept:
        path.write_text("mine")
    with RunDir(out, {"a": 1}, resume=True, kind="bench-augment"):
        pass
    assert not any(p.exists() for p in mine) and not temp_dir.exists()
    assert theirs.exists() and all(p.exists() for p in kept)


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args))


def attack_run(out: Path) -> list[str]:
    return ["attack", "--plugin", "dla", "--limit", "1", "--budget", "2", "--out", str(out)]


def edit_run(out: Path) -> list[str]:
    return ["edit", "--plugin", "material", "--values", "wood", "--limit", "1", "--out", str(out)]


@pytest.mark.parametrize(("command", "folders"), [(attack_run, ["images", "overlays"]),
                                                  (edit_run, ["images", "labels"])])
def test_resume_removes_the_temp_files_of_attack_and_edit_runs(tmp_path, command, folders) -> None:
    pytest.importorskip("segtk_demo")
    out = tmp_path / "run"
    first = invoke(*command(out))
    assert first.exit_code == 0, first.output
    before = files(out)
    temps = [left_by_a_kill(out / "results.jsonl")]
    temps += [left_by_a_kill(next((out / name).iterdir())) for name in folders]
    resumed = invoke(*command(out), "--resume")
    assert resumed.exit_code == 0, resumed.output
    assert not any(p.exists() for p in temps)
    assert files(out) == before


def test_resume_removes_the_temp_files_of_a_training_run(tmp_path) -> None:
    pytest.importorskip("segtk_demo")
    config = TrainConfig(model="demo", data="demo", split=None, limit=4, epochs=1, batch_size=4,
                         crop=(64, 48))
    out = tmp_path / "run"
    train(config, out)
    before = files(out)
    epoch = out / "checkpoints" / "epoch-0001"
    temps = [left_by_a_kill(out / "model.spec"), left_by_a_kill(epoch / "state.safetensors"),
             left_by_a_kill(epoch / "model" / "model.safetensors")]
    train(config, out, resume=True)
    assert not any(p.exists() for p in temps)
    assert files(out) == before
