"""The editing kit's pixel arithmetic pinned by hand-worked cases: row interpolation (its 7-px
mean over known pixels, the replicated border, all-hole rows copying the nearest row), the grain
it adds (1.4826 x the MAD of the image's fine detail around the hole, per channel), the hole's
dilation and the OpenCV route, the words for an object's surroundings, and the rigid transform
(area averaging over object pixels, nearest labels, the room check, its metadata)."""

from __future__ import annotations

from typing import Any

import cv2
import numpy as np
import pytest

from segtk.core import PluginError, Sample, SkipSample
from segtk.editkit import _inpaint
from segtk.editkit._inpaint import fill_rows, inpaint, surroundings_prompt
from segtk.editkit._transforms import (
    background_fill,
    bbox,
    border_sides,
    target_box,
    transform_object,
)


def rgb(*channels: np.ndarray) -> np.ndarray:
    return np.stack(channels, -1).astype(np.uint8)


# --- fill_rows --------------------------------------------------------------------------------


def test_a_hole_is_interpolated_between_the_7px_means_of_the_known_pixels_beside_it() -> None:
    row0 = np.array([0, 0, 0, 14, 28, 255, 255, 255, 255, 255, 56, 42, 42, 42, 42, 42])
    row1 = np.array([100] * 5 + [0] * 5 + [100] * 6)
    row2 = np.array([200] * 5 + [9] * 5 + [0] * 6)
    image = np.zeros((3, 16, 3), np.uint8)
    image[1] = np.stack([row0, row1, row2], -1)
    image[0] = image[2] = np.arange(48).reshape(16, 3)  # rows without a hole stay as they are
    hole = np.zeros((3, 16), bool)
    hole[1, 5:10] = True
    out = fill_rows(image, hole, np.random.default_rng(0), grain=0)
    # left: the mean of known cols 1..4 = 10.5 at col 4; right: of cols 10..13 = 45.5 at col 10
    assert out[1, 5:10, 0].tolist() == [16, 22, 28, 34, 40]
    assert out[1, 5:10, 1].tolist() == [100] * 5
    assert out[1, 5:10, 2].tolist() == [167, 133, 100, 67, 33]
    keep = ~hole
    assert np.array_equal(out[keep], image[keep])
    assert out.dtype == np.uint8


def test_the_mean_at_the_image_border_replicates_the_edge_pixel() -> None:
    row = np.array([0, 120, 255, 255, 255, 255, 60, 60, 60, 60, 60, 60, 20, 20, 20, 20])
    image = rgb(row[None], row[None], row[None])
    hole = np.zeros((1, 16), bool)
    hole[0, 2:6] = True
    hole[0, 14:] = True  # beyond the last known pixel: constant
    out = fill_rows(image, hole, np.random.default_rng(0), grain=0)[0, :, 0]
    # col 1's window (-2..4) with the border replicated holds 0, 0, 0, 120: mean 30
    assert out[2:6].tolist() == [36, 42, 48, 54]
    # beyond col 13, the last known pixel: its mean (60, 60, 20, 20 over cols 10..13)
    assert out[14:].tolist() == [40, 40]


def test_rows_that_are_all_hole_copy_the_nearest_filled_row_the_upper_one_on_a_tie() -> None:
    image = np.full((6, 4, 3), 255, np.uint8)
    image[1], image[4] = 10, 40
    hole = np.zeros((6, 4), bool)
    hole[[0, 2, 3, 5]] = True
    hole[4, 1] = True  # a partly-holed row after all-hole rows is still interpolated
    image[4, 1] = 255
    out = fill_rows(image, hole, np.random.default_rng(0), grain=0)[..., 0]
    assert out[:, 0].tolist() == [10, 10, 10, 40, 40, 40]
    assert (out == out[:, :1]).all()
    tie = np.zeros((3, 2, 3), np.uint8)
    tie[0], tie[2] = 10, 30
    assert fill_rows(tie, np.array([[0, 0], [1, 1], [0, 0]], bool),
                     np.random.default_rng(0), grain=0)[1, :, 0].tolist() == [10, 10]


