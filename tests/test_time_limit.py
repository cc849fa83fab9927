"""--time-limit: an attack's time runs out at the query counter, whatever the attack does; the
run records that it stopped on time, never exceeds ε or its budget, and keeps the limit as a
setting. A fake clock (one tick per look) makes every count here exact."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from segtk.cli import cli
from segtk.core import EPS_TOLERANCE, SegtkError
from segtk.core import _segmenter as segmenter_module
from segtk.storage.runs import read_results
from segtk.testing import RecordingSegmenter, toy_batch
from segtk_dla import DLA
from segtk_random import RandomAttack


@pytest.fixture
def ticking(monkeypatch):
    """The counter's clock advances one second each time it is read: the counter reads it
    once when made and once per query, so a limit of L.5 admits exactly L queries."""
    now = iter(range(10**6))
    monkeypatch.setattr(segmenter_module, "monotonic", lambda: float(next(now)))


@pytest.mark.parametrize("attack_cls", [DLA, RandomAttack])
def test_the_attack_stops_at_its_first_query_past_the_limit(ticking, attack_cls) -> None:
    images, labels = toy_batch(2, 15, 21)
    model = RecordingSegmenter()
    result = attack_cls(budget=40, eps=8, time_limit=3.5).run(model, images, labels)
    assert model.calls == 3  # made at 0: calls at 1, 2 and 3; the one at 4 is refused
    assert result.stopped == ["time", "time"]
    assert (result.queries < 40).all() and result.queries.sum() == sum(model.sizes)
    assert [len(h) for h in result.history] == result.queries.tolist()
    eps = 8 / 255 + EPS_TOLERANCE
    for row in model.seen:  # every query the model saw lies in an image's ε-ball...
        assert min(float((row - x).abs().max()) for x in images) <= eps
    assert float((result.images - images).abs().max()) <= eps  # ...and so do the results


def test_an_attack_within_its_limit_is_not_marked(ticking) -> None:
    images, labels = toy_batch(2)
    result = DLA(budget=5, time_limit=1e6).run(RecordingSegmenter(), images, labels)
    assert result.stopped == ["", ""] and result.queries.tolist() == [5, 5]


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf")])
def test_a_limit_must_be_a_positive_number_of_seconds(bad: float) -> None:
    with pytest.raises(SegtkError, match="time limit must be a positive number"):
        DLA(time_limit=bad)


def cli_run(*args: str):
    return CliRunner().invoke(cli, list(args))


def test_segtk_attack_records_the_stop_and_keeps_the_limit_as_a_setting(ticking, tmp_path) -> None:
    out = str(tmp_path / "a")
    args = ["attack", "--plugin", "random", "--budget", "20", "--limit", "2", "--batch-size", "1",
            "--out", out]
    first = cli_run(*args, "--time-limit", "2.5")
    assert first.exit_code == 0, first.output
    records = read_results(tmp_path / "a" / "results.jsonl")
    for rec in records.values():  # each batch: made at t, queries at t+1 and t+2, t+3 refused
        assert (rec["stopped"], rec["queries"], len(rec["history"])) == ("time", 2, 2)
        assert rec["linf"] <= 8
    config = json.loads((tmp_path / "a" / "run.json").read_text())["config"]
    assert config["time_limit"] == 2.5 and "time_limit" not in config["params"]
    refused = cli_run(*args, "--resume", "--time-limit", "60")  # another limit is another run
    assert refused.exit_code == 1 and "with --time-limit 2.5, not --time-limit 60" in refused.output
    assert cli_run(*args, "--resume", "--time-limit", "2.5").exit_code == 0
    assert cli_run(*args, "--resume").exit_code == 0  # left out: run.json's limit


def test_without_a_limit_run_json_is_what_it_was(tmp_path) -> None:
    """No --time-limit: run.json holds no time_limit anywhere, so runs made before time limits
    resume as they are; no record says stopped."""
    out = tmp_path / "a"
    done = cli_run("attack", "--plugin", "random", "--budget", "3", "--limit", "1", "--out", str(out))
    assert done.exit_code == 0, done.output
    config = json.loads((out / "run.json").read_text())["config"]
    assert "time_limit" not in config and "time_limit" not in config["params"]
    assert all("stopped" not in r for r in read_results(out / "results.jsonl").values())


def test_bench_attacks_stops_on_time_and_refuses_another_limit_on_resume(ticking, tmp_path) -> None:
    args = ["bench", "attacks", "--attacks", "random,dla", "--budgets", "4,20", "--repeats", "1",
            "--limit", "2", "--batch-size", "2", "--executor", "inline", "--out",
            str(tmp_path / "b")]
    first = cli_run(*args, "--time-limit", "1.5")
    assert first.exit_code == 0, first.output
    records = read_results(tmp_path / "b" / "results.jsonl", key="key").values()
    assert records and all(r["stopped"] == "time" and r["queries"] == 1 for r in records)
    assert json.loads((tmp_path / "b" / "run.json").read_text())["config"]["time_limit"] == 1.5
    refused = cli_run(*args, "--resume", "--time-limit", "3")
    assert refused.exit_code == 1 and "with --time-limit 1.5, not --time-limit 3" in refused.output
    spec = cli_run(*args[:3], "random:time_limit=3", *args[4:])
    assert spec.exit_code == 1 and "time_limit is set by --time-limit" in spec.output
