"""`--overwrite` (`overwrite=True`): a finished run started over gives the same results; only
what segtk wrote is removed (a file of yours in the folder is kept); a folder segtk did not
make, or a run of another command, is refused in one line; --overwrite with --resume (or
--table-only) is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import segtk
from segtk.cli import cli
from segtk.jobs.overwrite import WRITTEN
from segtk.storage import layout


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args))


ATTACK = ["attack", "--plugin", "dla", "--limit", "2", "--budget", "4", "--quiet"]
BENCH = ["bench", "attacks", "--attacks", "random,dla", "--budgets", "3", "--repeats", "1",
         "--limit", "2", "--workers", "1", "--quiet"]
EDIT = ["edit", "--plugin", "color", "--values", "red", "--limit", "1", "--quiet"]


def records(out: Path, name: str = layout.RESULTS) -> list[dict]:
    return [json.loads(line) for line in (out / name).read_text().splitlines()]


def entries(out: Path) -> set[str]:
    return {p.name for p in out.iterdir()} - {layout.LOCK}


@pytest.mark.parametrize(("args", "results"), [(ATTACK, layout.RESULTS),
                                                (BENCH, layout.RESULTS),
                                                (EDIT, layout.MANIFEST)],
                         ids=["attack", "bench-attacks", "edit"])
def test_a_finished_run_started_over_gives_the_same_results(tmp_path: Path, args, results) -> None:
    out = tmp_path / "run"
    first = invoke(*args, "--out", str(out))
    assert first.exit_code == 0, first.output
    written, before = entries(out), records(out, results)
    assert written <= WRITTEN  # everything a run writes is what --overwrite knows to remove
    again = invoke(*args, "--out", str(out))
    assert again.exit_code != 0 and "already holds" in again.output
    assert "--overwrite" in again.output  # the refusal says how to start over
    (out / "notes.txt").write_text("mine")
    folder = next(out / name for name in sorted(written) if (out / name).is_dir())
    (folder / "stale.png").write_bytes(b"an earlier run's picture")
    over = invoke(*args, "--out", str(out), "--overwrite")
    assert over.exit_code == 0, over.output
    assert records(out, results) == before
    assert entries(out) == written | {"notes.txt"}  # the user's file is kept, nothing stale is
    assert (out / "notes.txt").read_text() == "mine"
    assert not (folder / "stale.png").exists()


def test_a_folder_segtk_did_not_make_is_refused_and_left_alone(tmp_path: Path) -> None:
    out = tmp_path / "photos"
    out.mkdir()
    (out / "holiday.jpg").write_bytes(b"jpeg")
    result = invoke(*ATTACK, "--out", str(out), "--overwrite")
    assert result.exit_code != 0
    assert f"{out} was not made by segtk (it has no run.json)" in result.output
    assert entries(out) == {"holiday.jpg"}


def test_a_run_of_another_command_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert invoke(*ATTACK, "--out", str(out)).exit_code == 0
    kept = entries(out)
    result = invoke(*BENCH, "--out", str(out), "--overwrite")
    assert result.exit_code != 0
    assert "holds a `segtk attack` run, not a `segtk bench attacks` one" in result.output
    assert entries(out) == kept


@pytest.mark.parametrize(("args", "flag"), [(ATTACK, "--resume"), (BENCH, "--table-only")])
def test_overwrite_with_resume_is_refused(tmp_path: Path, args, flag) -> None:
    out = tmp_path / "run"
    assert invoke(*args, "--out", str(out)).exit_code == 0
    kept = entries(out)
    result = invoke(*args, "--out", str(out), "--overwrite", flag)
    assert result.exit_code != 0
    assert f"--overwrite and {flag} contradict each other" in result.output
    assert entries(out) == kept


def test_python_overwrite_starts_over_and_refuses_resume(tmp_path: Path) -> None:
    out = tmp_path / "run"
    first = segtk.attack("demo", "demo", attack="dla", budget=4, limit=2, out=out)
    with pytest.raises(segtk.core.SegtkError, match="already holds"):
        segtk.attack("demo", "demo", attack="dla", budget=4, limit=2, out=out)
    again = segtk.attack("demo", "demo", attack="dla", budget=4, limit=2, out=out, overwrite=True)
    assert again.records == first.records
    with pytest.raises(segtk.core.SegtkError,
                       match="overwrite=True and resume=True contradict each other"):
        segtk.attack("demo", "demo", attack="dla", budget=4, limit=2, out=out, overwrite=True,
                     resume=True)
