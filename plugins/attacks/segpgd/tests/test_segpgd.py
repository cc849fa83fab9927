"""SegPGD: the shared suite, plus the λ(t) schedule and the split of the loss."""

from __future__ import annotations

import torch

from segtk.testing import AttackSuite
from segtk_segpgd import SegPGDAttack
from segtk_segpgd.attack import segpgd_lambda


class TestSegPGD(AttackSuite):
    attack_cls = SegPGDAttack


def test_lambda_grows_from_zero_towards_one_half() -> None:
    assert [segpgd_lambda(t, 4) for t in (1, 2, 3, 4)] == [0.0, 1 / 8, 2 / 8, 3 / 8]
    assert segpgd_lambda(1, 0) == 0.0  # a one-pass run has no iteration to weight


def test_loss_weights_right_pixels_by_one_minus_lambda_and_wrong_ones_by_lambda() -> None:
    logits = torch.tensor([[[[2.0, 0.0]], [[0.0, 2.0]]]])  # [1,2,1,2]: predicts 0 then 1
    targets = torch.tensor([[[0, 0]]])  # the first pixel is right, the second wrong
    ce = torch.nn.functional.cross_entropy(logits, targets, reduction="none")
    attack = SegPGDAttack()
    first = attack.pixel_loss(logits, targets, 1, 4)
    third = attack.pixel_loss(logits, targets, 3, 4)
    assert torch.allclose(first, ce * torch.tensor([[[1.0, 0.0]]]))
    assert torch.allclose(third, ce * torch.tensor([[[0.75, 0.25]]]))
