"""ZO-SignSGD: the shared suite plus its query pattern (q + 1 per step, the base first)."""

from __future__ import annotations

import torch

from segtk.testing import AttackSuite, TinySegmenter, toy_batch
from segtk_zo_signsgd import ZOSignSGDAttack


class Recorder(TinySegmenter):
    """TinySegmenter that records each call's images."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[torch.Tensor] = []

    def predict(self, images: torch.Tensor) -> torch.Tensor:
        self.batches.append(images.clone())
        return super().predict(images)


class TestZOSignSGD(AttackSuite):
    attack_cls = ZOSignSGDAttack


def test_q_plus_one_queries_per_step_base_first() -> None:
    images, labels = toy_batch(1, 12, 12)
    model = Recorder()
    ZOSignSGDAttack(budget=2 * 5 + 3, q=4).run(model, images, labels)
    assert [len(c) for c in model.batches] == [5, 5, 3]
    assert torch.equal(model.batches[0][0], images[0])  # the first base is the clean image
    probes = model.batches[0][1:] - images[0]
    assert torch.allclose(probes.flatten(1).norm(dim=1), torch.full((4,), 25.5 / 255), atol=1e-3)


def test_anytime_prefix() -> None:
    images, labels = toy_batch(2, 12, 12, seed=4)
    long = ZOSignSGDAttack(budget=35).run(TinySegmenter(), images, labels)
    short = ZOSignSGDAttack(budget=17).run(TinySegmenter(), images, labels)
    assert [h[:17] for h in long.history] == short.history
