"""Sample preparation: the salient object, skips with reasons, captions; and the edit prompts
an Editor renders from its `prompt_templates`."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from segtk.core._editing import EditedSample, Editor, Sample, caption
from segtk.editkit._selection import (
    DEFAULT_EXCLUDE,
    SKIP_REASONS,
    Skip,
    allowed_classes,
    label_regions,
    largest_region,
    mask_problem,
    prepare_sample,
    scene_caption,
)

CLASSES = ["sky", "road", "car", "tree", "person"]
SKY, ROAD, CAR, TREE, PERSON = range(5)


def street(h: int = 60, w: int = 80) -> tuple[np.ndarray, np.ndarray]:
    """Sky on top, road below; a big car, two trees (split), a person; some ignore."""
    label = np.full((h, w), ROAD, np.int64)
    label[:20] = SKY  # 33% sky: the largest region, but excluded by default
    label[25:55, 10:50] = CAR  # 1200 px = 25%
    label[30:40, 60:62] = CAR  # a second, small car region
    label[22:58, 52:58] = TREE  # a tree split in two by a person
    label[35:45, 52:58] = PERSON
    label[0, 0] = 255
    image = np.random.default_rng(0).integers(0, 256, (h, w, 3), dtype=np.uint8)
    return image, label


def sampled(*args: Any, **kwargs: Any) -> Sample:
    """`prepare_sample(...)` where the test expects a sample, not a Skip."""
    sample = prepare_sample(*args, **kwargs)
    assert isinstance(sample, Sample), sample
    return sample


def test_picks_the_largest_single_class_region() -> None:
    image, label = street()
    sample = prepare_sample("s", image, label, CLASSES)
    assert isinstance(sample, Sample)
    assert sample.class_name == "car"
    expected = np.zeros_like(sample.mask)
    expected[25:55, 10:50] = True  # the big car only, not the small separate one
    assert np.array_equal(sample.mask, expected)
    assert sample.prompt == "a photo of a car"
    assert np.array_equal(sample.label, label) and sample.image is image


def test_connected_components_not_class_totals() -> None:
    # Tree pixels in total (2 x 6 x 18 = 216) beat the person but each part is smaller.
    _, label = street()
    cls, mask = largest_region(label, [TREE, PERSON])
    assert mask is not None
    assert cls == TREE and mask.sum() == 6 * 13  # the larger of the two tree parts (rows 45..57)


def test_label_regions_numbers_4_connected_regions_by_their_first_pixel() -> None:
    # A U whose right arm starts in row 0 (its runs meet only in row 2), a lone pixel, a hook
    # that starts in row 2 but reaches back left in row 4, and one more pixel; diagonals do not
    # touch.
    mask = np.array([[1, 0, 1, 0, 1],
                     [1, 0, 1, 0, 0],
                     [1, 1, 1, 0, 1],
                     [0, 0, 0, 0, 1],
                     [1, 0, 1, 1, 1]], bool)
    labels, n = label_regions(mask)
    assert n == 4 and labels.tolist() == [[1, 0, 1, 0, 2],
                                          [1, 0, 1, 0, 0],
                                          [1, 1, 1, 0, 3],
                                          [0, 0, 0, 0, 3],
                                          [4, 0, 3, 3, 3]]
    labels, n = label_regions(np.eye(3, dtype=bool))
    assert n == 3 and labels.tolist() == [[1, 0, 0], [0, 2, 0], [0, 0, 3]]
    labels, n = label_regions(np.zeros((2, 3), bool))
    assert n == 0 and labels.shape == (2, 3) and not labels.any()


def test_label_regions_equals_scipys_label_on_random_masks() -> None:
    """Same regions, same numbers as scipy.ndimage.label (4-connectivity), which the core used
    before: near the percolation threshold the regions wind and merge late."""
    ndimage = pytest.importorskip("scipy.ndimage")
    rng = np.random.default_rng(0)
    for _ in range(300):
        h, w = rng.integers(1, 48, 2)
        mask = rng.random((h, w)) < rng.uniform(0.3, 0.8)
        labels, n = label_regions(mask)
        expected, count = ndimage.label(mask)
        assert n == count and np.array_equal(labels, expected)


def test_label_regions_reads_a_0_255_mask_and_numbers_in_int32() -> None:
    """A mask as a PNG stores it (0/255) has the regions of its bool mask; the numbers are int32
    whether there are regions or not."""
    mask = np.array([[1, 1, 0, 1],
                     [0, 1, 0, 1],
                     [1, 0, 0, 0]], bool)
    labels, n = label_regions(mask)
    png_labels, png_n = label_regions(mask.astype(np.uint8) * 255)
    assert n == png_n == 3
    assert labels.tolist() == png_labels.tolist() == [[1, 1, 0, 2], [0, 1, 0, 2], [3, 0, 0, 0]]
    empty, _ = label_regions(np.zeros((2, 3), bool))
    assert labels.dtype == png_labels.dtype == empty.dtype == np.int32


def test_largest_region_ties_single_pixels_and_none() -> None:
    label = np.zeros((6, 6), np.int64)  # class 0 (sky) is not asked for
    label[0:2, 0:3] = PERSON  # 6 px, found first
    label[3:5, 3:6] = CAR  # 6 px too: the lower class id wins the tie
    cls, mask = largest_region(label, [PERSON, CAR])
    assert cls == CAR and mask is not None and mask.tolist() == (label == CAR).tolist()
    dot = np.zeros((4, 4), np.int64)
    dot[2, 1] = TREE  # a region of one pixel is a region
    cls, mask = largest_region(dot, [TREE])
    assert cls == TREE and mask is not None and mask.tolist() == (dot == TREE).tolist()
    assert largest_region(dot, [CAR, PERSON]) == (-1, None)  # no pixel of these classes


def test_usable_mask_bounds_max_area_and_a_tenth_interior() -> None:
    """A mask may cover up to max_area (inclusive) and needs at least a tenth of its pixels
    interior (all four neighbours in the mask)."""
    full = np.zeros((20, 20), bool)
    full[:19] = True  # 380 of 400 px: exactly 95%
    assert mask_problem(full, "car", 0.2, 0.95) is None
    full[19, 0] = True
    problem = mask_problem(full, "car", 0.2, 0.95)
    assert problem is not None and problem.reason == "bad-mask"
    blob = np.zeros((10, 10), bool)
    blob[3:6, 3:6] = True  # 3x3: one interior pixel
    blob[3, 6] = True  # 10 px, 1 interior: exactly a tenth
    assert mask_problem(blob, "car", 0.05, 0.95) is None
    blob[3, 7] = True  # 11 px, 1 interior: less than a tenth
    problem = mask_problem(blob, "car", 0.05, 0.95)
    assert problem is not None and problem.reason == "bad-mask" and "thin" in problem.detail
    image, label = street(10, 10)
    label[:] = ROAD
    label[blob] = CAR
    thin = prepare_sample("s", image, label, CLASSES, min_area=0.05)
    assert isinstance(thin, Skip) and thin.reason == "bad-mask"
    label[3, 7] = ROAD
    assert sampled("s", image, label, CLASSES, min_area=0.05).class_name == "car"


def test_exclusion_and_only() -> None:
    image, label = street()
    everything = sampled("s", image, label, CLASSES, exclude=())
    assert everything.class_name == "road"  # 1704 px, one region around the objects
    assert sampled("s", image, label, CLASSES, exclude=["road"]).class_name == "sky"
    only = sampled("s", image, label, CLASSES, only=["tree"], min_area=0.01)
    assert only.class_name == "tree"
    assert allowed_classes(CLASSES) == [CAR, TREE, PERSON]
    assert {"sky", "road", "background"} <= set(DEFAULT_EXCLUDE)


@pytest.mark.parametrize("case,reason", [
    ("tiny", "tiny-object"), ("none", "no-object"), ("size", "bad-mask"), ("comb", "bad-mask"),
    ("whole", "bad-mask"),
])
def test_skips_with_reasons(case: str, reason: str) -> None:
    image, label = street()
    if case == "tiny":
        label[label == CAR] = ROAD
        label[25:30, 10:20] = CAR
    elif case == "none":
        label[:] = ROAD
        label[:10] = 255
    elif case == "size":
        label = label[:, :-1]
    elif case == "comb":  # one connected car region (>20%) that is only 1-px teeth: no interior
        label[label == CAR] = ROAD
        label[20, :] = CAR
        label[21:, ::2] = CAR
    elif case == "whole":
        label[:] = CAR
    result = prepare_sample("s", image, label, CLASSES)
    assert isinstance(result, Skip) and result.reason == reason
    assert result.reason in SKIP_REASONS and result.detail
    if case == "size":  # height and width against height and width
        assert result.detail == "label (60, 79) does not match image (60, 80)"
    elif case == "none":
        assert result.detail == "no pixel of an allowed class"


def test_min_area_is_configurable() -> None:
    image, label = street()
    assert isinstance(prepare_sample("s", image, label, CLASSES, min_area=0.3), Skip)
    assert isinstance(prepare_sample("s", image, label, CLASSES, min_area=0.25), Sample)


def test_image_level_sample_has_whole_mask_and_scene_caption() -> None:
    image, label = street()
    label[label == CAR] = ROAD  # no object needed for image-level edits
    sample = prepare_sample("s", image, label, CLASSES, level="image")
    assert isinstance(sample, Sample) and sample.mask.all() and sample.class_name == ""
    assert sample.prompt == "a photo of a scene with road, sky and tree"
    assert scene_caption(np.full((2, 2), 255), CLASSES) == "a photo of a scene with things"


def test_scene_caption_names_class_pixels_only() -> None:
    label = np.full((4, 5), -1)  # most pixels: a negative value, not a class
    label[0, :3] = 7  # not a class either (5 classes)
    label[1, :2] = 5  # one past the last class
    label[3, 0] = CAR
    assert scene_caption(label, CLASSES) == "a photo of a scene with car"
    label[2] = ROAD
    assert scene_caption(label, CLASSES) == "a photo of a scene with road and car"
    assert scene_caption(label, CLASSES, ignore_index=ROAD) == "a photo of a scene with car"
    many = [f"c{i}" for i in range(300)]  # 255 is a class id here, but still ignore by default
    label = np.full((3, 3), 255)
    label[0, 0] = 1
    assert scene_caption(label, many) == "a photo of a scene with c1"


@pytest.mark.parametrize("level", ["object", "image"])
def test_prepared_sample_carries_its_inputs_and_ignore_index(level: str) -> None:
    image, label = street()
    sample = sampled("s", image, label, CLASSES, level=level)
    assert sample.name == "s" and sample.image is image and sample.classes == CLASSES
    assert sample.label is label  # an int64 label is not copied
    assert sample.mask.dtype == bool and sample.ignore_index == 255
    png = sampled("p", image, label.astype(np.uint8), CLASSES, level=level, ignore_index=ROAD)
    assert png.label.dtype == np.int64 and np.array_equal(png.label, label)
    assert png.name == "p" and png.ignore_index == ROAD
    if level == "image":  # the ignore class is not named: sky 1599, car 1220, tree 156 px
        assert png.prompt == "a photo of a scene with sky, car and tree"
    else:
        assert png.class_name == "car" and png.mask.sum() == 1200


class Templated(Editor):
    name, attribute = "toy", "shade"
    values = ("orange", "dusk", "plain")
    prompt_templates = {"*": "a photo of {a_value} {cls}", "dusk": "{caption} at dusk",
                        "plain": "{attribute} of {subject} ({a_cls})"}

    def edit(self, sample, value, rng):
        return EditedSample(sample.image, sample.label, sample.mask, value)


class Untemplated(Templated):
    prompt_templates = {}


def test_captions_and_edit_prompts_from_templates() -> None:
    image, label = street()
    obj = sampled("s", image, label, CLASSES)
    scene = sampled("s", image, label, CLASSES, level="image")
    assert caption("apple") == "a photo of an apple" and caption("traffic_light").endswith(
        "a traffic light")
    editor = Templated()
    assert editor.prompt(obj, "orange") == "a photo of an orange car"  # "*": any value
    assert editor.prompt(scene, "orange") == "a photo of an orange scene"
    assert editor.prompt(scene, "dusk") == "a photo of a scene with road, sky and car at dusk"
    assert editor.prompt(obj, "plain") == "shade of a car (a car)"
    no_caption = Sample("s", image, label, obj.mask, CLASSES, "apple", "")
    assert editor.prompt(no_caption, "dusk") == "a photo of an apple at dusk"
    assert Untemplated().prompt(obj, "dusk") == "a photo of a car, shade: dusk"
    assert editor.write_prompt(obj, "dusk") == ("a photo of a car at dusk", "")
