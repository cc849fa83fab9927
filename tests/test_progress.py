"""Progress you can read: `segtk attack`'s bar counts image-queries (budget per image) and moves
as the model answers, not when a batch of images finishes; every bar names its unit."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

import segtk
from segtk.cli import cli


def test_queries_are_reported_as_the_model_answers(tmp_path: Path) -> None:
    events: list[tuple[str, int]] = []
    budget, images = 6, 3
    run = segtk.attack("demo", "demo", attack="dla", budget=budget, limit=images, batch_size=8,
                       out=tmp_path / "run", on_start=lambda n: events.append(("start", n)),
                       on_image=lambda rec: events.append(("image", 0)),
                       on_queries=lambda n: events.append(("queries", n)))
    assert events[0] == ("start", images)
    first_image = events.index(("image", 0))
    during = [n for kind, n in events[:first_image] if kind == "queries"]
    # one batch holds all three images: before its first image finishes, the bar has moved
    # once per model call (the clean query, then each of the attack's queries)
    assert len(during) >= budget and sum(during) <= images * budget
    assert sum(n for kind, n in events if kind == "queries") == images * budget
    assert len(run.records) == images
    # a resumed run counts its finished images' budget at once
    events.clear()
    segtk.attack("demo", "demo", attack="dla", budget=budget, limit=images, batch_size=8,
                 out=tmp_path / "run", resume=True, on_start=lambda n: None,
                 on_queries=lambda n: events.append(("queries", n)))
    assert [n for _, n in events] == [budget] * images


def test_the_attack_bar_counts_queries_and_bench_bars_name_their_unit(tmp_path: Path) -> None:
    out = CliRunner().invoke(cli, ["attack", "--plugin", "dla", "--limit", "2", "--budget", "5",
                                   "--out", str(tmp_path / "a")], env={"COLUMNS": "200"})
    assert out.exit_code == 0, out.output
    assert "10/10 queries" in out.output
    bench = CliRunner().invoke(cli, ["bench", "attacks", "--attacks", "random", "--budgets", "3",
                                     "--repeats", "1", "--limit", "2", "--workers", "1",
                                     "--out", str(tmp_path / "b")], env={"COLUMNS": "200"})
    assert bench.exit_code == 0, bench.output
    assert "2/2 images attacked" in bench.output
