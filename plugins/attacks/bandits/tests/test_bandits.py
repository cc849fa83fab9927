"""Bandits_TD: the shared suite plus its query pattern and tiled probes."""

from __future__ import annotations

import torch

from segtk.testing import AttackSuite, toy_batch
from segtk.testing import RecordingSegmenter as Recorder
from segtk_bandits import BanditsAttack


class TestBandits(AttackSuite):
    attack_cls = BanditsAttack


def test_two_queries_per_step_with_tiled_probes() -> None:
    images, labels = toy_batch(1, 16, 16)
    model = Recorder()
    BanditsAttack(budget=8, prior_size=4, eps=255, returns="best").run(model, images, labels)
    assert [len(b) for b in model.batches] == [1, 2, 2, 2, 1]  # queries only (no evaluation)
    probe = model.batches[1][0] - images[0]  # first step: prior 0, probe = η·up(δu)/‖·‖
    tile = probe[:, :4, :4]  # a 16x16 image over a 4x4 prior grid: 4x4 tiles
    assert torch.allclose(tile, tile[:, :1, :1].expand(3, 4, 4), atol=1e-6)
    assert not torch.allclose(probe[:, :4, :4], probe[:, 4:8, :4], atol=1e-6)
    assert abs(float(probe.norm()) - 2.55 / 255) < 1e-5  # η = fd_eta
