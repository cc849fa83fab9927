"""colour-blocks: the shared attack suite and the shape of its candidates."""

from __future__ import annotations

import torch

from segtk.core import AttackResult, Segmenter
from segtk.testing import AttackSuite
from segtk_colour_blocks import ColourBlocks


class TestColourBlocks(AttackSuite):
    attack_cls = ColourBlocks


class TestColourBlocksNoExploration(AttackSuite):
    attack_cls = ColourBlocks
    params = {"explore": 0}


class ChannelZeroSign(Segmenter):
    """Class 0 where channel 0 is at least 0.5, class 1 below: each pixel's decision depends on
    its own value only, so a block's flip changes exactly the labels inside it."""

    name = "channel-zero-sign"
    classes = ["zero", "one"]

    def predict(self, images: torch.Tensor) -> torch.Tensor:
        return (images[:, 0] < 0.5).long()


def local_run(budget: int, **params) -> AttackResult:
    images = torch.full((1, 3, 32, 32), 0.5)
    labels = torch.zeros(1, 32, 32, dtype=torch.long)
    attack = ColourBlocks(budget=budget, eps=8, explore=0, cells=2, finest=8, rounds=2, **params)
    return attack.run(ChannelZeroSign(), images, labels)


def test_each_cell_is_credited_with_the_labels_inside_it() -> None:
    # The best image moves channel 0 down everywhere: every pixel wrong, proxy 0. Crediting each
    # flipped cell with its own labels finds it within 40 queries; judging only whole trials
    # by the proxy does not.
    assert float(local_run(40).scores[0]) == 0.0
