"""Readers for public benchmark layouts: Cityscapes, Pascal VOC 2012, ADE20K (SceneParsing).

Each reads the dataset's real folder tree and the flat copies kept in ../shared/data, maps the
stored label encoding to class ids 0..K-1 with 255 = ignore, and refuses values the format does
not define, naming the file. Registered in plugin.py.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from segtk.core import DataError, Dataset, check_flat_split, read_label, voc_colormap
from segtk.core._data import default_palette
from segtk.datasets.readers import (
    _dir,
    _images,
    _subdirs,
    dataset_root,
    make_pairs,
    missing_label,
    pair_folders,
    require_images,
    split_folder,
)

IGNORE = 255

# --- Cityscapes -------------------------------------------------------------------------------

CITYSCAPES_CLASSES = [
    "road", "sidewalk", "building", "wall", "fence", "pole", "traffic light", "traffic sign",
    "vegetation", "terrain", "sky", "person", "rider", "car", "truck", "bus", "train",
    "motorcycle", "bicycle",
]  # fmt: skip
# Things: the classes Cityscapes annotates per instance (its "human" and "vehicle" groups).
CITYSCAPES_THINGS = ["person", "rider", "car", "truck", "bus", "train", "motorcycle", "bicycle"]
CITYSCAPES_PALETTE = np.array(
    [[128, 64, 128], [244, 35, 232], [70, 70, 70], [102, 102, 156], [190, 153, 153],
     [153, 153, 153], [250, 170, 30], [220, 220, 0], [107, 142, 35], [152, 251, 152],
     [70, 130, 180], [220, 20, 60], [255, 0, 0], [0, 0, 142], [0, 0, 70], [0, 60, 100],
     [0, 80, 100], [0, 0, 230], [119, 11, 32]],
    dtype=np.uint8,
)  # fmt: skip
# labelId -> trainId, from cityscapesScripts labels.py. Every other id 0..33 (unlabeled, ego
# vehicle, ..., parking, rail track, guard rail, bridge, tunnel, polegroup, caravan, trailer)
# and license plate (-1, stored as 255 in uint8 files) are ignored.
CITYSCAPES_TRAIN_IDS = {
    7: 0, 8: 1, 11: 2, 12: 3, 13: 4, 17: 5, 19: 6, 20: 7, 21: 8, 22: 9, 23: 10,
    24: 11, 25: 12, 26: 13, 27: 14, 28: 15, 31: 16, 32: 17, 33: 18,
}  # fmt: skip
_CITYSCAPES_LUT = np.full(256, -1, dtype=np.int64)  # -1: not a Cityscapes labelId
_CITYSCAPES_LUT[:34] = IGNORE
_CITYSCAPES_LUT[255] = IGNORE
for _id, _train in CITYSCAPES_TRAIN_IDS.items():
    _CITYSCAPES_LUT[_id] = _train


def cityscapes_train_ids(label_ids: np.ndarray, path: Path | str = "labels") -> np.ndarray:
    """Cityscapes labelIds (0..33, 255 = -1) -> trainIds (0..18, 255 = ignore)."""
    bad = (label_ids < 0) | (label_ids > 255)
    if not bad.any():
        mapped = _CITYSCAPES_LUT[label_ids]
        bad = mapped < 0
        if not bad.any():
            return mapped
    values = sorted(int(v) for v in np.unique(label_ids[bad]))[:8]
    raise DataError(
        f"{path}: values {values} are not Cityscapes labelIds (0-33)",
        hint="*_gtFine_labelIds.png must hold the raw Cityscapes ids, not colours or instance ids",
    )


def read_cityscapes_label_ids(path: Path) -> np.ndarray:
    return cityscapes_train_ids(read_label(path), path)


def load_cityscapes(arg: str, split: str | None) -> Dataset:
    """leftImg8bit/SPLIT/CITY/X_leftImg8bit.png with gtFine/SPLIT/CITY/X_gtFine_labelIds.png,
    or the same files flat in leftImg8bit/ and gtFine/ (read as the val split)."""
    hint = (
        "Cityscapes has leftImg8bit/SPLIT/CITY/*_leftImg8bit.png and "
        "gtFine/SPLIT/CITY/*_gtFine_labelIds.png (or both folders flat, without SPLIT/CITY)"
    )
    root = dataset_root(arg, "cityscapes", hint)
    images = _dir(root / "leftImg8bit", "leftImg8bit", hint)
    labels = _dir(root / "gtFine", "gtFine", hint)
    if any(images.glob("*_leftImg8bit.png")) or not _subdirs(images):
        check_flat_split(root, split, ("val",), "Cityscapes")
        split = "val"
        layout = "flat"
    else:
        split = split or "val"
        images = split_folder(images, split, hint)
        labels = _dir(labels / split, f"gtFine/{split}", hint)
        layout = "cityscapes"
    entries = []
    for image in sorted(images.rglob("*_leftImg8bit.png")):
        if image.name.startswith("."):
            continue
        name = image.name[: -len("_leftImg8bit.png")]
        folder = labels / image.parent.relative_to(images)
        label_ids = folder / f"{name}_gtFine_labelIds.png"
        train_ids = folder / f"{name}_gtFine_labelTrainIds.png"
        if label_ids.is_file():  # the raw ids are the source of truth; map them ourselves
            entries.append((name, image, label_ids, read_cityscapes_label_ids))
        elif train_ids.is_file():
            entries.append((name, image, train_ids, read_label))
        else:
            raise missing_label(
                image,
                f"{label_ids} or {train_ids.name}",
                hint="each Cityscapes image needs its gtFine labelIds (or labelTrainIds) PNG",
            )
    pairs = require_images(make_pairs(entries), images, "*_leftImg8bit.png images")
    return Dataset(
        f"cityscapes-{split}",
        CITYSCAPES_CLASSES,
        pairs,
        palette=CITYSCAPES_PALETTE,
        extra={"root": str(root), "layout": layout},
        things=list(CITYSCAPES_THINGS),
    )


# --- Pascal VOC 2012 --------------------------------------------------------------------------

VOC_CLASSES = [
    "background", "aeroplane", "bicycle", "bird", "boat", "bottle", "bus", "car", "cat",
    "chair", "cow", "diningtable", "dog", "horse", "motorbike", "person", "pottedplant",
    "sheep", "sofa", "train", "tvmonitor",
]  # fmt: skip


VOC_PALETTE = voc_colormap(256)
# RGB targets: colours of classes 0..20, plus the (224,224,192) boundary = ignore.
def _rgb(colour: np.ndarray) -> tuple[int, int, int]:
    return int(colour[0]), int(colour[1]), int(colour[2])


VOC_COLOURS = {_rgb(VOC_PALETTE[i]): i for i in range(len(VOC_CLASSES))}
VOC_COLOURS[_rgb(VOC_PALETTE[IGNORE])] = IGNORE


def read_voc_label(path: Path) -> np.ndarray:
    """Palette (P) PNGs hold the class indices; RGB targets are mapped through VOC_COLOURS."""
    return read_label(path, palette=VOC_COLOURS)


def _voc_root(root: Path) -> Path:
    for candidate in (root, root / "VOC2012", root / "VOCdevkit" / "VOC2012"):
        if (candidate / "JPEGImages").is_dir() or (candidate / "SegmentationClass").is_dir():
            return candidate
    return root


def load_voc(arg: str, split: str | None) -> Dataset:
    """JPEGImages/*.jpg + SegmentationClass/*.png (+ ImageSets/Segmentation/SPLIT.txt), or
    images/ + targets/ with RGB targets in the VOC colours (read as the val split)."""
    hint = (
        "Pascal VOC has JPEGImages/ and SegmentationClass/ (with ImageSets/Segmentation/"
        "SPLIT.txt), or images/ and targets/ with the same file names"
    )
    root = _voc_root(dataset_root(arg, "voc", hint))
    if (root / "images").is_dir() and (root / "targets").is_dir():
        check_flat_split(root, split, ("val",), "VOC")
        pairs = pair_folders(root / "images", root / "targets", read_voc_label)
        pairs = require_images(pairs, root / "images")
        return _voc(root, "val", pairs, "images+targets")
    images = _dir(root / "JPEGImages", "JPEGImages", hint)
    labels = _dir(root / "SegmentationClass", "SegmentationClass", hint)
    lists = root / "ImageSets" / "Segmentation"
    if not lists.is_dir():  # no split lists: every labelled image, as the default split
        check_flat_split(root, split, ("val",), "VOC")
        by_stem = _images(images)
        entries = []
        for name, label in _images(labels).items():
            if name not in by_stem:
                raise DataError(
                    f"{label}: no image {images / name}.jpg for this label",
                    hint="each SegmentationClass PNG needs its JPEGImages picture",
                )
            entries.append((name, by_stem[name], label, read_voc_label))
        return _voc(root, "val", require_images(make_pairs(entries), labels, "labels"), "voc")
    split = split or "val"
    list_file = lists / f"{split}.txt"
    if not list_file.is_file():
        available = ", ".join(sorted(p.stem for p in lists.glob("*.txt"))) or "none"
        raise DataError(
            f"{lists}: unknown split {split!r} (no {split}.txt; available: {available})",
            hint=f"pass --split with one of: {available}",
        )
    entries = []
    for name in list_file.read_text().split():
        image, label = images / f"{name}.jpg", labels / f"{name}.png"
        if not image.is_file():
            raise DataError(
                f"{list_file}: lists {name!r}, but {image} is missing",
                hint="the split list and JPEGImages/ disagree; is the download complete?",
            )
        if not label.is_file():
            raise missing_label(
                image, str(label), hint=f"{list_file.name} lists it for segmentation"
            )
        entries.append((name, image, label, read_voc_label))
    return _voc(root, split, require_images(make_pairs(entries), list_file, "image names"), "voc")


def _voc(root: Path, split: str, pairs, layout: str) -> Dataset:
    return Dataset(
        f"voc-{split}",
        VOC_CLASSES,
        pairs,
        palette=VOC_PALETTE[: len(VOC_CLASSES)],
        extra={"root": str(root), "layout": layout},
        things=VOC_CLASSES[1:],  # the 20 object classes: everything but background
    )


# --- ADE20K SceneParsing (ADEChallengeData2016) -----------------------------------------------

ADE20K_CLASSES = [
    "wall", "building", "sky", "floor", "tree", "ceiling", "road", "bed", "windowpane",
    "grass", "cabinet", "sidewalk", "person", "earth", "door", "table", "mountain", "plant",
    "curtain", "chair", "car", "water", "painting", "sofa", "shelf", "house", "sea", "mirror",
    "rug", "field", "armchair", "seat", "fence", "desk", "rock", "wardrobe", "lamp", "bathtub",
    "railing", "cushion", "base", "box", "column", "signboard", "chest of drawers", "counter",
    "sand", "sink", "skyscraper", "fireplace", "refrigerator", "grandstand", "path", "stairs",
    "runway", "case", "pool table", "pillow", "screen door", "stairway", "river", "bridge",
    "bookcase", "blind", "coffee table", "toilet", "flower", "book", "hill", "bench",
    "countertop", "stove", "palm", "kitchen island", "computer", "swivel chair", "boat", "bar",
    "arcade machine", "hovel", "bus", "towel", "light", "truck", "tower", "chandelier",
    "awning", "streetlight", "booth", "television receiver", "airplane", "dirt track",
    "apparel", "pole", "land", "bannister", "escalator", "ottoman", "bottle", "buffet",
    "poster", "stage", "van", "ship", "fountain", "conveyer belt", "canopy", "washer",
    "plaything", "swimming pool", "stool", "barrel", "basket", "waterfall", "tent", "bag",
    "minibike", "cradle", "oven", "ball", "food", "step", "tank", "trade name", "microwave",
    "pot", "animal", "bicycle", "lake", "dishwasher", "screen", "blanket", "sculpture", "hood",
    "sconce", "vase", "traffic light", "tray", "ashcan", "fan", "pier", "crt screen", "plate",
    "monitor", "bulletin board", "shower", "radiator", "glass", "clock", "flag",
]  # fmt: skip
# Things: the 100 of the 150 classes the ADE20K panoptic benchmark treats as countable objects
# (its "isthing" flags, as in Mask2Former's ADE20K panoptic registration), by class index.
ADE20K_THING_IDS = (
    7, 8, 10, 12, 14, 15, 18, 19, 20, 22, 23, 24, 27, 30, 31, 32, 33, 35, 36, 37, 38, 39, 41, 42,
    43, 44, 45, 47, 49, 50, 53, 55, 56, 57, 58, 62, 64, 65, 66, 67, 69, 70, 71, 72, 73, 74, 75, 76,
    78, 80, 81, 82, 83, 85, 86, 87, 88, 89, 90, 92, 93, 95, 97, 98, 102, 103, 104, 107, 108, 110,
    111, 112, 115, 116, 118, 119, 120, 121, 123, 124, 125, 126, 127, 129, 130, 132, 133, 134, 135,
    136, 137, 138, 139, 142, 143, 144, 146, 147, 148, 149,
)  # fmt: skip
ADE20K_SPLITS = {"val": "validation", "train": "training"}  # short names accepted for --split


def read_ade20k_label(path: Path) -> np.ndarray:
    """Grey PNG: 0 = unlabelled (-> 255), 1..150 -> classes 0..149."""
    raw = read_label(path)
    bad = (raw < 0) | (raw > len(ADE20K_CLASSES))
    if bad.any():
        values = sorted(int(v) for v in np.unique(raw[bad]))[:8]
        raise DataError(
            f"{path}: values {values} are outside ADE20K's 0-150 (0 = unlabelled)",
            hint="ADE20K SceneParsing annotations hold 0 (ignore) and 1-150",
        )
    out = raw - 1
    out[raw == 0] = IGNORE
    return out


def load_ade20k(arg: str, split: str | None) -> Dataset:
    """images/SPLIT/*.jpg + annotations/SPLIT/*.png (ADEChallengeData2016), or flat
    images/ + annotations/ (read as the validation split)."""
    hint = (
        "ADE20K (ADEChallengeData2016) has images/SPLIT/*.jpg and annotations/SPLIT/*.png, "
        "SPLIT = training or validation (or both folders flat, without SPLIT)"
    )
    root = dataset_root(arg, "ade20k", hint)
    if (root / "ADEChallengeData2016").is_dir():
        root = root / "ADEChallengeData2016"
    images = _dir(root / "images", "images", hint)
    labels = _dir(root / "annotations", "annotations", hint)
    if _subdirs(images) and not _images(images):
        split = ADE20K_SPLITS.get(split or "validation", split or "validation")
        images = split_folder(images, split, hint)
        labels = _dir(labels / split, f"annotations/{split}", hint)
        layout = "ade20k"
    else:
        check_flat_split(root, split, ("validation", "val"), "ADE20K")
        split, layout = "validation", "flat"
    pairs = require_images(pair_folders(images, labels, read_ade20k_label), images)
    return Dataset(
        f"ade20k-{split}",
        ADE20K_CLASSES,
        pairs,
        palette=default_palette(len(ADE20K_CLASSES)),
        extra={"root": str(root), "layout": layout},
        things=[ADE20K_CLASSES[i] for i in ADE20K_THING_IDS],
    )
