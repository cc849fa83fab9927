"""colour-stripes: the shared attack suite and the shape of its candidates."""

from __future__ import annotations

import torch

import segtk
from segtk.testing import AttackSuite, RecordingSegmenter, demo_batch, result_digest, toy_batch
from segtk_colour_stripes import ColourStripes


class TestColourStripes(AttackSuite):
    attack_cls = ColourStripes


class TestColourStripesNoExploration(AttackSuite):
    attack_cls = ColourStripes
    params = {"explore": 0}


def test_candidates_are_per_channel_stripes_of_plus_minus_eps() -> None:
    images, labels = toy_batch(1, 12, 10)
    images = images * 0.5 + 0.25
    model = RecordingSegmenter()
    ColourStripes(budget=25, eps=8, width=0.2).run(model, images, labels)
    channels_differ = False
    for x in model.seen[1:]:
        delta = x - images[0]
        assert torch.allclose(delta.abs(), torch.full_like(delta, 8 / 255), atol=1e-6)
        sign = delta.sign()
        rows = bool((sign == sign[:, :, :1]).all())
        cols = bool((sign == sign[:, :1, :]).all())
        assert rows or cols
        channels_differ |= not (torch.equal(sign[0], sign[1]) and torch.equal(sign[1], sign[2]))
    assert channels_differ, "signs should differ between colour channels"


class NeverFooled(RecordingSegmenter):
    """Predicts the same labels whatever the input, so no flip is ever kept."""

    def predict(self, images):
        super().predict(images)
        return torch.zeros(images.shape[0], *images.shape[2:], dtype=torch.long)


def test_channel_flips_try_each_channel_of_a_block_in_turn() -> None:
    images, labels = toy_batch(1, 8, 8)
    images = images * 0.5 + 0.25
    model = NeverFooled()
    ColourStripes(budget=8, eps=8, explore=0, width=1 / 8).run(model, images, labels)
    base = model.seen[1] - images[0]  # first calibration query flips channel 0 of the image
    assert (base[0] < 0).all() and (base[1:] > 0).all()
    flipped = []
    for x in model.seen[1:]:
        delta = (x - images[0]).sign()
        changed = (delta < 0).nonzero()  # the all-+ε start is kept: negatives are the flip
        flipped.append((int(changed[0, 0]), int(changed[:, 1].min()), int(changed[:, 1].max()) + 1))
    # whole image in channels 0,1,2; then the top half in 0,1,2; then the bottom half
    assert flipped == [(0, 0, 8), (1, 0, 8), (2, 0, 8), (0, 0, 4), (1, 0, 4), (2, 0, 4), (0, 4, 8)]


def test_stripes_are_a_share_of_the_shorter_side_wide() -> None:
    images, labels = toy_batch(1, 12, 10)
    images = images * 0.5 + 0.25
    model = RecordingSegmenter()
    ColourStripes(budget=12, eps=8, width=0.4).run(model, images, labels)  # 0.4 × 10 = 4 lines
    for x in model.seen[1:]:
        sign = (x - images[0]).sign()
        rows = bool((sign == sign[:, :, :1]).all())
        lines = sign[:, :, 0] if rows else sign[:, 0, :]
        for start in range(0, lines.shape[1], 4):  # constant within each 4-line stripe
            block = lines[:, start:start + 4]
            assert torch.equal(block, block[:, :1].expand_as(block))


def test_the_best_draw_sets_the_direction_even_if_it_does_not_beat_clean() -> None:
    images, labels = toy_batch(1, 12, 16)
    images = images * 0.5 + 0.25
    model = NeverFooled()
    ColourStripes(budget=6, eps=8, explore=2, width=0.25).run(model, images, labels)
    draws, calibration = model.seen[1:3], model.seen[3:]
    rows = [bool(((x - images[0]).sign() == (x - images[0]).sign()[:, :, :1]).all()) for x in draws]
    assert rows == [True, False]  # exploration alternates direction, horizontal first
    first = (draws[0] - images[0]).sign()  # equal scores: the first draw is kept
    assert all(((x - images[0]).sign() != first).any() for x in calibration)
    assert all(((x - images[0]).sign() == (x - images[0]).sign()[:, :, :1]).all() for x in calibration)


def test_a_short_run_on_the_demo_model_is_pinned() -> None:
    # Stripe draws, then calibration flips, on two 160x120 demo images: bit-identical.
    images, labels = demo_batch(2)
    result = ColourStripes(budget=40, eps=8, seed=3).run(segtk.load_model("demo"), images, labels)
    assert result_digest(result) == "1f94c6f780888121aa475920f9b68a1eb1fa156ecbb13eea5da1c192df0b597a"
