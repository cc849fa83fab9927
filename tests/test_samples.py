"""Sample preparation: the salient object, skips with reasons, captions; and the edit prompts
an Editor renders from its `prompt_templates`."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from segtk.core._editing import EditedSample, Editor, Sample, caption
from segtk.core._samples import (
    DEFAULT_EXCLUDE,
    SKIP_REASONS,
    Skip,
    allowed_classes,
    label_regions,
    largest_region,
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
