"""mR (Gen4Seg Eq. 11) for every edit group and level, against a table computed by hand.

Each subset's confusion is made so that its dataset mIoU is a round number (written below, not
recomputed with segtk's metrics), split over two images so that per-image averaging would give
other numbers. Appearance subsets average over every appearance attribute against Recon (or
Original without it); geometry levels each count as a subset against Original-object, scored on
the classes present in the object labels."""

from __future__ import annotations

import pytest

from segtk.benchmarks.edits import ScoreLine, Shard, Subset, aggregate

# (kind, object_only, confusion over 2 classes + the "outside" column, its dataset mIoU %)
# Whole-image subsets: [[p, 0, 10-p], [0, 10, 0]] -> IoU p/10 and 1 -> mIoU (p/10 + 1)/2.
# Object subsets: [[p, 10-p, 0], [0, 0, 0]] -> class 1 is absent from the labels, so only
# class 0 counts: mIoU p/10 (a whole-image mean would add class 1's IoU of 0).
SUBSETS = {
    "original": ("", False, [[8, 0, 2], [0, 10, 0]], 90.0),
    "recon": ("", False, [[6, 0, 4], [0, 10, 0]], 80.0),
    "color": ("appearance", False, [[4, 0, 6], [0, 10, 0]], 70.0),
    "material": ("appearance", False, [[2, 0, 8], [0, 10, 0]], 60.0),
    "original-object": ("", True, [[9, 1, 0], [0, 0, 0]], 90.0),
    "size-0.2": ("geometry", True, [[5, 5, 0], [0, 0, 0]], 50.0),
    "size-0.4": ("geometry", True, [[3, 7, 0], [0, 0, 0]], 30.0),
    "position-0.2": ("geometry", True, [[7, 3, 0], [0, 0, 0]], 70.0),
}


def split(conf: list[list[int]]) -> tuple[list[list[int]], list[list[int]]]:
    """Two images' confusions that sum to `conf`: the first holds the diagonal (and half of
    the second row), the second the rest."""
    a = [[conf[0][0], 0, 0], [conf[1][0], conf[1][1] // 2, 0]]
    b = [[conf[r][c] - a[r][c] for c in range(3)] for r in range(2)]
    return a, b


def table(names: list[str], stray: bool = False) -> dict:
    shards, records = [], []
    for name in names:
        kind, object_only, conf, _ = SUBSETS[name]
        subset = Subset(name, "demo", None, ("a", "b"), object_only=object_only, kind=kind)
        shard = Shard("m", subset, ("a", "b"))
        shards.append(shard)
        for image, part in zip(("a", "b"), split(conf), strict=True):
            records.append(ScoreLine(key=shard.key(image), model="m", subset=name, kind=kind,
                                     image=image, confusion=part))
    if stray:  # a record of an image no shard plans (a larger earlier run): never counted,
        # wherever it comes in the file
        records.insert(len(records) // 2, ScoreLine(key="m|color|z", model="m", subset="color",
                                                    kind="appearance", image="z",
                                                    confusion=[[0, 0, 50], [0, 0, 0]]))
    return aggregate(records, shards)


def test_every_subset_is_its_dataset_miou() -> None:
    result = table(list(SUBSETS), stray=True)
    assert result["miou"]["m"] == pytest.approx({n: v[3] for n, v in SUBSETS.items()})
    assert result["images"]["m"] == dict.fromkeys(SUBSETS, 2)


def test_mr_of_each_group_by_hand() -> None:
    groups = {g["group"]: g for g in table(list(SUBSETS), stray=True)["groups"]}
    appearance, geometry = groups["appearance"], groups["geometry"]
    assert appearance["reference"] == "recon" and appearance["subsets"] == ["color", "material"]
    assert appearance["reference_miou"] == pytest.approx(80.0)
    assert appearance["rmiou"] == pytest.approx(65.0)  # (70 + 60) / 2
    assert appearance["mr"] == pytest.approx(0.8125)  # 65 / 80
    assert geometry["reference"] == "original-object"
    assert geometry["subsets"] == ["size-0.2", "size-0.4", "position-0.2"]
    assert geometry["rmiou"] == pytest.approx(50.0)  # (50 + 30 + 70) / 3: each level a subset
    assert geometry["mr"] == pytest.approx(50.0 / 90.0)


def test_without_recon_appearance_is_measured_against_original() -> None:
    names = [n for n in SUBSETS if n != "recon"]
    groups = {g["group"]: g for g in table(names)["groups"]}
    assert groups["appearance"]["reference"] == "original"
    assert groups["appearance"]["mr"] == pytest.approx(65.0 / 90.0)
    assert groups["geometry"]["mr"] == pytest.approx(50.0 / 90.0)


def test_one_level_or_one_attribute_is_its_own_group_mean() -> None:
    groups = {g["group"]: g for g in table(["original", "original-object", "material", "size-0.4"])["groups"]}
    assert groups["appearance"]["mr"] == pytest.approx(60.0 / 90.0)
    assert groups["geometry"]["mr"] == pytest.approx(30.0 / 90.0)
    assert groups["geometry"]["subsets"] == ["size-0.4"]


def test_geometry_alone_and_geometry_without_its_object_reference() -> None:
    # No appearance subset: geometry still gets its group; no Original-object: it falls back
    # to Original; an appearance group without any reference is left out, geometry is not.
    alone = table(["original-object", "size-0.2"])["groups"]
    assert [(g["group"], g["reference"]) for g in alone] == [("geometry", "original-object")]
    assert alone[0]["mr"] == pytest.approx(50.0 / 90.0)
    whole = table(["original", "size-0.4"])["groups"]
    assert [(g["group"], g["reference"]) for g in whole] == [("geometry", "original")]
    assert whole[0]["mr"] == pytest.approx(30.0 / 90.0)
    no_reference = table(["color", "original-object", "size-0.2"])["groups"]
    assert [g["group"] for g in no_reference] == ["geometry"]
