"""PGD: the shared suite, plus the step size and start of Madry et al.'s PGD."""

from __future__ import annotations

import torch

from segtk.core import EPS_TOLERANCE
from segtk.testing import AttackSuite, TinySegmenter, toy_batch
from segtk_pgd import PGDAttack


class TestPGD(AttackSuite):
    attack_cls = PGDAttack


class Recorder(TinySegmenter):
    """Keeps every image a forward and backward pass saw, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[torch.Tensor] = []

    def differentiable_logits(self, images: torch.Tensor) -> torch.Tensor:
        self.seen.extend(images.detach().clone())
        return super().differentiable_logits(images)


def test_steps_are_alpha_sized_signed_moves_from_the_start() -> None:
    images, labels = toy_batch(1, 16, 16, seed=2)
    model = Recorder()
    PGDAttack(budget=6, eps=8, step=0.25, random_start=False).run(model, images, labels)
    assert len(model.seen) == 6 and torch.equal(model.seen[0], images[0])  # x_0 = x
    alpha = 0.25 * 8 / 255
    for before, after in zip(model.seen, model.seen[1:]):
        move = (after - before).abs()
        assert float(move.max()) <= alpha + EPS_TOLERANCE
        assert float(move.max()) >= alpha - EPS_TOLERANCE  # a full step somewhere


def test_random_start_is_uniform_in_the_ball_and_seeded() -> None:
    images, labels = toy_batch(1, 32, 32, seed=2)
    images = images.clamp(0.1, 0.9)  # no value at the box's edge: the start is not cut
    first = []
    for seed in (1, 1, 2):
        model = Recorder()
        PGDAttack(budget=1, eps=8).run(model, images, labels, seeds=[seed])
        first.append(model.seen[0])
    delta = (first[0] - images[0]).flatten()
    assert torch.equal(first[0], first[1]) and not torch.equal(first[0], first[2])
    assert float(delta.abs().max()) <= 8 / 255 + EPS_TOLERANCE
    assert float(delta.abs().mean()) > 8 / 255 / 4  # spread over the ball (uniform: ε/2)
