"""ZO-SignSGD: the shared suite plus its query pattern (q + 1 per step, the base first)."""

from __future__ import annotations

import torch

from segtk.testing import AttackSuite, toy_batch
from segtk.testing import RecordingSegmenter as Recorder
from segtk_zo_signsgd import ZOSignSGDAttack


class TestZOSignSGD(AttackSuite):
    attack_cls = ZOSignSGDAttack


def test_q_plus_one_queries_per_step_base_first() -> None:
    images, labels = toy_batch(1, 12, 12)
    model = Recorder()
    ZOSignSGDAttack(budget=2 * 5 + 3, q=4, returns="best").run(model, images, labels)
    assert [len(c) for c in model.batches] == [5, 5, 3]
    assert torch.equal(model.batches[0][0], images[0])  # the first base is the clean image
    probes = model.batches[0][1:] - images[0]
    assert torch.allclose(probes.flatten(1).norm(dim=1), torch.full((4,), 25.5 / 255), atol=1e-3)
