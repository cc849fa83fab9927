"""`bench augment --eval-seed`: the edited evaluation subsets are seeded apart from the training
seed, so runs with other --seed are scored on one test set; a run made before the option
resumes with the training seed it used for its subsets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import segtk
from segtk.benchmarks import augment as augment_bench
from segtk.benchmarks.augment import AugmentBench
from segtk.core import SegtkError
from segtk.jobs.train import TrainConfig

SUBSET = Path("edits") / "weather" / "images"


def bench(out: Path, seed: int, **kw) -> segtk.Table:
    """A tiny bench augment run (fog, whose edits draw random numbers from the seed)."""
    return segtk.bench_augment("demo", "demo", "baseline", out, split="", limit=4,
                               eval_split="", eval_limit=2, attributes="weather",
                               values={"weather": ["fog"]}, epochs=1, batch_size=4, lr=3e-3,
                               crop=(64, 48), seed=seed, **kw)


def edited(out: Path) -> dict[str, bytes]:
    files = {p.name: p.read_bytes() for p in sorted((out / SUBSET).glob("*.png"))}
    assert files, f"no edited images in {out / SUBSET}"
    return files


@pytest.mark.slow
def test_one_test_set_across_training_seeds(tmp_path) -> None:
    bench(tmp_path / "s0", 0)
    bench(tmp_path / "s1", 1)
    bench(tmp_path / "s1-e7", 1, eval_seed=7)
    assert edited(tmp_path / "s0") == edited(tmp_path / "s1")  # same images, byte-equal
    other = edited(tmp_path / "s1-e7")
    assert other.keys() == edited(tmp_path / "s0").keys()
    assert all(other[k] != v for k, v in edited(tmp_path / "s0").items())
    configs = [json.loads((tmp_path / d / "run.json").read_text())["config"]
               for d in ("s0", "s1", "s1-e7")]
    assert [(c["seed"], c["eval_seed"]) for c in configs] == [(0, 0), (1, 0), (1, 7)]


@pytest.mark.slow
def test_resume_reads_the_eval_seed_back(tmp_path) -> None:
    out = tmp_path / "run"
    bench(out, 1, eval_seed=7)
    before = edited(out)
    bench(out, 1, resume=True)  # eval_seed left out: the recorded 7, not the default 0
    assert edited(out) == before
    with pytest.raises(SegtkError, match="eval_seed"):
        bench(out, 1, eval_seed=0, resume=True)


@pytest.mark.slow
def test_a_run_made_before_eval_seed_resumes_with_its_training_seed(tmp_path) -> None:
    out = tmp_path / "old"
    training = TrainConfig("demo", "demo", None, 4, epochs=1, batch_size=4, lr=3e-3,
                           crop=(64, 48), seed=3)
    old = AugmentBench(training, ("baseline",), ("weather",), eval_split=None, eval_limit=2,
                       values={"weather": ["fog"]}, eval_seed=None)  # as runs were made before
    augment_bench.run(old, out)
    assert "eval_seed" not in json.loads((out / "run.json").read_text())["config"]
    before = edited(out)
    bench(out, 3, resume=True)  # no eval_seed: the old behaviour (subsets seeded by --seed 3)
    assert edited(out) == before
    assert "eval_seed" not in json.loads((out / "run.json").read_text())["config"]
    fresh = tmp_path / "seeded-3"
    bench(fresh, 0, eval_seed=3)
    assert edited(fresh) == before  # the old run's subsets were those of eval seed 3
