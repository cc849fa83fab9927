"""Sample preparation: the salient object, skips with reasons, captions and text edits."""

from __future__ import annotations

import numpy as np
import pytest

from segtk.core.editing import Sample
from segtk.core.samples import (
    DEFAULT_EXCLUDE,
    SKIP_REASONS,
    VALUES,
    Skip,
    allowed_classes,
    caption,
    edit_prompt,
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
    assert cls == TREE and mask.sum() == 6 * 13  # the larger of the two tree parts (rows 45..57)


def test_exclusion_and_only() -> None:
    image, label = street()
    everything = prepare_sample("s", image, label, CLASSES, exclude=())
    assert everything.class_name == "road"  # 1704 px, one region around the objects
    assert prepare_sample("s", image, label, CLASSES, exclude=["road"]).class_name == "sky"
    only = prepare_sample("s", image, label, CLASSES, only=["tree"], min_area=0.01)
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


def test_captions_and_text_edits() -> None:
    image, label = street()
    obj = prepare_sample("s", image, label, CLASSES)
    scene = prepare_sample("s", image, label, CLASSES, level="image")
    assert caption("apple") == "a photo of an apple"
    assert edit_prompt("color", "orange", obj) == "a photo of an orange car"
    assert edit_prompt("material", "wood", obj) == "a photo of a car made of wood"
    assert edit_prompt("size", "0.4", obj) == "a photo of a smaller car"
    assert edit_prompt("style", "watercolour", scene).startswith("a watercolour painting of a scene")
    assert edit_prompt("weather", "night", scene).endswith("at night")
    assert set(VALUES) == {"color", "material", "style", "weather", "size", "position"}
    assert {"red", "green", "blue", "yellow", "white", "black", "orange", "purple"} <= set(VALUES["color"])
    assert {"wood", "metal", "stone", "marble", "glass", "fabric"} <= set(VALUES["material"])
    assert {"painting", "sketch", "cartoon", "watercolour"} <= set(VALUES["style"])
    assert set(VALUES["weather"]) == {"snow", "rain", "fog", "night"}
