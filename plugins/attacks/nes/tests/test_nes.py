"""NES: the shared suite plus its query pattern (1 clean query, then exactly q per step)."""

from __future__ import annotations

from segtk.testing import AttackSuite, toy_batch
from segtk.testing import RecordingSegmenter as CallSizes
from segtk_nes import NESAttack


class TestNES(AttackSuite):
    attack_cls = NESAttack


def test_exactly_q_queries_per_step() -> None:
    images, labels = toy_batch(1, 12, 12)
    model = CallSizes()
    result = NESAttack(budget=1 + 3 * 6 + 4, q=6).run(model, images, labels)
    assert model.sizes == [1, 6, 6, 6, 4]
    assert result.queries.tolist() == [23]


def test_odd_q_is_refused() -> None:
    try:
        NESAttack(q=7)
    except Exception as exc:
        assert "even" in str(exc)
    else:
        raise AssertionError("q=7 was accepted")
