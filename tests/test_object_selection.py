"""Which object an edit changes (Gen4Seg §IV-A): instances ranked by area, thing classes only
(COCO-EA), the default (the largest region) unchanged, and the datasets' thing lists."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from segtk.cli import cli
from segtk.core import load_dataset
from segtk.core._editing import Sample
from segtk.datasets.formats import (
    ADE20K_CLASSES,
    ADE20K_THING_IDS,
    CITYSCAPES_CLASSES,
    CITYSCAPES_THINGS,
    VOC_CLASSES,
)
from segtk.datasets.readers import CAMVID_CLASSES, CAMVID_THINGS
from segtk.editkit._selection import Skip, prepare_sample, ranked_instances

CLASSES = ["sky", "road", "building", "car", "person", "tree"]
SKY, ROAD, BUILDING, CAR, PERSON, TREE = range(6)
THINGS = ["car", "person"]


def scene() -> tuple[np.ndarray, np.ndarray]:
    """A building (stuff) over 40% of the image, a car (thing) over 15%, a smaller person."""
    label = np.full((50, 80), ROAD, np.int64)
    label[:10] = SKY
    label[10:35, :64] = BUILDING  # 1600 px = 40%
    label[35:50, 0:40] = CAR  # 600 px = 15%
    label[38:50, 50:60] = PERSON  # 120 px
    image = np.random.default_rng(0).integers(0, 256, (50, 80, 3), dtype=np.uint8)
    return image, label


def sampled(*args: Any, **kwargs: Any) -> Sample:
    """`prepare_sample(...)` where the test expects a sample, not a Skip."""
    sample = prepare_sample(*args, **kwargs)
    assert isinstance(sample, Sample), sample
    return sample


def skipped(*args: Any, **kwargs: Any) -> Skip:
    """`prepare_sample(...)` where the test expects a Skip."""
    skip = prepare_sample(*args, **kwargs)
    assert isinstance(skip, Skip), skip
    return skip


def test_things_only_picks_the_thing_over_a_larger_stuff_region() -> None:
    image, label = scene()
    default = sampled("s", image, label, CLASSES, min_area=0.05)
    assert default.class_name == "building"  # unchanged: the largest region of any class
    thing = sampled("s", image, label, CLASSES, min_area=0.05, things=THINGS)
    assert thing.class_name == "car" and thing.prompt == "a photo of a car"
    expected = np.zeros(label.shape, bool)
    expected[35:50, 0:40] = True
    assert np.array_equal(thing.mask, expected)
    for objects in ("largest", "ranked"):  # both rules take the top-ranked thing here
        picked = sampled("s", image, label, CLASSES, min_area=0.05, things=THINGS,
                                objects=objects)
        assert picked.class_name == "car"
    # things within --classes / --exclude: the car excluded, the person is next
    person = sampled("s", image, label, CLASSES, min_area=0.01, things=THINGS,
                            exclude=["car"])
    assert person.class_name == "person"
    tiny = prepare_sample("s", image, label, CLASSES, things=THINGS)  # min_area 0.2 > 15%
    assert isinstance(tiny, Skip) and tiny.reason == "tiny-object" and "car" in tiny.detail
    none = prepare_sample("s", image, label, CLASSES, things=["bus"])
    assert isinstance(none, Skip) and none.reason == "no-object"


def test_instances_are_ranked_by_area_then_class_then_position() -> None:
    label = np.zeros((40, 40), np.int64)  # class 0 (sky) is not asked for
    label[0:10, 0:20] = CAR  # 200 px, found first
    label[20:30, 0:20] = CAR  # 200 px, a second car instance of the same size
    label[0:12, 25:40] = PERSON  # 180 px
    label[15:18, 25:40] = TREE  # 45 px
    label[20:35, 25:40] = BUILDING  # 225 px
    label[36:40, 30:35] = PERSON  # 20 px
    ranked = ranked_instances(label, [BUILDING, CAR, PERSON, TREE])
    assert [(i.class_id, i.area) for i in ranked] == [
        (BUILDING, 225), (CAR, 200), (CAR, 200), (PERSON, 180), (TREE, 45), (PERSON, 20)]
    first_car, second_car = ranked[1].mask(), ranked[2].mask()
    assert first_car[0, 0] and not first_car[20, 0] and second_car[20, 0]  # row-major order
    assert [i.class_id for i in ranked_instances(label, [BUILDING, CAR, PERSON, TREE],
                                                 min_pixels=100)] == [BUILDING, CAR, CAR, PERSON]

    tie = np.zeros((20, 20), np.int64)
    tie[0:5, 0:10] = PERSON  # 50 px, first in row-major order
    tie[10:15, 0:10] = CAR  # 50 px: the lower class id wins the tie
    assert [i.class_id for i in ranked_instances(tie, [CAR, PERSON])] == [CAR, PERSON]


def test_instances_down_to_min_pixels_are_kept() -> None:
    label = np.zeros((6, 6), np.int64)
    label[0:2, 0:2] = CAR  # 4 px
    label[4, 4] = PERSON  # a one-pixel instance
    assert [(i.class_id, i.area) for i in ranked_instances(label, [CAR, PERSON])] == [
        (CAR, 4), (PERSON, 1)]
    assert [(i.class_id, i.area) for i in ranked_instances(label, [CAR, PERSON], min_pixels=4)] == [
        (CAR, 4)]


def test_ranked_takes_an_instance_covering_exactly_min_area() -> None:
    """7 of 100 px is min_area 0.07 exactly, though 0.07 * 100 is a hair above 7 in floating
    point: the instance is as usable for "ranked" as its mask is."""
    label = np.full((10, 10), ROAD, np.int64)
    label[0:5:2] = CAR  # three one-pixel-high stripes joined by a column: a ragged car
    label[0:5, 0] = CAR
    for row, col in [(6, 5), (7, 4), (7, 5), (7, 6), (8, 5), (7, 7), (7, 8)]:
        label[row, col] = PERSON  # a plus (one interior pixel) and a tail: 7 px
    image = np.zeros((10, 10, 3), np.uint8)
    largest = skipped("s", image, label, CLASSES, min_area=0.07)
    assert largest.reason == "bad-mask" and "car" in largest.detail
    ranked = sampled("s", image, label, CLASSES, min_area=0.07, objects="ranked")
    assert ranked.class_name == "person" and int(ranked.mask.sum()) == 7
    assert skipped("s", image, label, CLASSES, min_area=0.08, objects="ranked") == largest


def test_ranked_without_an_allowed_pixel_is_no_object() -> None:
    image, label = scene()
    for objects in ("largest", "ranked"):
        none = skipped("s", image, label, CLASSES, objects=objects, only=["bus"])
        assert none.reason == "no-object"


def test_ranked_takes_the_next_instance_when_the_largest_mask_is_unusable() -> None:
    label = np.full((60, 60), ROAD, np.int64)
    label[1:59:2, 2:58] = CAR  # 29 one-pixel-high stripes joined by a column: 1 ragged car
    label[1:59, 2] = CAR
    label[20:45, 20:45] = ROAD
    label[22:43, 22:43] = PERSON  # 441 px, a solid person inside the stripes' gap
    stripes = ranked_instances(label, [CAR, PERSON])[0]
    assert stripes.class_id == CAR and stripes.area > 441
    largest = prepare_sample("s", np.zeros((60, 60, 3), np.uint8), label, CLASSES, min_area=0.05)
    assert isinstance(largest, Skip) and largest.reason == "bad-mask"  # the old behaviour
    ranked = sampled("s", np.zeros((60, 60, 3), np.uint8), label, CLASSES, min_area=0.05,
                            objects="ranked")
    assert ranked.class_name == "person" and int(ranked.mask.sum()) == 441
    # the usable one below min_area: ranked skips for the largest's reason, as largest does
    for min_area, reason in [(0.2, "bad-mask"), (0.5, "tiny-object")]:
        skips = [skipped("s", np.zeros((60, 60, 3), np.uint8), label, CLASSES,
                                min_area=min_area, objects=objects)
                 for objects in ("largest", "ranked")]
        assert skips[0] == skips[1] and skips[0].reason == reason
    with pytest.raises(ValueError, match="objects='biggest' is not one of largest, ranked"):
        prepare_sample("s", np.zeros((60, 60, 3), np.uint8), label, CLASSES, objects="biggest")


def test_the_datasets_thing_lists_name_their_classes() -> None:
    assert CAMVID_THINGS == ["car", "pedestrian", "bicyclist"]
    assert set(CAMVID_THINGS) <= set(CAMVID_CLASSES)
    assert set(CITYSCAPES_THINGS) <= set(CITYSCAPES_CLASSES) and len(CITYSCAPES_THINGS) == 8
    assert len(ADE20K_THING_IDS) == len(set(ADE20K_THING_IDS)) == 100
    assert {"person", "car", "bed", "flag"} <= {ADE20K_CLASSES[i] for i in ADE20K_THING_IDS}
    assert not {"wall", "sky", "road", "tree", "grass"} & {ADE20K_CLASSES[i] for i in ADE20K_THING_IDS}
    assert VOC_CLASSES[0] == "background"


def _cli(*args: str):
    return CliRunner().invoke(cli, list(args))


def test_edit_things_only_and_ranked_are_recorded_and_refused_without_things(tmp_path) -> None:
    out = tmp_path / "things"
    base = ["edit", "--plugin", "color", "--values", "red", "--limit", "3", "--min-area", "0.01"]
    plain = _cli(*base, "--out", str(tmp_path / "plain"))
    assert plain.exit_code == 0, plain.output
    classes = {json.loads(line)["class"]
               for line in (tmp_path / "plain" / "manifest.jsonl").read_text().splitlines()}
    assert classes == {"building"}  # the demo scenes' largest region
    run = json.loads((tmp_path / "plain" / "run.json").read_text())["config"]
    assert "objects" not in run and "things_only" not in run  # older runs resume as before

    result = _cli(*base, "--things-only", "--objects", "ranked", "--out", str(out))
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in (out / "manifest.jsonl").read_text().splitlines()]
    assert len(records) == 3 and {r["class"] for r in records} == {"car"}
    run = json.loads((out / "run.json").read_text())["config"]
    assert run["things_only"] is True and run["objects"] == "ranked"
    again = _cli(*base, "--out", str(out), "--resume")  # left out: run.json's selection
    assert again.exit_code == 0, again.output
    other = _cli(*base, "--objects", "largest", "--out", str(out), "--resume")  # refused
    assert other.exit_code != 0 and "with --objects ranked, not --objects largest" in other.output

    # an edited dataset declares no things: refused before its OUT is made
    none = tmp_path / "none"
    refused = _cli("edit", "--plugin", "color", "--values", "red", "--things-only",
                   "--data", f"edited:{out}", "--out", str(none))
    assert refused.exit_code != 0 and "declares no thing classes" in refused.output
    assert "--classes" in refused.output and not none.exists()
    refused = _cli(*base, "--things-only", "--classes", "building", "--out", str(none))
    assert refused.exit_code != 0 and "no thing class of demo is allowed" in refused.output


def test_bench_edits_things_only_edits_and_scores_the_same_thing(tmp_path) -> None:
    """bench edits takes the same selection options: every subset edits the car, and the
    geometry reference (original-object) scores the same car the size editor moved."""
    from PIL import Image

    out = tmp_path / "bench"
    result = _cli("bench", "edits", "--models", "demo", "--attributes", "color,size", "--values",
                  "size=0.2", "--limit", "2", "--executor", "inline", "--min-area", "0.01",
                  "--things-only", "--objects", "ranked", "--out", str(out))
    assert result.exit_code == 0, result.output
    for subset in ("color", "size-0.2"):
        records = (out / "edits" / subset / "manifest.jsonl").read_text().splitlines()
        assert {json.loads(line)["class"] for line in records} == {"car"}
    car = load_dataset("demo", None, 1).classes.index("car")
    masks = sorted((out / "edits" / "original-object" / "masks").glob("*.png"))
    assert len(masks) == 2
    for path in masks:
        mask = np.asarray(Image.open(path)) > 0
        label = np.asarray(Image.open(out / "edits" / "size-0.2" / "source" / "labels" / path.name))
        assert mask.any() and (label[mask] == car).all()
    config = json.loads((out / "run.json").read_text())["config"]
    assert (config["min_area"], config["objects"], config["things_only"]) == (0.01, "ranked", True)
