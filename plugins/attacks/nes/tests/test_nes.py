"""NES: the shared suite plus its query pattern (1 clean query, then exactly q per step)."""

from __future__ import annotations

import torch

from segtk.testing import AttackSuite, TinySegmenter, toy_batch
from segtk_nes import NESAttack


class CallSizes(TinySegmenter):
    """TinySegmenter that records how many images each model call carried."""

    def __init__(self) -> None:
        super().__init__()
        self.sizes: list[int] = []

    def predict(self, images: torch.Tensor) -> torch.Tensor:
        self.sizes.append(images.shape[0])
        return super().predict(images)


class TestNES(AttackSuite):
    attack_cls = NESAttack


def test_exactly_q_queries_per_step() -> None:
    images, labels = toy_batch(1, 12, 12)
    model = CallSizes()
    result = NESAttack(budget=1 + 3 * 6 + 4, q=6).run(model, images, labels)
    assert model.sizes == [1, 6, 6, 6, 4]
    assert result.queries.tolist() == [23]


def test_anytime_prefix() -> None:
    images, labels = toy_batch(2, 12, 12, seed=4)
    long = NESAttack(budget=33, eps=16, sigma=4.0).run(TinySegmenter(), images, labels)
    short = NESAttack(budget=16, eps=16, sigma=4.0).run(TinySegmenter(), images, labels)
    assert [h[:16] for h in long.history] == short.history


def test_odd_q_is_refused() -> None:
    try:
        NESAttack(q=7)
    except Exception as exc:
        assert "even" in str(exc)
    else:
        raise AssertionError("q=7 was accepted")
