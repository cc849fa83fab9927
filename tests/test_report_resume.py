"""`--resume` rewrites the report a run folder holds (its page would otherwise show the run as
it was before the resume), and writes none where the run had none."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from segtk.cli import cli
from segtk.storage import layout

ATTACK = ["attack", "--plugin", "dla", "--budget", "3", "--quiet"]


def test_resume_refreshes_the_report_the_run_wrote(tmp_path: Path) -> None:
    out = tmp_path / "run"
    first = CliRunner().invoke(cli, [*ATTACK, "--limit", "1", "--out", str(out), "--report"])
    assert first.exit_code == 0, first.output
    page = (out / layout.REPORT).read_text()
    assert "scene_000" in page and "scene_001" not in page
    more = CliRunner().invoke(cli, [*ATTACK, "--limit", "2", "--out", str(out), "--resume"])
    assert more.exit_code == 0, more.output
    assert f"report: {out / layout.REPORT}" in more.output
    assert "scene_001" in (out / layout.REPORT).read_text()


def test_resume_writes_no_report_unasked(tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert CliRunner().invoke(cli, [*ATTACK, "--limit", "1", "--out", str(out)]).exit_code == 0
    more = CliRunner().invoke(cli, [*ATTACK, "--limit", "2", "--out", str(out), "--resume"])
    assert more.exit_code == 0, more.output
    assert not (out / layout.REPORT).exists() and "report:" not in more.output
