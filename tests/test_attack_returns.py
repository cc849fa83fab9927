"""What an attack's result is: its best queried candidate or its declared iterate (`returns`).

Gradient-estimation references (NES, ZO-SignSGD, Bandits) return their iterate; crediting them
with their best probe made NES at 10 queries (no step completed) look like an attack. These
tests pin both results down independently of the oracle: the iterate an attack declared, and the
lowest-proxy candidate among those that reached the model.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import torch

from segtk.benchmarks.attacks import Shard, build_spec, run_shard
from segtk.core import Proxy, QueryCounter, SegtkError, confusion, registry
from segtk.core import _attack as attack_module
from segtk.core._attack import Attack
from segtk.core._oracle import Oracle
from segtk.core._oracle_run import OracleRun
from segtk.jobs.attack import run_settings
from segtk.testing import TinySegmenter, toy_batch

DECLARING = ["nes", "zo-signsgd", "bandits"]  # the attacks whose result is their iterate


@contextmanager
def queried() -> Iterator[list[tuple[int, torch.Tensor]]]:
    """Every (source image, candidate) charged as a query, in order: what the model answered
    for the attack (the oracle's uncounted evaluations of iterates are not in it)."""
    seen: list[tuple[int, torch.Tensor]] = []

    class Recording(QueryCounter):
        def predict(self, images: torch.Tensor, owners: torch.Tensor | None = None) -> torch.Tensor:
            rows = torch.arange(len(images)) if owners is None else torch.as_tensor(owners)
            seen.extend(zip(rows.tolist(), images.clone()))
            return super().predict(images, owners)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(attack_module, "QueryCounter", Recording)
        yield seen


def proxy_of(images: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return Proxy(4)(TinySegmenter().predict(images), labels)


@pytest.mark.parametrize("name", DECLARING)
def test_gradient_estimators_return_their_iterate_by_default(name: str) -> None:
    cls = registry.attack(name)
    assert cls.returns == "iterate" and cls.declares_iterate
    assert cls().params.returns == "iterate"
    assert cls(returns="best").params.returns == "best"
    assert registry.attack("dla")().params.returns == "best"


def test_nes_below_one_step_is_the_clean_image() -> None:
    """NES spends 1 + 2q queries before its first step: at 10 queries (q = 10) it has none."""
    images, labels = toy_batch(2, 16, 16, seed=3)
    nes = registry.attack("nes")
    params = nes(budget=10, eps=255, sigma=60.0, seed=1).params
    best_run = nes(params=params, returns="best").run(TinySegmenter(), images, labels)
    clean = proxy_of(images, labels)
    assert (best_run.scores < clean).any(), "the toy must give NES a probe better than clean"
    run = nes(params=params).run(TinySegmenter(), images, labels, checkpoints=(10,))
    assert torch.equal(run.images, images)
    assert torch.equal(run.checkpoint_images[10], images)
    assert torch.equal(run.scores, clean)
    assert [h[-1] for h in run.history] == clean.tolist()
    assert torch.equal(run.checkpoints[10], confusion(TinySegmenter().predict(images), labels, 4))
    assert run.queries.tolist() == [10, 10]


class WorseningAttack(Attack):
    """Queries the clean image and four noisy candidates and declares the best of them its
    iterate; then queries the worst one again and declares that: an optimisation that moved
    the wrong way on its second step (6 queries)."""

    name = "worsening"
    returns = "iterate"
    declares_iterate = True

    def attack(self, oracle: Oracle) -> None:
        eps = oracle.eps_unit
        for i in range(oracle.batch_size):
            noise = (torch.rand((4, *oracle.clean.shape[1:]), generator=oracle.rngs[i]) * 2 - 1) * eps
            candidates = (oracle.clean[i] + noise).clamp(0, 1)
            scores = oracle.query(torch.cat((oracle.clean[i][None], candidates)),
                                  torch.full((5,), i)).scores[1:]
            oracle.set_iterate(candidates[int(scores.argmin())][None], torch.tensor([i]))
            worst = candidates[int(scores.argmax())][None]
            oracle.query(worst, torch.tensor([i]))
            oracle.set_iterate(worst, torch.tensor([i]))


def test_an_iterate_that_gets_worse_is_reported_as_it_is() -> None:
    images, labels = toy_batch(2, 16, 16, seed=6)
    with queried() as seen:
        run = WorseningAttack(budget=6, eps=255).run(TinySegmenter(), images, labels,
                                                      checkpoints=(5, 6))
    for i in range(2):
        candidates = torch.stack([x for owner, x in seen if owner == i][1:5])
        scores = proxy_of(candidates, labels[i].expand(4, -1, -1))
        low, high = float(scores.min()), float(scores.max())
        assert high > low, "the toy must give a worse second iterate"
        assert torch.equal(run.checkpoint_images[5][i], candidates[int(scores.argmin())])
        assert torch.equal(run.images[i], candidates[int(scores.argmax())])
        assert torch.equal(run.checkpoint_images[6][i], run.images[i])
        assert float(run.scores[i]) == pytest.approx(high)
        assert run.history[i][4:] == pytest.approx([low, high])
        worst = TinySegmenter().predict(run.images[i][None])
        assert torch.equal(run.checkpoints[6][i], confusion(worst, labels[i][None], 4)[0])
    assert run.queries.tolist() == [6, 6]  # the iterates' evaluations are not queries
    best = WorseningAttack(budget=6, eps=255, returns="best").run(TinySegmenter(), images, labels)
    assert (best.scores < run.scores).all()


@pytest.mark.parametrize("name", DECLARING)
def test_returns_best_is_the_lowest_proxy_candidate_queried(name: str) -> None:
    """With returns=best, result and checkpoints are the first lowest-proxy candidate among
    those the model answered (recomputed here, not read from the oracle), and the candidates
    queried are the same as with returns=iterate: the choice changes the report, not the search."""
    images, labels = toy_batch(2, 14, 14, seed=2)
    cps = (7, 15, 30)
    with queried() as seen:
        run = registry.attack(name)(budget=30, eps=16, seed=4, returns="best").run(
            TinySegmenter(), images, labels, checkpoints=cps)
    with queried() as seen_iterate:
        registry.attack(name)(budget=30, eps=16, seed=4).run(TinySegmenter(), images, labels)
    assert len(seen) == len(seen_iterate) and all(
        a == c and torch.equal(b, d) for (a, b), (c, d) in zip(seen, seen_iterate))
    for i in range(2):
        mine = torch.stack([x for owner, x in seen if owner == i])
        scores = proxy_of(mine, labels[i].expand(len(mine), -1, -1)).tolist()
        for c in cps:
            first_best = min(range(c), key=lambda k: (scores[k], k))
            assert torch.equal(run.checkpoint_images[c][i], mine[first_best]), f"{name} at {c}"
        assert run.history[i] == [min(scores[: k + 1]) for k in range(len(scores))]


@pytest.mark.parametrize("name", DECLARING)
def test_a_checkpoint_at_a_completed_step_holds_the_new_iterate(name: str) -> None:
    """Budgets read off one run equal separate runs, also where a step ends exactly at the
    checkpoint (NES q=2: 1 + 4k queries; ZO-SignSGD q=2: 3k; Bandits: 1 + 2k)."""
    cls = registry.attack(name)
    knobs: dict[str, Any] = {} if name == "bandits" else {"q": 2}
    images, labels = toy_batch(2, 16, 16, seed=4)
    cps = (5, 9, 12, 13)
    long = cls(budget=13, seed=1, eps=32, **knobs).run(TinySegmenter(), images, labels,
                                                       checkpoints=cps)
    moved = False
    for b in cps:
        short = cls(budget=b, seed=1, eps=32, **knobs).run(TinySegmenter(), images, labels)
        assert torch.equal(long.checkpoint_images[b], short.images), f"{name}'s image at {b}"
        assert torch.equal(long.checkpoints[b], confusion(short.predictions, labels, 4))
        assert [h[:b] for h in long.history] == short.history
        assert [h[-1] for h in short.history] == short.scores.tolist()
        moved |= not torch.equal(short.images, images)
    assert moved, f"{name} never left the clean image: the test checks nothing"


def test_set_iterate_outside_the_ball_is_refused() -> None:
    images, labels = toy_batch(1, 8, 8)
    o = OracleRun(QueryCounter(TinySegmenter(), 5, 1), images, labels, Proxy(4), 8 / 255, [0],
               returns="iterate")
    with pytest.raises(SegtkError, match="outside the ε-ball"):
        o.set_iterate((images + 9 / 255).clamp(0, 1))
    with pytest.raises(SegtkError, match="outside the ε-ball or \\[0,1\\]"):
        o.set_iterate(torch.full_like(images, -1 / 255))


def test_returns_iterate_needs_an_attack_that_declares_one() -> None:
    with pytest.raises(SegtkError, match="cannot return its iterate"):
        registry.attack("dla")(returns="iterate")
    with pytest.raises(SegtkError, match="returns"):
        registry.attack("nes")(returns="last")


def test_the_bench_tables_nes_at_10_queries_as_the_clean_image() -> None:
    """The stored 8-bit image the bench scores at 10 queries is the clean one for NES, and a
    spec can ask for the best candidate instead (`nes:returns=best`)."""
    pytest.importorskip("segtk_demo")
    images = ("scene_000", "scene_001")
    for rec in run_shard(Shard("demo", "demo", None, "nes", 0, 10, (10,), images, 8.0, 0, 1)):
        assert rec["confusions"]["10"] == rec["clean_confusion"], rec["image"]
        assert rec["queries"] == 10
    assert build_spec("nes:returns=best", budget=10, eps=8, seed=0).params.returns == "best"
    assert build_spec("nes", budget=10, eps=8, seed=0).params.returns == "iterate"


def test_run_json_records_returns_only_for_an_iterate() -> None:
    """Runs recorded before `returns` existed returned their best candidate: they resume
    unchanged with returns=best, and a run returning its iterate says so in run.json."""
    assert run_settings(registry.attack("nes")().params)["params"]["returns"] == "iterate"
    assert "returns" not in run_settings(registry.attack("nes")(returns="best").params)["params"]
    assert "returns" not in run_settings(registry.attack("dla")().params)["params"]
