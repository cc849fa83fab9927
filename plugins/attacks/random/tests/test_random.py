"""Random attack: the shared suite plus Eq. 2's step size and the clean first query."""

from __future__ import annotations

import torch

from segtk.core import EPS_TOLERANCE, Proxy
from segtk.testing import AttackSuite, TinySegmenter, toy_batch
from segtk.testing import RecordingSegmenter as Recorder
from segtk_random import RandomAttack


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
