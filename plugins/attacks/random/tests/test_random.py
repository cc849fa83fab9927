"""Random attack: the shared suite plus Eq. 2's step size and the clean first query."""

from __future__ import annotations

import torch

from segtk.core.attack import EPS_TOLERANCE
from segtk.core.proxy import Proxy
from segtk.testing import AttackSuite, TinySegmenter, toy_batch
from segtk_random import RandomAttack


class Recorder(TinySegmenter):
    """TinySegmenter that keeps every image it was asked about, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[torch.Tensor] = []

    def predict(self, images: torch.Tensor) -> torch.Tensor:
        self.seen.extend(images.clone())
        return super().predict(images)


class TestRandom(AttackSuite):
    attack_cls = RandomAttack


def test_first_query_is_clean_and_steps_stay_within_eps_over_16() -> None:
    images, labels = toy_batch(1, 20, 20, seed=3)
    model = Recorder()
    RandomAttack(budget=30, eps=16).run(model, images, labels)
    assert len(model.seen) == 30 and torch.equal(model.seen[0], images[0])
    proxy = Proxy(4)
    best, best_score = model.seen[0], float("inf")
    for candidate in model.seen:
        if best_score < float("inf"):
            assert float((candidate - best).abs().max()) <= 16 / 255 / 16 + EPS_TOLERANCE
        score = float(proxy(TinySegmenter().predict(candidate[None]), labels)[0])
        if score < best_score:
            best, best_score = candidate, score


def test_anytime_prefix() -> None:
    images, labels = toy_batch(2, 12, 12, seed=4)
    long = RandomAttack(budget=25).run(TinySegmenter(), images, labels)
    short = RandomAttack(budget=9).run(TinySegmenter(), images, labels)
    assert [h[:9] for h in long.history] == short.history
