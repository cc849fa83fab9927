"""colour-blocks: the shared attack suite and the shape of its candidates."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import torch

import segtk
from segtk.core import AttackResult, LabelConfusion, Segmenter, SegtkError, confusion
from segtk.testing import (
    AttackSuite,
    RecordingSegmenter,
    TinySegmenter,
    demo_batch,
    result_digest,
    toy_batch,
)
from segtk_colour_blocks import ColourBlocks
from segtk_colour_blocks import attack as attack_module
from segtk_colour_blocks.attack import block_textures, cell_sums, pair_values


class TestColourBlocks(AttackSuite):
    attack_cls = ColourBlocks


class TestColourBlocksExploringUnverified(AttackSuite):
    attack_cls = ColourBlocks
    params = {"explore": 4, "verify": False}


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
    # No textures: half of a textured cell stays above 0.5 here whatever is flipped later.
    attack = ColourBlocks(budget=budget, eps=8, explore=0, cells=2, finest=8, rounds=2, texture=0,
                          **params)
    return attack.run(ChannelZeroSign(), images, labels)


def test_each_cell_is_credited_with_the_labels_inside_it() -> None:
    # The best image moves channel 0 down everywhere: every pixel wrong, proxy 0. Crediting each
    # flipped cell with its own labels finds it within 40 queries; judging only whole trials
    # by the proxy does not.
    assert float(local_run(40).scores[0]) == 0.0


def test_an_unverified_mix_takes_each_cells_labels_from_where_its_signs_came_from() -> None:
    # verify=false keeps the mix unqueried, its labels pieced cell by cell from the trial's and
    # the kept ones. Here each pixel's label depends on its own value only, so pieced labels are
    # the model's, and the credit finds the all-wrong image as with verification.
    assert float(local_run(30, verify=False).scores[0]) == 0.0


class Constant(RecordingSegmenter):
    """Predicts class 0 whatever the input, so no trial is ever kept."""

    def predict(self, images: torch.Tensor) -> torch.Tensor:
        super().predict(images)
        return torch.zeros(images.shape[0], *images.shape[2:], dtype=torch.long)


def test_every_trial_flips_something_even_at_a_low_rate() -> None:
    images, labels = toy_batch(1, 12, 16)
    images = images * 0.5 + 0.25
    model = Constant()
    ColourBlocks(budget=12, eps=8, explore=0, cells=1, rate=0.01).run(model, images, labels)
    start = model.seen[1]  # clean, then the uniform +ε start, then trials on it
    assert torch.allclose(start - images[0], torch.full_like(start, 8 / 255), atol=1e-6)
    assert all(not torch.equal(x, start) for x in model.seen[2:])


def test_candidates_are_corners_constant_over_grid_cells() -> None:
    images, labels = toy_batch(1, 16, 24)
    images = images * 0.5 + 0.25
    model = RecordingSegmenter()
    ColourBlocks(budget=30, eps=8, explore=0, cells=2, finest=4, rounds=2).run(model, images, labels)
    for x in model.seen[1:]:
        sign = (x - images[0]) * 255 / 8
        assert torch.allclose(sign.abs(), torch.ones_like(sign), atol=1e-4)  # every value ±ε
        cells = sign.unfold(1, 4, 4).unfold(2, 4, 4)  # finest grid: 4 cells on 16 rows
        assert torch.allclose(cells, cells[..., :1, :1].expand_as(cells), atol=1e-4)


def test_the_finest_grid_recolours_a_fine_rate_share_of_its_cells() -> None:
    # Constant labels: nothing is credited, so every trial is the start with its own flips.
    # Coarse rounds recolour a `rate` share (here all cells), the finest grid a `fine_rate` share.
    images, labels = toy_batch(1, 16, 16)
    images = images * 0.5 + 0.25
    model = Constant()
    ColourBlocks(budget=60, eps=8, cells=2, finest=4, rounds=3, rate=1.0, fine_rate=0.25).run(
        model, images, labels)
    start = model.seen[1]
    changed = [(x != start).any(dim=0).float() for x in model.seen[2:]]  # [H,W] per trial
    coarse, fine = changed[:3], changed[3:]
    assert all(bool(c.all()) for c in coarse)  # rate 1: every pixel's cell recoloured
    shares = torch.stack([c.unfold(0, 4, 4).unfold(1, 4, 4).amax(dim=(2, 3)).mean() for c in fine])
    assert 0.1 < float(shares.mean()) < 0.4  # a quarter of the 16 cells on average


def trial_signs(texture: float) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """The kept start's signs and each trial's (bool [3,32,32], True: +ε) on a grid of 4 cells
    (8 px each) from the first round, textures allowed there. The start is a coloured stripe
    draw (`explore`), and constant labels keep it: every trial is the start with its flips."""
    images, labels = toy_batch(1, 32, 32)
    images = images * 0.5 + 0.25
    model = Constant()
    ColourBlocks(budget=20, eps=8, explore=1, cells=4, finest=4, texture=texture,
                 texture_from=4).run(model, images, labels)
    start, *trials = [x > images[0] for x in model.seen[1:]]
    return start, trials


def test_finer_grids_set_a_texture_share_of_the_flipped_cells_to_grey_textures() -> None:
    # With texture 1 every flipped cell becomes one grey texture whatever its colour was: a
    # checkerboard of 2-px squares with the same pixel of every square inverted (or all of that
    # inverted), +ε on every channel where True and -ε elsewhere.
    i, j = torch.meshgrid(torch.arange(8), torch.arange(8), indexing="ij")
    checker = (i // 2 + j // 2) % 2 == 1
    odd = [checker ^ ((i % 2) * 2 + j % 2 == k) for k in range(4)]
    patterns = odd + [~p for p in odd]
    start, trials = trial_signs(1.0)
    shares = []
    for signs in trials:
        flipped = (signs != start).any(dim=0).unfold(0, 8, 8).unfold(1, 8, 8).reshape(16, 8, 8)
        cells = signs.unfold(1, 8, 8).unfold(2, 8, 8).reshape(3, 16, 8, 8)
        shares.append(float(flipped.any(dim=(1, 2)).float().mean()))
        assert shares[-1] > 0  # every trial flips something
        for k in range(16):
            if bool(flipped[k].any()):
                assert any(torch.equal(cells[0, k], p) for p in patterns)
                assert torch.equal(cells[0, k], cells[1, k]) and torch.equal(cells[0, k], cells[2, k])
    assert 0.2 < sum(shares) / len(shares) < 0.6  # only the chosen cells: fine_rate 0.4 of 16


def test_textures_hold_the_diagonal_stripes() -> None:
    # The 2-px diagonal stripes (the textures' first form) are four of the eight textures.
    stripes = [((torch.arange(8).view(8, 1) + torch.arange(8) + phase) // 2) % 2 == 1 for phase in range(4)]
    textures = block_textures(8, 8, 2)
    assert textures.shape == (8, 8, 8)
    assert all(any(torch.equal(s, t) for t in textures) for s in stripes)
    assert len({tuple(t.flatten().tolist()) for t in textures}) == 8


def finest_flips(live: bool) -> torch.Tensor:
    """Which pixels the finest-grid trials changed (bool [H,W], any trial) when the left half's
    labels are the constant prediction (correct) and the right half's are not (wrong)."""
    images = torch.full((1, 3, 16, 16), 0.5)
    labels = torch.zeros(1, 16, 16, dtype=torch.long)
    labels[..., 8:] = 1
    model = Constant()
    ColourBlocks(budget=40, eps=8, cells=2, finest=4, rounds=3, rate=1.0, fine_rate=1.0,
                 texture=0, live=live).run(model, images, labels)
    start = model.seen[1]
    return torch.stack([(x != start).any(dim=0) for x in model.seen[5:]]).any(dim=0)


