"""The per-image fast paths of `segtk attack` give exactly what the plain formulas (and PIL) give."""

from __future__ import annotations

import io
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from segtk.core import (
    DataError,
    LabelConfusion,
    Proxy,
    QueryCounter,
    Segmenter,
    SegtkError,
    confusion,
    project,
    read_image,
    write_png,
)
from segtk.core._data import default_palette
from segtk.core._oracle_run import OracleRun
from segtk.core._png import encode_png
from segtk.imaging import overlay
from segtk.jobs.attack import quantise


def plain_quantise(adv: torch.Tensor, clean_u8: np.ndarray, eps: float) -> np.ndarray:
    """The specification: round(255·adv) in int64, clipped to clean ± ⌊ε⌋ and [0,255]."""
    q = np.asarray((adv.permute(0, 2, 3, 1) * 255.0).round(), dtype=np.float64)
    q = np.where(np.isnan(q), -1, q).astype(np.int64)
    step = math.floor(eps + 1e-9)
    lo = np.clip(clean_u8.astype(np.int64) - step, 0, 255)
    hi = np.clip(clean_u8.astype(np.int64) + step, 0, 255)
    return np.clip(q, lo, hi).astype(np.uint8)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**31), eps=st.sampled_from([0.5, 1.0, 2.5, 8.0, 16.0, 255.0]),
       spread=st.sampled_from([0.0, 4.0, 40.0]), h=st.integers(1, 7), w=st.integers(1, 7))
def test_quantise_is_the_plain_int64_formula(seed: int, eps: float, spread: float, h: int, w: int) -> None:
    g = torch.Generator().manual_seed(seed)
    clean_u8 = torch.randint(0, 256, (2, h, w, 3), generator=g, dtype=torch.uint8).numpy()
    clean_u8[0, 0] = 0
    clean_u8[1, -1] = 255
    clean = torch.from_numpy(clean_u8).permute(0, 3, 1, 2).float() / 255
    adv = clean + (torch.rand(clean.shape, generator=g) * 2 - 1) * spread / 255
    adv[1, 0, -1, 0] = float("nan")  # never from the oracle, but still kept in the ball (255 - ε)
    adv[1, 2, -1, -1] = 0.5 / 255  # a tie: rounds half to even, like the formula
    got = quantise(adv, clean_u8, eps)
    assert got.dtype == np.uint8 and got.flags.c_contiguous and got.shape == clean_u8.shape
    assert np.array_equal(got, plain_quantise(adv, clean_u8, eps))
    assert np.abs(got.astype(int) - clean_u8).max() <= eps


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**31), h=st.integers(1, 9), w=st.integers(1, 9),
       channels=st.sampled_from([0, 1, 2, 3, 4]), flat=st.booleans())
def test_png_encoder_round_trips_every_pixel(seed: int, h: int, w: int, channels: int, flat: bool) -> None:
    rng = np.random.default_rng(seed)
    shape = (h, w) if channels == 0 else (h, w, channels)
    array = (np.full(shape, rng.integers(0, 256), np.uint8) if flat  # runs: RLE matches
             else rng.integers(0, 256, shape, dtype=np.uint8))
    array.flat[0], array.flat[-1] = 0, 255  # the Sub filter wraps mod 256 both ways
    with Image.open(io.BytesIO(encode_png(array))) as img:
        assert img.mode == {0: "L", 1: "L", 2: "LA", 3: "RGB", 4: "RGBA"}[channels]
        decoded = np.asarray(img)
    assert np.array_equal(decoded, array.reshape(decoded.shape))


def test_png_encoder_palette_and_non_contiguous_input(tmp_path) -> None:
    ids = np.arange(4 * 5).reshape(4, 5) * 13 % 256
    palette = np.random.default_rng(0).integers(0, 256, (256, 3), dtype=np.uint8)
    with Image.open(io.BytesIO(encode_png(ids.astype(np.uint8), palette))) as img:
        assert img.mode == "P" and np.array_equal(np.asarray(img), ids)
        assert np.array_equal(np.asarray(img.getpalette(), np.uint8).reshape(-1, 3), palette)
    rgb = np.random.default_rng(1).integers(0, 256, (6, 7, 3), dtype=np.uint8)
    view = rgb[::-1, ::2]  # strided, as slices of a batch are
    write_png(tmp_path / "v.png", view)
    assert np.array_equal(read_image(tmp_path / "v.png"), view)


@pytest.mark.parametrize("array", [np.zeros((0, 3, 3), np.uint8), np.zeros((2, 2, 5), np.uint8),
                                   np.zeros((2, 2, 2, 3), np.uint8)])
def test_png_writer_refuses_shapes_a_png_cannot_hold(tmp_path, array: np.ndarray) -> None:
    with pytest.raises(DataError, match=r"x\.png: a PNG"):
        write_png(tmp_path / "x.png", array)
    assert not list(tmp_path.iterdir())


