"""--norm-eval: fine-tuning keeps the start model's BatchNorm statistics, its weights still train."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

import segtk
from segtk.cli import cli
from segtk.core import ModelError
from segtk.jobs.train import keep_norm_statistics, require_trainable


def small(out: Path, norm_eval: bool = False) -> segtk.Table:
    """One epoch of the demo model on 4 demo images, 64x48 crops."""
    return segtk.train("demo", "demo", out, split="", limit=4, batch_size=4, crop=(64, 48),
                       lr=3e-3, epochs=1, norm_eval=norm_eval)


def tensors(spec: str) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """(BatchNorm running statistics, everything else) of a model spec's network."""
    state = require_trainable(segtk.load_model(spec), spec).state_dict()
    stats = {k: v for k, v in state.items() if "running_" in k}
    return stats, {k: v for k, v in state.items() if k not in stats and "num_batches" not in k}


def same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_the_statistics_stay_the_start_models_and_the_weights_train(tmp_path: Path) -> None:
    start_stats, start_weights = tensors("demo")
    assert start_stats
    kept = small(tmp_path / "kept", norm_eval=True)
    stats, weights = tensors(kept.details["spec"])
    assert same(stats, start_stats)
    assert not same(weights, start_weights)
    moved = small(tmp_path / "moved")
    assert not same(tensors(moved.details["spec"])[0], start_stats)  # what the option prevents


def test_run_json_records_it_only_when_set_and_a_resume_keeps_it(tmp_path: Path) -> None:
    args = ["train", "--model", "demo", "--data", "demo", "--split", "", "--limit", "4",
            "--batch-size", "4", "--crop", "64x48", "--epochs", "1"]
    plain, kept = tmp_path / "plain", tmp_path / "kept"
    for out, extra in ((plain, []), (kept, ["--norm-eval"])):
        got = CliRunner().invoke(cli, [*args, *extra, "--out", str(out)])
        assert got.exit_code == 0, got.output
    assert "norm_eval" not in json.loads((plain / "run.json").read_text())["config"]
    assert json.loads((kept / "run.json").read_text())["config"]["norm_eval"] is True
    got = CliRunner().invoke(cli, ["train", "--out", str(kept), "--resume", "--epochs", "2"])
    assert got.exit_code == 0, got.output
    assert len((kept / "results.jsonl").read_text().splitlines()) == 2  # epoch 2 trained
    assert same(tensors(str(kept / "model.spec"))[0], tensors("demo")[0])


def test_a_model_without_running_statistics_is_refused() -> None:
    class NoNorm:
        trainable_module = torch.nn.Sequential(torch.nn.Conv2d(3, 2, 1))

    with pytest.raises(ModelError, match="no normalisation layer with running statistics"):
        keep_norm_statistics(NoNorm())  # type: ignore[arg-type]