def test_the_finest_grid_flips_only_cells_that_still_hold_a_correct_pixel() -> None:
    # A cell whose pixels are all wrong cannot be credited: its flip would only blur the credit
    # of the cells around it.
    changed = finest_flips(live=True)
    assert bool(changed[:, :8].all()) and not bool(changed[:, 8:].any())
    assert bool(finest_flips(live=False).all())


def test_without_texture_the_finer_grids_keep_one_colour_per_cell() -> None:
    start, trials = trial_signs(0.0)
    for signs in trials:
        cells = (signs != start).unfold(1, 8, 8).unfold(2, 8, 8)
        assert torch.equal(cells, cells[..., :1, :1].expand_as(cells))


TRUTH = torch.tensor([[0, 0, 0, 0], [1, 1, 255, 1]])  # two classes, one ignored pixel (255)
KEPT = torch.tensor([[0, 0, 1, 2], [1, 0, 1, 2]])  # and a void label (2) the model may show


def test_a_pixel_is_worth_its_class_share_if_right_and_costs_its_shown_class_iou_if_wrong() -> None:
    values = pair_values(confusion(KEPT, TRUTH, 2)[0], 2.0).view(3, 3)
    # class 0: 4 pixels, TP 2, union 4 + 3 shown - 2 = 5; class 1: 3 pixels, TP 1, union
    # 3 + 2 - 1 = 4; the ignored pixel (row 2) and the void label (column 2) count nowhere.
    expected = torch.tensor([[1 / 4, -2 * 1 / 16, 0], [-2 * 2 / 25, 1 / 3, 0], [0, 0, 0]])
    torch.testing.assert_close(values, expected)