def plain_overlay(image: np.ndarray, label: np.ndarray, palette: np.ndarray, alpha: float,
                  ignore_index: int) -> np.ndarray:
    """The specification: palette colour per id (black for ignore and ids outside the
    palette), blended in float32 and rounded half to even."""
    colour = np.zeros((*label.shape, 3), np.float32)
    for (r, c), cid in np.ndenumerate(label):
        if 0 <= cid < len(palette) and cid != ignore_index:
            colour[r, c] = palette[cid]
    mixed = (1 - alpha) * image.astype(np.float32) + alpha * colour
    return mixed.round().clip(0, 255).astype(np.uint8)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**31), alpha=st.sampled_from([0.5, 0.3, 0.0, 1.0, 0.77]),
       ignore=st.sampled_from([255, 3, -1, 300]), classes=st.sampled_from([1, 5, 12, 256]))
def test_overlay_is_the_float_blend(seed: int, alpha: float, ignore: int, classes: int) -> None:
    rng = np.random.default_rng(seed)
    image = rng.integers(0, 256, (5, 6, 3), dtype=np.uint8)
    label = rng.integers(-3, 300, (5, 6))
    label[0, :4] = [255, 3, classes - 1, classes]
    palette = default_palette(classes)
    expected = plain_overlay(image, label, palette, alpha, ignore)
    assert np.array_equal(overlay(image, label, palette, alpha, ignore), expected)
    assert np.array_equal(overlay(image, label.astype(np.int32), palette, alpha, ignore), expected)
    inside = np.clip(label, 0, 255).astype(np.uint8)  # uint8 labels take the same path
    assert np.array_equal(overlay(image, inside, palette, alpha, ignore),
                          plain_overlay(image, inside, palette, alpha, ignore))


@pytest.mark.parametrize("k", [1, 12, 200])  # int16 bins, and int32 once 4 copies pass 32767
def test_label_confusion_is_the_plain_count(k: int) -> None:
    g = torch.Generator().manual_seed(k)
    labels = torch.randint(0, k, (2, 13, 7), generator=g)
    labels[0, :3] = 255
    labels[1, 4, :5] = -2
    labels[1, 6:] = labels[1, 6, 0]  # long runs of one class (the interleaved copies' case)
    pred = torch.randint(-1, k + 2, (3, 13, 7), generator=g)
    pred[2] = labels[0].clamp(0, k - 1)
    owners = torch.tensor([1, 0, 0])
    got = LabelConfusion(labels, k)(pred, owners)
    for row, owner in enumerate(owners.tolist()):
        expected = np.zeros((k, k + 1), np.int64)
        for p, t in zip(pred[row].flatten().tolist(), labels[owner].flatten().tolist()):
            if 0 <= t < k:
                expected[t, p if 0 <= p < k else k] += 1
        assert np.array_equal(got[row].numpy(), expected)



@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8])
def test_label_confusion_pairs_are_the_plain_bins_and_leave_the_prediction_alone(dtype) -> None:
    k = 5
    g = torch.Generator().manual_seed(3)
    labels = torch.randint(0, k, (2, 6, 7), generator=g)
    labels[1, :2] = 255  # unscored: row K
    pred = torch.randint(0, k + 3, (6, 7), generator=g).to(dtype)  # ids past K: column K
    before = pred.clone()
    lc = LabelConfusion(labels, k)
    for owner in (0, 1):
        got = lc.pairs(pred, owner)
        true = torch.where((labels[owner] >= 0) & (labels[owner] < k), labels[owner], k)
        assert got.dtype == torch.int32
        assert torch.equal(got, (true * (k + 1) + pred.long().clamp(max=k)).flatten().int())
    assert torch.equal(pred, before)
    lc.base[0] = LabelConfusion(labels[1:], k).base[0]  # a reference learnt later (the oracle's)
    true = torch.where((labels[1] >= 0) & (labels[1] < k), labels[1], k)
    assert torch.equal(lc.pairs(pred, 0), (true * (k + 1) + pred.long().clamp(max=k)).flatten().int())


def test_an_answer_carries_the_confusion_its_scores_came_from() -> None:
    g = torch.Generator().manual_seed(2)
    clean = torch.rand(2, 3, 6, 5, generator=g)
    labels = torch.stack([torch.zeros(6, 5, dtype=torch.long), torch.arange(30).view(6, 5) % 4])
    o = OracleRun(QueryCounter(Grey(), 50, 2), clean, labels, Proxy(4), 8 / 255, [0, 1])
    o.query(o.clean)
    candidates = [o.verified.vertex(i, torch.rand(3, 6, 5, generator=g) > 0.5) for i in (1, 0, 1)]
    answer = o.verified.answer(candidates)
    assert answer.confusions is not None
    for row, v in enumerate(candidates):
        expected = confusion(answer.labels[row], o.labels[v.owner], 4)[0]
        assert torch.equal(answer.confusions[row], expected)
        assert float(answer.scores[row]) == float(Proxy(4).score(expected[None])[0])
    empty = o.verified.answer([])
    assert empty.confusions is not None and empty.confusions.shape == (0, 4, 5)

