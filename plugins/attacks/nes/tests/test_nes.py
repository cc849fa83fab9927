"""NES: the shared suite plus its query pattern (1 clean query, then 2q per step)."""

from __future__ import annotations

import pytest
import torch

from segtk.core import SegtkError
from segtk.testing import AttackSuite, toy_batch
from segtk.testing import RecordingSegmenter as CallSizes
from segtk_nes import NESAttack


class TestNES(AttackSuite):
    attack_cls = NESAttack


def test_q_samples_cost_two_queries_each_as_in_blackboxbench() -> None:
    images, labels = toy_batch(1, 12, 12)
    model = CallSizes()
    result = NESAttack(budget=1 + 3 * 6 + 4, q=3, returns="best").run(model, images, labels)
    assert model.sizes == [1, 6, 6, 6, 4]  # q = 3 samples -> 3 antithetic pairs per step
    assert result.queries.tolist() == [23]
    model = CallSizes()  # returning its iterate: one uncounted evaluation of each new iterate
    result = NESAttack(budget=1 + 3 * 6 + 4, q=3).run(model, images, labels)
    assert model.sizes == [1, 6, 1, 6, 1, 6, 1, 4]
    assert result.queries.tolist() == [23]


def test_default_step_is_ten_antithetic_pairs() -> None:
    images, labels = toy_batch(1, 10, 10)
    model = CallSizes()
    NESAttack(budget=50, returns="best").run(model, images, labels)  # queries only
    assert model.sizes == [1, 20, 20, 9]
    step = model.batches[1][0]
    pairs = model.batches[1]  # x + σδ_j and x − σδ_j are mirror images around the clean image
    assert torch.allclose(pairs[0::2] + pairs[1::2], 2 * images[0].expand_as(pairs[0::2]), atol=1e-6)
    assert not torch.equal(step, images[0])


def test_q_below_one_is_refused() -> None:
    with pytest.raises(SegtkError, match="q must be at least 1"):
        NESAttack(q=0)