def test_each_pixel_reads_the_value_of_its_true_and_shown_pair() -> None:
    pairs = LabelConfusion(TRUTH[None], 2, 255).pairs(KEPT)
    # true·3 + shown; the ignored pixel's row is 2, the void label's column is 2
    assert pairs.tolist() == [0, 0, 1, 2, 4, 3, 7, 5]


def test_pushing_a_pixel_into_a_recognised_class_is_credited_only_with_a_wrong_weight() -> None:
    moved = torch.tensor([[0, 0, 1, 1], [1, 0, 1, 2]])  # a void pixel now shows class 1
    pairs = LabelConfusion(TRUTH[None], 2, 255).pairs
    for weight, drops in ((1.0, True), (0.0, False)):
        values = pair_values(confusion(KEPT, TRUTH, 2)[0], weight)
        before, after = (cell_sums(values[pairs(labels).long()].view(2, 4), 1) for labels in (KEPT, moved))
        assert bool(after[0, 3] < before[0, 3]) is drops
        assert torch.equal(after.flatten()[:3], before.flatten()[:3])


def test_a_negative_wrong_weight_is_refused_with_a_hint() -> None:
    with pytest.raises(SegtkError, match="wrong_weight"):
        ColourBlocks(budget=10, eps=8, wrong_weight=-1)


@pytest.mark.parametrize(("params", "expected"), [
    ({"budget": 100}, "bcd778dbb4bb4c24e4757e4e86f158abfa5adf8622172513a0bf81e292cffc3a"),
    ({"budget": 60, "explore": 4, "verify": False, "live": False},
     "aebb8bef3e90c6b5e8422922a8bb33639f04b12fd3398f6aeaac54e17fdf16ef"),
])
def test_a_short_run_on_the_demo_model_is_pinned(params: dict[str, Any], expected: str) -> None:
    # Every phase (stripe draws or the uniform start, coarse and finest grids, textures,
    # verification) on two 160x120 demo images: its images, scores and history stay bit-identical.
    images, labels = demo_batch(2)
    result = ColourBlocks(eps=8, seed=3, **params).run(segtk.load_model("demo"), images, labels)
    assert result_digest(result) == expected


def test_the_search_reads_back_at_most_one_small_tensor_per_query(monkeypatch: pytest.MonkeyPatch) -> None:
    # On a GPU every read of a device tensor on the host waits for the device. The search's
    # per-pixel work stays on the job's device; what comes back is one [cells] mask per trial
    # (which cells were credited: it decides the next query) and, when the kept signs change,
    # their live cells. Counted on CPU by the calls from the attack's own module.
    module = Path(attack_module.__file__).resolve()
    calls: dict[str, int] = {}

    def counting(name: str) -> Any:
        original = getattr(torch.Tensor, name)

        def wrapper(self: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            if Path(sys._getframe(1).f_code.co_filename).resolve() == module:
                calls[name] = calls.get(name, 0) + 1
            return original(self, *args, **kwargs)
        return wrapper

    for name in ("cpu", "item", "numpy", "tolist"):
        monkeypatch.setattr(torch.Tensor, name, counting(name))
    images, labels = toy_batch(2, 32, 48)
    ColourBlocks(budget=60, eps=8, cells=2, finest=8, rounds=2).run(TinySegmenter(), images, labels)
    queries = 2 * 60
    assert calls.get("item", 0) == calls.get("numpy", 0) == 0
    assert calls.get("tolist", 0) <= 2 * queries  # the oracle's active images and scores: per step
    assert 0 < calls.get("cpu", 0) <= queries
