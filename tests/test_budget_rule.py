"""`budget_rule=reference` on the gradient-estimation baselines (NES, ZO-SignSGD, Bandits): the
count of BlackboxBench's loop (the clean query free, the last step finishes), asked for by name,
never a default, and named in every table; the default stays exact."""

from __future__ import annotations

import csv
import json
import math

import pytest
import torch
from click.testing import CliRunner

from segtk.benchmarks.attacks import build_spec
from segtk.cli import cli
from segtk.core import SegtkError
from segtk.testing import TinySegmenter, toy_batch

# name -> (queries per step, queries not counted by the reference: the clean one)
STEPPED = {"nes": (20, 1), "zo-signsgd": (11, 0), "bandits": (2, 1)}
BUDGETS = (1, 10, 11, 50, 61)


def _run(spec: str, budget: int, checkpoints: tuple[int, ...] = ()):
    images, labels = toy_batch()
    return build_spec(spec, budget=budget, eps=16, seed=3).run(TinySegmenter(), images, labels,
                                                               checkpoints=checkpoints)


@pytest.mark.parametrize("name", sorted(STEPPED))
def test_the_default_is_exact_and_the_reference_rule_spends_whole_steps(name) -> None:
    step, free = STEPPED[name]
    for budget in BUDGETS:
        assert _run(name, budget).queries.tolist() == [budget, budget]
        reference = _run(f"{name}:budget_rule=reference", budget).queries.tolist()
        expected = free + math.ceil(budget / step) * step  # hand count: whole steps past B
        assert reference == [expected, expected], (name, budget)
        assert budget <= expected < budget + step + free


@pytest.mark.parametrize("name", sorted(STEPPED))
def test_a_reference_checkpoint_is_the_shorter_reference_run(name) -> None:
    """One benchmark run serves every budget under the rule too (the attack is anytime)."""
    spec = f"{name}:budget_rule=reference"
    long = _run(spec, 61, checkpoints=(10, 61))
    short = _run(spec, 10)
    assert torch.equal(long.checkpoint_images[10], short.images)
    assert torch.equal(long.checkpoint_images[61], long.images)
    exact = _run(name, 10)  # the rule changes the result: a step more than the exact count
    assert not torch.equal(exact.images, short.images)


def test_an_unknown_rule_is_refused_and_other_attacks_have_none() -> None:
    with pytest.raises(SegtkError, match="budget_rule"):
        build_spec("nes:budget_rule=loose", budget=10, eps=8, seed=0)
    with pytest.raises(SegtkError, match="budget_rule"):
        build_spec("signhunter:budget_rule=reference", budget=10, eps=8, seed=0)


def test_the_bench_table_names_the_rule_and_records_the_queries_spent(tmp_path) -> None:
    out = tmp_path / "bench"
    result = CliRunner().invoke(cli, [
        "bench", "attacks", "--attacks", "nes,nes:budget_rule=reference", "--budgets", "10,50",
        "--limit", "2", "--executor", "inline", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "nes:budget_rule=reference" in result.output and "one step more" in result.output
    rows = list(csv.DictReader((out / "table.csv").open()))
    assert {r["attack"] for r in rows} - {"clean"} == {"nes", "nes:budget_rule=reference"}
    spent = {json.loads(line)["attack"]: json.loads(line)["queries"]
             for line in (out / "results.jsonl").read_text().splitlines()}
    assert spent == {"nes": 50, "nes:budget_rule=reference": 61}
