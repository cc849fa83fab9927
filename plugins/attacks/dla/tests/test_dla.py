"""DLA: the shared attack suite, Algorithm 1's mechanics, and a real-model check."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import segtk
from segtk.attackkit import next_flip
from segtk.core import Segmenter, SegtkError
from segtk.testing import (
    AttackSuite,
    RecordingSegmenter,
    TinySegmenter,
    demo_batch,
    result_digest,
    toy_batch,
)
from segtk_dla import DLA
from segtk_dla.attack import _State


class TestDLASuite(AttackSuite):
    attack_cls = DLA


def test_flip_schedule_covers_whole_image_then_halves_then_lines() -> None:
    st = _State()
    blocks = [next_flip(st, 5) for _ in range(1 + 2 + 3 + 5 + 1)]
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
    assert [next_flip(st, 1) for _ in range(3)] == [(0, 1)] * 3


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


class Scripted(Segmenter):
    """Answers query k with `script[k]` pixels right (of a label map of class 0): the test sets
    every proxy value (pixel accuracy) and keeps every queried image."""

    name, classes = "scripted", ["zero", "one"]

    def __init__(self, script: list[int]) -> None:
        self.script, self.seen = list(script), list[torch.Tensor]()

    def predict(self, images: torch.Tensor) -> torch.Tensor:
        out = torch.ones(images.shape[0], images[0, 0].numel(), dtype=torch.long)
        for row, image in enumerate(images):
            self.seen.append(image.clone())
            out[row, : self.script[len(self.seen) - 1]] = 0
        return out.view(images.shape[0], *images.shape[2:])


def test_calibration_keeps_flip_only_when_proxy_drops() -> None:
    """Horizontal DLA on 8 rows, budget 20: the clean query, 4 exploration draws, then the 15
    blocks of the flip schedule (the whole image, halves, quarters, single rows). Each flip is
    made from the image with the lowest proxy so far, so a flip stays only if its proxy fell
    strictly below that: one that ties or rises is undone before the next flip."""
    h, w = 8, 6
    clean = toy_batch(1, h, w, seed=2)[0] * 0.5 + 0.25  # away from [0,1]: every flip is exact
    #          clean  explore (drop, -, drop, tie)  calibration: drops at 5, 8, 11, 14, 17
    script = [40, 38, 39, 36, 36, 30, 30, 35, 29, 31, 29, 20, 25, 25, 19, 19, 30, 10, 40, 10]
    model = Scripted(script)
    result = DLA(budget=20, eps=8, proxy="pacc", direction="horizontal").run(
        model, clean, torch.zeros(1, h, w, dtype=torch.long))
    lo, hi = clean[0] - 8 / 255, clean[0] + 8 / 255  # the ε-box: clean lies inside [0,1]
    blocks = [(0, 8), (0, 4), (4, 8), (0, 2), (2, 4), (4, 6), (6, 8)] + [(r, r + 1) for r in range(8)]
    kept, best = model.seen[3], 36  # the last exploration draw that fell below the clean proxy
    for k, (start, stop) in enumerate(blocks, start=5):
        flipped = kept.clone()
        flipped[:, start:stop] = torch.where(kept[:, start:stop] == hi[:, start:stop],
                                             lo[:, start:stop], hi[:, start:stop])
        assert torch.equal(model.seen[k], flipped), f"query {k}: not rows {start}..{stop} of the kept image flipped"
        if script[k] < best:
            kept, best = model.seen[k], script[k]
    assert best == 10 and torch.equal(result.images[0], kept)
    assert result.history[0] == pytest.approx([min(script[: k + 1]) / (h * w) for k in range(20)])


def test_exploration_share_sets_the_phase_length() -> None:
    images, labels = toy_batch(1, 8, 8)
    model = RecordingSegmenter()
    DLA(budget=10, exploration=0.5).run(model, images, labels)
    # queries 1..5 after the clean one are exploration draws: they alternate direction
    deltas = [(x - images[0])[0].sign() for x in model.seen[1:6]]
    kinds = ["rows" if bool((d == d[:, :1]).all()) else "cols" for d in deltas]
    assert kinds[:4] == ["rows", "cols", "rows", "cols"]


# --- Table 1 / Table 3 variants: every one passes the shared suite ------------------------------

VARIANTS = {
    "Horizontal": {"direction": "horizontal"},
    "Vertical": {"direction": "vertical"},
    "RandomNoise": {"direction": "random"},
    "RandomNoiseContinuous": {"direction": "random", "values": "continuous"},
    "RandomCalibration": {"calibration": "random"},
    "Continuous": {"values": "continuous"},
    "RandomAttack": {"direction": "random", "values": "continuous", "calibration": "random"},
}
for _name, _params in VARIANTS.items():
    globals()[f"TestDLA{_name}Suite"] = type(
        f"TestDLA{_name}Suite", (AttackSuite,), {"attack_cls": DLA, "params": _params}
    )


def _deltas(params: dict, budget: int = 24, h: int = 12, w: int = 10) -> list[torch.Tensor]:
    """Every queried perturbation after the clean query (images kept away from the [0,1] box)."""
    images, labels = toy_batch(1, h, w, seed=6)
    images = images * 0.5 + 0.25
    model = RecordingSegmenter()
    DLA(budget=budget, eps=8, **params).run(model, images, labels)
    assert len(model.seen) == budget
    return [x - images[0] for x in model.seen[1:]]


def _row_constant(d: torch.Tensor) -> bool:
    return bool((d == d[:, :, :1]).all())


def _col_constant(d: torch.Tensor) -> bool:
    return bool((d == d[:, :1, :]).all())


def test_horizontal_only_ever_queries_row_constant_perturbations() -> None:
    deltas = _deltas({"direction": "horizontal"})
    assert all(_row_constant(d.sign()) and not _col_constant(d.sign()) for d in deltas[:4])
    assert all(_row_constant(d.sign()) for d in deltas)  # calibration flips rows too


def test_vertical_only_ever_queries_column_constant_perturbations() -> None:
    deltas = _deltas({"direction": "vertical"})
    assert all(_col_constant(d.sign()) and not _row_constant(d.sign()) for d in deltas[:4])
    assert all(_col_constant(d.sign()) for d in deltas)


def test_continuous_values_are_lines_inside_the_ball_not_all_plus_minus_eps() -> None:
    eps = 8 / 255
    deltas = _deltas({"values": "continuous"}, budget=30)
    explored = deltas[:6]  # 0.2 × 30 queries explore
    for k, d in enumerate(explored, start=1):
        assert float(d.abs().max()) <= eps + 1e-6
        assert _row_constant(d.round(decimals=5)) if k % 2 else _col_constant(d.round(decimals=5))
    values = torch.cat([d.flatten() for d in explored]).abs()
    assert float((values < eps - 1e-4).float().mean()) > 0.5  # mostly strictly inside the ball
    assert all(torch.allclose(d[0], d[1], atol=1e-6) for d in deltas)  # still grey: one value per line


def test_random_exploration_draws_plus_minus_eps_per_value_not_lines() -> None:
    eps = 8 / 255
    deltas = _deltas({"direction": "random"}, budget=30)
    for d in deltas[:6]:
        assert torch.allclose(d.abs(), torch.full_like(d, eps), atol=1e-6)
        assert not _row_constant(d.sign()) and not _col_constant(d.sign())
        assert not torch.equal(d[0].sign(), d[1].sign())  # each colour value its own sign


def test_table_1_discrete_is_a_fresh_plus_minus_eps_vertex_every_query() -> None:
    """`dla:direction=random;exploration=1` is the DLA paper's Table 1 "Discrete" search: every
    query after the clean one draws a new δ ∈ {−ε, ε} per value (the best is kept by the
    oracle), never a calibration flip of an earlier draw."""
    eps = 8 / 255
    deltas = _deltas({"direction": "random", "exploration": 1.0}, budget=20)
    for before, d in zip(deltas, deltas[1:]):
        assert torch.allclose(d.abs(), torch.full_like(d, eps), atol=1e-6)
        changed = d.sign() != before.sign()
        assert 0.3 < float(changed.float().mean()) < 0.7  # independent signs: about half differ
        assert not _row_constant(changed) and not _col_constant(changed)  # not a block of lines


def test_random_calibration_takes_small_uniform_steps_from_the_kept_image() -> None:
    eps = 8 / 255
    deltas = _deltas({"calibration": "random"}, budget=30)
    calibration = deltas[6:]
    for d in calibration:
        assert float(d.abs().max()) <= eps + 1e-6
    # Eq. 2: each step moves every value by at most ε/16 from the image it starts from, so a
    # calibration query is never a vertex of the ball (unlike a flip).
    assert any(float((d.abs() < eps - 1e-4).float().mean()) > 0.1 for d in calibration)


def test_random_noise_with_random_calibration_is_the_random_attack() -> None:
    """Table 3's first row reports exactly Table 2's Random attack numbers: the same attack."""
    from segtk_random import RandomAttack

    images, labels = toy_batch(2, 14, 11, seed=9)
    dla = DLA(budget=25, direction="random", values="continuous", calibration="random")
    ours = dla.run(TinySegmenter(), images, labels, seeds=[3, 4])
    random = RandomAttack(budget=25).run(TinySegmenter(), images, labels, seeds=[3, 4])
    assert torch.equal(ours.images, random.images)
    assert ours.history == random.history


@pytest.mark.parametrize("key", ["direction", "calibration", "values"])
def test_unknown_variant_is_refused_with_the_choices(key: str) -> None:
    with pytest.raises(SegtkError, match=f"unknown DLA {key}") as err:
        options: dict[str, Any] = {key: "diagonal"}  # as --param KEY=diagonal gives it
        DLA(**options)
    assert "--param" in str(err.value.hint)


def test_a_short_run_on_the_demo_model_is_pinned() -> None:
    # Exploration, then calibration flips, on two 160x120 demo images: bit-identical.
    images, labels = demo_batch(2)
    result = DLA(budget=40, eps=8, seed=3).run(segtk.load_model("demo"), images, labels)
    assert result_digest(result) == "b1ca1f8a5adf843ebf4ef1066d83ed835792bcef2735d9ad2d47605ed93e2701"
