"""SignHunter: the shared suite plus the ±ε vertex property and the flip schedule."""

from __future__ import annotations

import torch

from segtk.core import project
from segtk.testing import AttackSuite, toy_batch
from segtk.testing import RecordingSegmenter as Recorder
from segtk_signhunter import SignHunterAttack
from segtk_signhunter.attack import _State


class TestSignHunter(AttackSuite):
    attack_cls = SignHunterAttack


class TestSignHunterHWC(AttackSuite):
    attack_cls = SignHunterAttack
    params = {"order": "hwc"}


def _first_flips(order: str) -> list[torch.Tensor]:
    images, labels = toy_batch(1, 10, 14)
    images = images * 0.5 + 0.25
    model = Recorder()
    SignHunterAttack(budget=6, eps=8, order=order).run(model, images, labels)
    return [(x - images[0]).sign() for x in model.seen[2:]]  # after clean and x + ε·1


def test_default_chw_order_flips_whole_colour_channels_so_the_noise_is_coloured() -> None:
    flips = _first_flips("chw")
    assert (flips[0] == -1).all()  # level 0 flips the all-+ε start
    # level 1, chunk 0 flips the first half of the C·H·W vector (whatever level 0 kept, the
    # signs were uniform): all of channel 0 and half of channel 1, none of channel 2
    half = flips[1]
    assert torch.equal(half[0], -half[2])  # opposite colours at every pixel


def test_hwc_order_gives_grey_bands() -> None:
    half = _first_flips("hwc")[1]  # the first half of H·W·3 = the top 5 of 10 rows, all channels
    assert torch.equal(half[0], half[1]) and torch.equal(half[1], half[2])
    assert torch.equal(half[:, :5], -half[:, 5:])


def test_candidates_are_vertices_of_the_eps_ball() -> None:
    images, labels = toy_batch(1, 10, 14)
    eps = 8 / 255
    model = Recorder()
    SignHunterAttack(budget=20, eps=8).run(model, images, labels)
    assert torch.equal(model.seen[0], images[0])
    assert torch.equal(model.seen[1], project(images[0] + eps, images[0], eps))
    for candidate in model.seen[1:]:
        plus = project(images[0] + eps, images[0], eps)
        minus = project(images[0] - eps, images[0], eps)
        assert bool(((candidate == plus) | (candidate == minus)).all())


def test_flip_schedule_covers_each_level_then_restarts() -> None:
    st, n = _State(torch.ones(5)), 5
    chunks = [SignHunterAttack._next_chunk(st, n) for _ in range(12)]
    spans = [(c.start, c.stop) for c in chunks]
    assert spans[:6] == [(0, 5), (0, 3), (3, 5), (0, 2), (2, 4), (4, 5)]
    assert spans[6:11] == [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5)]
    assert spans[11] == (0, 5)  # ⌈log₂ 5⌉ = 3 levels after h = 0, then a new sweep