def grain_scene() -> tuple[np.ndarray, np.ndarray]:
    """Channel 0: noise of std 12; channel 1: a period-3 column pattern (its detail has a median
    off zero and a MAD of zero); channel 2: flat. The hole is well inside the image."""
    gen = np.random.default_rng(7)
    h, w = 48, 48
    c0 = np.clip(np.round(128 + gen.normal(0, 12, (h, w))), 0, 255)
    c1 = np.tile(np.array([100, 100, 160]), (h, w // 3))
    image = rgb(c0, c1, np.full((h, w), 128))
    hole = np.zeros((h, w), bool)
    hole[16:32, 18:30] = True
    return image, hole


def spec_std(image: np.ndarray, hole: np.ndarray) -> np.ndarray:
    """The grain's std as documented: 1.4826 x the median absolute deviation, per channel, of the
    image less its Gaussian blur (sigma 1.5) over the 4 px around the hole."""
    ring = cv2.dilate(hole.astype(np.uint8), np.ones((9, 9), np.uint8)).astype(bool) & ~hole
    assert ring.sum() == 24 * 20 - 16 * 12  # the scene's hole is 16 x 12
    f = image.astype(np.float32)
    d = (f - cv2.GaussianBlur(f, (0, 0), 1.5))[ring]
    return 1.4826 * np.median(np.abs(d - np.median(d, axis=0)), axis=0)


def test_the_grain_is_the_robust_std_of_the_detail_around_the_hole_per_channel() -> None:
    image, hole = grain_scene()
    std = spec_std(image, hole)
    assert std[0] > 8 and std[1] == 0 and std[2] == 0
    base = fill_rows(image, hole, np.random.default_rng(3), grain=0).astype(np.float64)
    z = np.random.default_rng(3).normal(0.0, 1.0, hole.shape)
    for grain in (1.0, 2.5):
        out = fill_rows(image, hole, np.random.default_rng(3), grain=grain).astype(np.float64)
        assert np.array_equal(out[~hole], image[~hole])
        expected = base[hole] + z[hole][:, None] * std * grain
        assert np.abs(out[hole] - expected).max() <= 1.0  # both sides rounded once
        assert np.abs(out[hole, 0] - base[hole, 0]).max() > 3 * grain  # the noise is there
    default = fill_rows(image, hole, np.random.default_rng(3))
    assert np.array_equal(default, fill_rows(image, hole, np.random.default_rng(3), grain=1.0))


# --- inpaint ----------------------------------------------------------------------------------


ELLIPSE_7 = np.array([[0, 0, 0, 1, 0, 0, 0], [0, 1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 1, 1, 1],
                      [1, 1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1, 1], [0, 1, 1, 1, 1, 1, 0],
                      [0, 0, 0, 1, 0, 0, 0]], bool)


def test_inpaint_dilates_the_hole_with_an_ellipse_and_passes_the_grain(monkeypatch) -> None:
    calls: list[tuple[np.ndarray, float]] = []

    def spy(image, hole, rng, grain=1.0):
        calls.append((hole, grain))
        return image.copy()

    monkeypatch.setattr(_inpaint, "fill_rows", spy)
    image = np.zeros((11, 11, 3), np.uint8)
    hole = np.zeros((11, 11), bool)
    hole[5, 5] = True
    rng = np.random.default_rng(0)
    inpaint(image, hole, rng)  # defaults: rows, a 3-px ellipse, grain 1
    assert np.array_equal(calls[-1][0][2:9, 2:9], ELLIPSE_7) and calls[-1][0].sum() == ELLIPSE_7.sum()
    assert calls[-1][1] == 1.0
    inpaint(image, hole, rng, dilate=1, grain=0.25)
    assert np.array_equal(calls[-1][0][4:7, 4:7], [[0, 1, 0], [1, 1, 1], [0, 1, 0]])
    assert calls[-1][0].sum() == 5 and calls[-1][1] == 0.25
    inpaint(image, hole, rng, dilate=0)
    assert np.array_equal(calls[-1][0], hole)


@pytest.mark.parametrize("method", ["telea", "ns"])
def test_inpaint_hands_opencv_bgr_its_flag_radius_and_a_255_mask(monkeypatch, method) -> None:
    seen: dict[str, Any] = {}

    def spy(bgr, mask, radius, flag):
        seen.update(bgr=bgr.copy(), mask=mask.copy(), radius=radius, flag=flag)
        out = bgr.copy()
        out[..., 0] = 1  # OpenCV's blue channel
        return out

    monkeypatch.setattr(cv2, "inpaint", spy)
    image = rgb(np.full((5, 5), 10), np.full((5, 5), 20), np.full((5, 5), 30))
    hole = np.zeros((5, 5), bool)
    hole[2, 2] = True
    out = inpaint(image, hole, np.random.default_rng(0), method=method, dilate=0)
    assert np.array_equal(seen["bgr"], image[..., ::-1])
    assert seen["mask"].dtype == np.uint8 and seen["mask"].max() == 255
    assert np.array_equal(seen["mask"] > 0, hole)
    assert seen["radius"] == 5.0
    assert seen["flag"] == (cv2.INPAINT_TELEA if method == "telea" else cv2.INPAINT_NS)
    assert out[..., 2].tolist() == [[1] * 5] * 5 and out[..., :2].tolist() == image[..., :2].tolist()
    inpaint(image, hole, np.random.default_rng(0), method=method, dilate=0, radius=2.5)
    assert seen["radius"] == 2.5


def test_inpaint_refuses_an_unknown_method_naming_the_known_ones() -> None:
    with pytest.raises(ValueError) as info:
        inpaint(np.zeros((3, 3, 3), np.uint8), np.zeros((3, 3), bool), np.random.default_rng(0),
                method="blur")
    assert str(info.value) == "inpaint method 'blur' is not one of rows, telea, ns"


# --- surroundings_prompt ----------------------------------------------------------------------


def ring_sample(label: np.ndarray, classes: list[str]) -> Sample:
    mask = np.zeros(label.shape, bool)
    mask[12:18, 12:18] = True
    return Sample("s", np.zeros((*label.shape, 3), np.uint8), label, mask, classes, "car", "",
                  255)


def chebyshev(shape: tuple[int, int]) -> np.ndarray:
    """Each pixel's Chebyshev distance to the 6x6 object at rows/cols 12..17."""
    ys, xs = np.indices(shape)
    dy = np.maximum(np.maximum(12 - ys, ys - 17), 0)
    dx = np.maximum(np.maximum(12 - xs, xs - 17), 0)
    return np.maximum(dy, dx)


def test_the_surroundings_are_the_two_commonest_classes_within_5px_of_the_object() -> None:
    classes = ["road", "building", "side_walk", "sky", "car"]
    dist = chebyshev((30, 30))
    label = np.full((30, 30), 3, np.int64)  # sky beyond 5 px: the most pixels, not counted
    label[dist <= 5] = 1  # building: bands 3 to 5 (44 + 52 + 60 px, less side walk's 16)
    label[(dist >= 1) & (dist <= 2)] = 0  # road: 28 + 36 px
    label[(dist == 5) & (np.indices((30, 30))[1] < 12)] = 2  # side walk: 16 px, 5 px to the left
    label[dist == 0] = 4  # the object's own pixels are not its surroundings
    s = ring_sample(label, classes)
    assert surroundings_prompt(s) == "a photo of building and road"
    assert surroundings_prompt(s, top=3) == "a photo of building and road and side walk"
    assert surroundings_prompt(s, width=4, top=3) == "a photo of building and road"
    assert surroundings_prompt(s, width=6, top=3) == "a photo of building and sky and road"  # 68 px
    # only the left and top bands are sidewalk: both signs of each offset are searched
    label2 = np.full((30, 30), 0, np.int64)
    label2[:, :12] = 2
    label2[:12, :] = 2
    label2[dist == 0] = 4
    assert surroundings_prompt(ring_sample(label2, classes), top=1) == "a photo of side walk"


def test_ignored_and_unknown_ids_are_not_surroundings_and_nothing_known_gives_no_prompt() -> None:
    classes = ["road", "building", "sky"]
    dist = chebyshev((30, 30))
    label = np.full((30, 30), 1, np.int64)
    label[(dist >= 1) & (dist <= 3)] = 255  # ignore: the most pixels of the ring
    label[dist == 4] = 3  # an id past the classes
    label[dist == 5] = -1
    label[(dist == 5) & (np.indices((30, 30))[1] < 12)] = 0  # a little road
    assert surroundings_prompt(ring_sample(label, classes)) == "a photo of road"
    label[dist == 5] = 255
    assert surroundings_prompt(ring_sample(label, classes)) == ""


# --- transforms -------------------------------------------------------------------------------


def test_background_fill_reads_its_spellings_and_names_the_choices() -> None:
    assert background_fill(["sky", "background"], 255) == 1  # default: auto
    assert background_fill(["sky", "_background_"], 255, "auto") == 1
    assert background_fill(["sky", "Backgroud"], 255, "auto") == 1
    assert background_fill(["sky", "road"], 255, "auto") == 255
    assert background_fill(["sky", "road"], 255, " Road ") == 1
    assert background_fill(["sky", "background"], 7, "ignore") == 7
    with pytest.raises(PluginError) as info:
        background_fill(["sky", "road"], 255, "grass")
    assert str(info.value.args[0]) == "fill='grass' is not a class of this dataset"
    assert info.value.hint == "use fill=auto, fill=ignore or one of: sky, road"


def test_boxes_sides_and_the_target_box() -> None:
    mask = np.zeros((10, 12), bool)
    mask[2:5, 3:9] = True
    assert bbox(mask) == (3, 2, 9, 5)
    assert border_sides(mask) == set()
    for rows, cols, side in ((slice(0, 3), slice(3, 5), "top"), (slice(7, 10), slice(3, 5), "bottom"),
                             (slice(3, 5), slice(0, 2), "left"), (slice(3, 5), slice(10, 12), "right")):
        m = np.zeros((10, 12), bool)
        m[rows, cols] = True
        assert border_sides(m) == {side}
        m1 = np.zeros((10, 12), bool)
        m1[rows.start + (side == "top"):rows.stop - (side == "bottom"),
           cols.start + (side == "left"):cols.stop - (side == "right")] = True
        assert border_sides(m1) == set()  # one pixel in from the border: not cut
    assert target_box((5, 5, 6, 6), 0.5) == (5, 5, 1, 1)  # never smaller than a pixel
    assert target_box((4, 4, 8, 10), (0.5, 2.0), (1, -2)) == (6, -1, 2, 12)


def object_sample(mask: np.ndarray, image: np.ndarray | None = None) -> Sample:
    label = np.where(mask, 2, 0).astype(np.int64)
    if image is None:
        image = np.zeros((*mask.shape, 3), np.uint8)
    return Sample("o", image, label, mask, ["road", "sky", "car"], "car", "", 255)


def test_a_shrunken_object_averages_its_own_pixels_only_and_keeps_its_labels_nearest() -> None:
    mask = np.zeros((12, 12), bool)
    mask[4:8, 4:8] = True
    mask[4, 4] = False  # the top-left 2x2 block holds three object pixels
    image = np.full((12, 12, 3), 250, np.uint8)  # the background must not bleed in
    block = np.array([[250, 10, 0, 0], [20, 30, 0, 0], [7, 8, 200, 100], [9, 11, 50, 255]])
    image[4:8, 4:8, 0] = block
    image[4:8, 4:8, 1] = 255 - block
    image[4:8, 4:8, 2] = 3
    s = object_sample(mask, image)
    out = transform_object(s, 0.5, (0, 0), fill=0)
    # box (4,4)-(8,8) halves about its centre to 2x2 at (5,5)
    assert out.metadata == {"scale": [0.5, 0.5], "shift": [0, 0], "box": [4, 4, 8, 8],
                            "new_box": [5, 5, 7, 7], "fill": 0, "uncovered_px": 15 - 4}
    assert out.value == "" and out.mask[5:7, 5:7].all() and out.mask.sum() == 4
    assert out.image[5:7, 5:7, 0].tolist() == [[20, 0], [9, 151]]  # (10+20+30)/3; (50+200+100+255)/4
    assert out.image[5:7, 5:7, 1].tolist() == [[235, 255], [246, 104]]
    assert out.image[5:7, 5:7, 2].tolist() == [[3, 3], [3, 3]]
    assert out.repaint is not None and np.array_equal(out.repaint, mask & ~out.mask)
    assert (out.label[5:7, 5:7] == 2).all() and (out.label[out.repaint] == 0).all()


def test_the_object_may_touch_every_border_but_not_leave_the_image() -> None:
    mask = np.zeros((10, 10), bool)
    mask[4:6, 4:6] = True
    s = object_sample(mask)
    for shift in ((-4, 0), (0, -4), (4, 0), (0, 4), (4, 4)):
        moved = transform_object(s, 1.0, shift, fill=0)
        assert moved.mask.sum() == 4
    for shift, box in (((-5, 0), "(-1,4)+2x2"), ((0, -5), "(4,-1)+2x2"), ((5, 0), "(9,4)+2x2"),
                       ((0, 5), "(4,9)+2x2")):
        with pytest.raises(SkipSample) as info:
            transform_object(s, 1.0, shift, fill=0)
        assert info.value.reason == "no-room"
        assert info.value.detail == f"the moved object box {box} leaves the 10x10 image"


def test_the_grain_is_clipped_to_the_8bit_range() -> None:
    image, hole = grain_scene()
    gen = np.random.default_rng(11)
    image[..., 0] = np.clip(np.round(245 + gen.normal(0, 12, hole.shape)), 0, 255)
    image[..., 2] = np.clip(np.round(10 + gen.normal(0, 12, hole.shape)), 0, 255)
    base = fill_rows(image, hole, np.random.default_rng(3), grain=0).astype(np.float64)
    out = fill_rows(image, hole, np.random.default_rng(3), grain=2.0).astype(np.float64)
    z = np.random.default_rng(3).normal(0.0, 1.0, hole.shape)[hole]
    raw = base[hole] + z[:, None] * spec_std(image, hole) * 2.0
    assert (raw[:, 0] > 256).sum() > 10 and (raw[:, 2] < -1).sum() > 10  # would wrap around
    assert np.abs(out[hole] - np.clip(raw, 0, 255)).max() <= 1.0


def test_no_grain_or_no_hole_draws_nothing_and_an_all_hole_image_is_left_as_it_is() -> None:
    image, hole = grain_scene()
    for h, grain in ((hole, 0.0), (np.zeros_like(hole), 1.0)):
        gen = np.random.default_rng(5)
        fill_rows(image, h, gen, grain=grain)
        assert gen.random() == np.random.default_rng(5).random()
    everything = np.ones_like(hole)
    assert np.array_equal(fill_rows(image, everything, np.random.default_rng(0)), image)