class Grey(Segmenter):
    """Labels from the first channel, for any float dtype."""

    name, classes = "grey", ["a", "b", "c", "d"]

    def predict(self, images: torch.Tensor) -> torch.Tensor:
        return (images[:, 0] * 3.99).long()


def corner_oracle(eps: float, dtype: torch.dtype) -> OracleRun:
    g = torch.Generator().manual_seed(int(eps))
    clean = torch.rand(2, 3, 6, 5, generator=g).to(dtype)
    clean[0, :, :2] = 0.0  # saturated lines: the box cuts the ball
    clean[1, :, -2:] = 1.0
    labels = torch.zeros(2, 6, 5, dtype=torch.long)
    return OracleRun(QueryCounter(Grey(), 50, 2), clean, labels, Proxy(4), eps / 255, [0, 1])


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
@pytest.mark.parametrize("eps", [1.0, 8.0, 255.0])
def test_corners_are_where_and_flips_are_patches_bit_for_bit(eps: float, dtype) -> None:
    o = corner_oracle(eps, dtype)
    g = torch.Generator().manual_seed(1)
    for i in range(2):
        rows = torch.rand(1, 6, 1, generator=g) > 0.5
        for pin in (False, True):
            v = o.verified.vertex(i, rows, pin=pin)
            assert torch.equal(v.image, torch.where(rows, o.hi[i], o.lo[i]))
            signs = torch.where(rows, 1.0, -1.0).to(dtype).expand(3, 6, 5).clone()
            assert torch.equal(v.image, project(o.clean[i] + signs * o.eps_unit, o.clean[i], o.eps_unit))
            for at in ((..., slice(1, 4), slice(None)), (..., slice(2, 5)), (1, slice(0, 6)),
                       (2, slice(None), slice(0, 2)), (..., slice(0, 0))):
                plain = o.verified.project(i, v.image)
                signs[at] *= -1  # what DLA / colour-stripes flip
                o.verified.patch(plain, at, o.clean[i][at] + signs[at] * o.eps_unit)
                before = v.image.clone()
                undo = o.verified.flip(v, at)
                assert torch.equal(v.image, plain.image)
                o.verified.score([v])  # the oracle's own write: accepted
                undo()
                assert torch.equal(v.image, before)
                o.verified.flip(v, at)  # kept


def test_flip_refuses_images_that_are_not_all_corners() -> None:
    o = corner_oracle(8.0, torch.float32)
    with pytest.raises(SegtkError, match="bool"):
        o.verified.vertex(0, torch.ones(1, 6, 1))
    with pytest.raises(SegtkError, match="box corners"):
        o.verified.flip(o.verified.project(0, o.clean[0]), (..., slice(0, 2)))
    v = o.verified.vertex(0, torch.ones(1, 6, 1, dtype=torch.bool))
    undo_flip = o.verified.flip(v, (..., slice(0, 2)))
    undo_patch = o.verified.patch(v, (..., slice(3, 4)), o.clean[0][..., 3:4])  # not a corner any more
    with pytest.raises(SegtkError, match="after a patch"):
        undo_flip()
    undo_patch()
    with pytest.raises(SegtkError, match="box corners"):  # conservative: stays refused
        o.verified.flip(v, (..., slice(0, 2)))
    pinned = o.verified.vertex(1, torch.ones(1, 6, 1, dtype=torch.bool), pin=True)
    o.verified.flip(o.verified.unpinned(pinned), (..., slice(0, 1)))  # copies keep the corner flag
    o.verified.pin(o.verified.project(1, o.clean[1]))  # the row now holds the clean image
    with pytest.raises(SegtkError, match="box corners"):
        o.verified.flip(pinned, (..., slice(0, 2)))  # the row's flag, not the old handle's
    again = o.verified.pin(o.verified.vertex(1, torch.zeros(1, 6, 1, dtype=torch.bool)))
    o.verified.flip(again, (..., slice(0, 2)))
    again.image[0, 0, 0] = 0.5  # a write outside the oracle is still caught
    with pytest.raises(SegtkError, match="outside the oracle"):
        o.verified.flip(again, (..., slice(0, 2)))


def test_the_clean_query_passes_the_check_only_when_it_is_in_bounds() -> None:
    """The clean query is checked like any other: its tensor's version counter says nothing
    of a write through numpy (tests/test_oracle.py)."""
    o = corner_oracle(8.0, torch.float32)
    o.query(o.clean)  # each image is the centre of its own ball
    with pytest.raises(SegtkError, match="outside the ε-ball"):
        o.query(o.clean, torch.tensor([1, 0]))  # image 0 for image 1: checked, refused
    for bad in (1.5, float("nan")):
        clean = o.clean.clone()
        clean[1, 0, 0, 0] = bad  # a clean image outside [0,1] is no valid candidate
        bad_o = OracleRun(QueryCounter(Grey(), 5, 2), clean, o.labels, Proxy(4), o.eps_unit, [0, 1])
        with pytest.raises(SegtkError, match="outside the ε-ball"):
            bad_o.query(bad_o.clean)
