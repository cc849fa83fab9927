"""SimBA: the shared suite for both bases, plus the basis and the +α-then-−α query pattern."""

from __future__ import annotations

import torch

from segtk.testing import AttackSuite, TinySegmenter, toy_batch
from segtk.testing import RecordingSegmenter as Recorder
from segtk_simba import SimBAAttack
from segtk_simba.attack import _dct_basis


class TestSimBA(AttackSuite):
    attack_cls = SimBAAttack


class TestSimBAPixel(AttackSuite):
    attack_cls = SimBAAttack
    params = {"basis": "pixel"}


def test_dct_basis_is_orthonormal() -> None:
    rows = _dct_basis(13, 13).double()
    assert torch.allclose(rows @ rows.T, torch.eye(13, dtype=torch.float64), atol=1e-5)


def test_pixel_trials_change_one_value_and_minus_follows_a_failed_plus() -> None:
    images, labels = toy_batch(1, 12, 12, seed=2)
    model = Recorder()
    SimBAAttack(budget=25, basis="pixel", eps=8).run(model, images, labels)
    assert torch.equal(model.seen[0], images[0])
    scores = [float(s) for s in _proxy(model.seen, labels)]
    best, best_score, plus = model.seen[0], scores[0], None
    for candidate, score in zip(model.seen[1:], scores[1:]):
        changed = (candidate != best).nonzero()
        assert len(changed) == 1  # one coordinate, moved to ±ε (α = 50/255 is projected)
        gap = float((candidate - images[0]).abs().max())
        assert abs(gap - 8 / 255) < 1e-6 or candidate.min() == 0 or candidate.max() == 1
        if plus is not None:  # the previous trial failed: this is its mirror image
            assert torch.equal(changed, (plus != best).nonzero())
            plus = None
        elif score >= best_score:
            plus = candidate
        if score < best_score:
            best, best_score = candidate, score


def _proxy(images: list[torch.Tensor], labels: torch.Tensor) -> torch.Tensor:
    from segtk.core.proxy import Proxy

    preds = TinySegmenter().predict(torch.stack(images))
    return Proxy(4)(preds, labels.expand_as(preds))
