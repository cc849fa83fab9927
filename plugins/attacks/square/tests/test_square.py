"""Square Attack: the shared suite plus the stripes, the schedule and square-shaped updates."""

from __future__ import annotations

import torch

from segtk.core import project
from segtk.testing import AttackSuite, toy_batch
from segtk.testing import RecordingSegmenter as Recorder
from segtk_square import SquareAttack
from segtk_square.attack import p_selection


class TestSquare(AttackSuite):
    attack_cls = SquareAttack


def test_schedule_matches_the_paper_at_10000_queries() -> None:
    expected = {
        0: 0.05,
        10: 0.05,
        11: 0.025,
        50: 0.025,
        51: 0.0125,
        201: 0.05 / 8,
        501: 0.05 / 16,
        1001: 0.05 / 32,
        2001: 0.05 / 64,
        4001: 0.05 / 128,
        6001: 0.05 / 256,
        8001: 0.05 / 512,
        9999: 0.05 / 512,
    }
    assert {it: p_selection(0.05, it, 10000) for it in expected} == expected
    assert p_selection(0.05, 100, 200) == 0.05 / 128  # half the budget: 5 000 of 10 000


def test_clean_then_vertical_stripes_then_squares() -> None:
    images, labels = toy_batch(1, 20, 20, seed=1)
    eps = 8 / 255
    model = Recorder()
    SquareAttack(budget=12, eps=8).run(model, images, labels)
    clean = images[0]
    assert torch.equal(model.seen[0], clean)
    delta = model.seen[1] - clean
    stripes = project(clean + eps * delta.sign()[:, :1, :], clean, eps)
    assert torch.equal(model.seen[1], stripes)  # one ±ε value per channel and column
    # The first update is relative to the stripes: a changed s×s square, s = round(√(0.05·400)).
    changed = (model.seen[2] != model.seen[1]).any(0).nonzero()
    assert len(changed) > 0
    assert int(changed[:, 0].max() - changed[:, 0].min()) < 4
    assert int(changed[:, 1].max() - changed[:, 1].min()) < 4


def test_is_not_anytime() -> None:
    assert SquareAttack.anytime is False
