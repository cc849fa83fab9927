"""CosPGD: the shared suite, plus the cosine weight of each pixel's loss."""

from __future__ import annotations

import pytest
import torch

from segtk.core import SegtkError
from segtk.testing import AttackSuite
from segtk_cospgd import CosPGDAttack
from segtk_cospgd.attack import cosine_weight


class TestCosPGD(AttackSuite):
    attack_cls = CosPGDAttack


class TestCosPGDSigmoid(AttackSuite):
    attack_cls = CosPGDAttack
    params = {"distribution": "sigmoid"}


def test_weight_is_the_cosine_of_the_distribution_and_the_one_hot_label() -> None:
    logits = torch.tensor([[[[1.0]], [[2.0]], [[-1.0]]]], requires_grad=True)  # [1,3,1,1]
    targets = torch.tensor([[[1]]])
    p = torch.softmax(logits.detach()[0, :, 0, 0], 0)
    weight = cosine_weight(logits, targets, "softmax")
    assert torch.allclose(weight, (p[1] / p.norm()).reshape(1, 1, 1))
    s = torch.sigmoid(logits.detach()[0, :, 0, 0])
    assert torch.allclose(cosine_weight(logits, targets, "sigmoid"), (s[1] / s.norm()).reshape(1, 1, 1))
    assert not weight.requires_grad  # a constant of the gradient, as in the authors' code


def test_loss_is_the_weighted_cross_entropy() -> None:
    logits = torch.randn(2, 4, 3, 5, generator=torch.Generator().manual_seed(0))
    targets = torch.randint(0, 4, (2, 3, 5), generator=torch.Generator().manual_seed(1))
    ce = torch.nn.functional.cross_entropy(logits, targets, reduction="none")
    got = CosPGDAttack().pixel_loss(logits, targets, 1, 9)
    assert torch.allclose(got, cosine_weight(logits, targets, "softmax") * ce)


def test_unknown_distribution_is_refused() -> None:
    with pytest.raises(SegtkError, match="unknown distribution 'tanh'"):
        CosPGDAttack(distribution="tanh")
