"""Bandits_TD: the shared suite plus its query pattern and tiled probes."""

from __future__ import annotations

import torch

from segtk.testing import AttackSuite, TinySegmenter, toy_batch
from segtk_bandits import BanditsAttack


class Recorder(TinySegmenter):
    """TinySegmenter that records each call's images."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[torch.Tensor] = []

    def predict(self, images: torch.Tensor) -> torch.Tensor:
        self.batches.append(images.clone())
        return super().predict(images)


class TestBandits(AttackSuite):
    attack_cls = BanditsAttack


def test_two_queries_per_step_with_tiled_probes() -> None:
    images, labels = toy_batch(1, 16, 16)
    model = Recorder()
    BanditsAttack(budget=8, prior_size=4, eps=255).run(model, images, labels)
    assert [len(b) for b in model.batches] == [1, 2, 2, 2, 1]
    probe = model.batches[1][0] - images[0]  # first step: prior 0, probe = η·up(δu)/‖·‖
    tile = probe[:, :4, :4]  # a 16x16 image over a 4x4 prior grid: 4x4 tiles
    assert torch.allclose(tile, tile[:, :1, :1].expand(3, 4, 4), atol=1e-6)
    assert not torch.allclose(probe[:, :4, :4], probe[:, 4:8, :4], atol=1e-6)
    assert abs(float(probe.norm()) - 25.5 / 255) < 1e-3


def test_anytime_prefix() -> None:
    images, labels = toy_batch(2, 12, 12, seed=4)
    long = BanditsAttack(budget=30).run(TinySegmenter(), images, labels)
    short = BanditsAttack(budget=14).run(TinySegmenter(), images, labels)
    assert [h[:14] for h in long.history] == short.history
