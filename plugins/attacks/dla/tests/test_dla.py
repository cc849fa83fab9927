"""DLA: the shared attack suite, Algorithm 1's mechanics, and a real-model check."""

from __future__ import annotations

import torch

from segtk.core.attack import Oracle
from segtk.core.proxy import Proxy
from segtk.core.segmenter import QueryCounter
from segtk.testing import AttackSuite, RecordingSegmenter, TinySegmenter, toy_batch
from segtk_dla import DLA
from segtk_dla.attack import _State


class TestDLASuite(AttackSuite):
    attack_cls = DLA


def test_flip_schedule_covers_whole_image_then_halves_then_lines() -> None:
    st = _State()
    blocks = [DLA._next_flip(st, 5) for _ in range(1 + 2 + 3 + 5 + 1)]
    # n=0: whole; n=1: c=3 -> [0,3),[3,5); n=2: c=2 -> 3 non-empty; n=3: c=1 -> 5 lines; restart
    assert blocks == [
        (0, 5),
        (0, 3), (3, 5),
        (0, 2), (2, 4), (4, 5),
        (0, 1), (1, 2), (2, 3), (3, 4), (4, 5),
        (0, 5),
    ]  # fmt: skip


def test_single_line_image_flips_whole_image() -> None:
    st = _State()
    assert [DLA._next_flip(st, 1) for _ in range(3)] == [(0, 1)] * 3


def test_candidates_are_stripes_of_plus_minus_eps() -> None:
    images, labels = toy_batch(1, 12, 10)
    images = images * 0.5 + 0.25  # away from the box, so no clipping
    model = RecordingSegmenter()
    DLA(budget=20, eps=8).run(model, images, labels)
    assert torch.equal(model.seen[0], images[0])  # first query: the clean image
    for k, x in enumerate(model.seen[1:], start=1):
        delta = x - images[0]
        assert torch.allclose(delta.abs(), torch.full_like(delta, 8 / 255), atol=1e-6)
        delta = delta.sign()  # float rounding differs per channel; the signs must not
        assert torch.equal(delta[0], delta[1]) and torch.equal(delta[1], delta[2])
        rows_const = bool((delta[0] == delta[0][:, :1]).all())
        cols_const = bool((delta[0] == delta[0][:1, :]).all())
        assert rows_const or cols_const, f"query {k} is not a stripe pattern"
        if k <= 4:  # exploration alternates: t=1 horizontal (per row), t=2 vertical, ...
            assert rows_const if k % 2 == 1 else cols_const


def test_calibration_keeps_flip_only_when_proxy_drops() -> None:
    images, labels = toy_batch(1, 16, 16, seed=3)
    model = TinySegmenter()
    counter = QueryCounter(model, 30, 1)
    oracle = Oracle(counter, images, labels, Proxy(4), 8 / 255, [0])
    DLA(budget=30).attack(oracle)
    history = oracle.history[0]
    assert all(a >= b for a, b in zip(history, history[1:]))  # best-so-far never rises
    assert len(history) == 30


def test_exploration_share_sets_the_phase_length() -> None:
    images, labels = toy_batch(1, 8, 8)
    model = RecordingSegmenter()
    DLA(budget=10, exploration=0.5).run(model, images, labels)
    # queries 1..5 after the clean one are exploration draws: they alternate direction
    deltas = [(x - images[0])[0].sign() for x in model.seen[1:6]]
    kinds = ["rows" if bool((d == d[:, :1]).all()) else "cols" for d in deltas]
    assert kinds[:4] == ["rows", "cols", "rows", "cols"]
