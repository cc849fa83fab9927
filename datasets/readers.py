"""Built-in dataset readers behind `--data FORMAT:PATH`, registered like any plugin.

This module holds the layout helpers every reader shares and the `folder`, `edited` and
`camvid` readers; the public benchmark formats (cityscapes, voc, ade20k) live in
formats.py, and plugin.py registers them all. Readers find every pairing problem when they load (missing folder,
unknown split, image without label, no images at all); labels and images are read lazily and
checked by `Dataset.__getitem__` (size mismatch, ids outside the class list).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np

from segtk.core import (
    DataError,
    Dataset,
    Item,
    check_flat_split,
    convert,
    parse_pairs,
    read_image,
    read_label,
)
from segtk.core._data import default_palette
from segtk.core._specs import UNLABELLED
from segtk.storage.layout import CLASSES, IMAGES, LABELS, MANIFEST

LabelReader = Callable[[Path], np.ndarray]
Pairs = list[tuple[str, Callable[[], Item]]]

CAMVID_CLASSES = [
    "sky", "building", "pole", "road", "pavement", "tree",
    "signsymbol", "fence", "car", "pedestrian", "bicyclist",
]  # fmt: skip
# Things: the countable objects (COCO-Stuff's sense), the classes whose Cityscapes
# counterparts (person, rider, car, bicycle) are annotated per instance. Pole, sign and fence
# are not (stuff there), nor are building, tree or fence in COCO-Stuff.
CAMVID_THINGS = ["car", "pedestrian", "bicyclist"]
CAMVID_PALETTE = np.array(
    [[128, 128, 128], [128, 0, 0], [192, 192, 128], [128, 64, 128], [0, 0, 192], [128, 128, 0],
     [192, 128, 128], [64, 64, 128], [64, 0, 128], [64, 64, 0], [0, 128, 192]],
    dtype=np.uint8,
)  # fmt: skip


# --- layout helpers ---------------------------------------------------------------------------


IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".webp")


def dataset_root(arg: str, fmt: str, hint: str) -> Path:
    """The PATH of `FORMAT:PATH` as an existing folder, or an error naming it."""
    if not arg:
        raise DataError(f"--data {fmt}: no dataset path given", hint=f"syntax: {fmt}:PATH; {hint}")
    root = Path(arg).expanduser()
    if not root.exists():
        raise DataError(
            f"{root}: dataset folder not found", hint=f"check the PATH in --data {fmt}:PATH"
        )
    if not root.is_dir():
        raise DataError(f"{root}: is a file, not a dataset folder", hint=hint)
    return root


def _dir(path: Path, what: str, hint: str) -> Path:
    if not path.is_dir():
        raise DataError(f"{path}: {what} folder not found", hint=hint)
    return path


def _subdirs(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))


def _images(folder: Path) -> dict[str, Path]:
    """Image files by stem, sorted; hidden files (e.g. half-written .NAME.tmp) are skipped."""
    return {
        p.stem: p
        for p in sorted(folder.iterdir())
        if p.suffix.lower() in IMAGE_SUFFIXES and not p.name.startswith(".") and p.is_file()
    }


def split_folder(base: Path, split: str, hint: str) -> Path:
    """base/split, or an 'unknown split' error listing the splits that exist."""
    path = base / split
    if path.is_dir():
        return path
    available = ", ".join(_subdirs(base)) or "none"
    raise DataError(
        f"{base}: unknown split {split!r} (no {split}/ folder; available: {available})",
        hint=f"pass --split with one of: {available}",
    )


def make_pairs(entries: Iterable[tuple[str, Path, Path, LabelReader]]) -> Pairs:
    """(name, image file, label file, label reader) -> lazy readers of Items naming their files."""

    def reader(name: str, image: Path, label: Path, read: LabelReader) -> Callable[[], Item]:
        return lambda: Item(name, read_image(image), read(label), str(image), str(label))

    return [(name, reader(name, image, label, read)) for name, image, label, read in entries]


def missing_label(image: Path, expected: str, hint: str = "every image needs a label") -> DataError:
    return DataError(f"{image}: no label (expected {expected})", hint=hint)


def require_images(pairs: Pairs, folder: Path, what: str = "") -> Pairs:
    """Refuse an empty dataset, naming the folder (or list) that should have held the images."""
    if not pairs:
        looked = "" if what else f" (looked for {', '.join('*' + s for s in IMAGE_SUFFIXES)})"
        raise DataError(
            f"{folder}: no {what or 'images'} found{looked}",
            hint="check PATH and --split; the dataset has nothing to read",
        )
    return pairs


def pair_folders(
    image_dir: Path,
    label_dir: Path,
    label_reader: LabelReader,
    label_name: Callable[[str], str] = lambda stem: stem,
) -> Pairs:
    """Pair images with labels by name; a missing label is an error naming the image."""
    labels = _images(label_dir)
    entries = []
    for stem, img_path in _images(image_dir).items():
        lab_path = labels.get(label_name(stem))
        if lab_path is None:
            raise missing_label(
                img_path,
                f"{label_dir / label_name(stem)}.png or another image suffix",
                hint="every image needs a label with the same name",
            )
        entries.append((stem, img_path, lab_path, label_reader))
    return make_pairs(entries)


# --- folder and edited ------------------------------------------------------------------------


def read_classes(path: Path, file: Path | None = None) -> list[str]:
    """The class names of the folder `path`: its classes.txt, or `file` where the spec names
    one (`classes=FILE`, for a folder of pictures that holds only pictures)."""
    file = file or path / CLASSES
    if not file.is_file():
        raise DataError(
            f"{file}: not found",
            hint="a folder dataset lists its class names, one per line, in classes.txt; for a "
                 "folder you cannot write to, name a file: folder:DIR,classes=FILE",
        )
    classes = [line.strip() for line in file.read_text().splitlines() if line.strip()]
    if not classes:
        raise DataError(f"{file}: empty class list", hint="write one class name per line")
    return classes


def folder_dataset(root: Path, name: str, hint: str, labels_optional: bool = False,
                   mapping: dict[int, int] | None = None,
                   classes_file: Path | None = None) -> Dataset:
    """images/ + labels/ (same stems) + classes.txt; labels hold ids (P or grey PNGs).
    `labels_optional`: without labels/, the images with no labelled pixel (all ignore), the
    dataset marked unlabelled (`segtk.core._specs.UNLABELLED`), which only label-free jobs
    accept; the pictures may then lie in the folder itself (a camera's dump has no images/).
    `mapping`: stored id -> class id (or 255), applied as each label is read."""
    classes = read_classes(root, classes_file)
    flat = labels_optional and not (root / IMAGES).exists() and not (root / LABELS).exists() \
        and bool(_images(root))
    image_dir = root if flat else _dir(root / IMAGES, "images", hint)
    if labels_optional and not (root / LABELS).exists():
        return unlabelled_dataset(name, classes, image_dir, root / LABELS, hint)
    reader: LabelReader = read_label
    if mapping:
        check_mapping(mapping, classes, classes_file or root / CLASSES)
        reader = mapped_reader(mapping)
    pairs = pair_folders(image_dir, _dir(root / LABELS, "labels", hint), reader)
    return Dataset(
        name, classes, require_images(pairs, image_dir), palette=default_palette(len(classes))
    )


IGNORE_ID = 255
FOLDER_SYNTAX = "folder:PATH[,void=ID;ID][,map=FROM:TO;FROM:TO][,classes=FILE]"


def label_mapping(options: dict[str, str], where: str) -> dict[int, int]:
    """`void=11;12` and `map=11:255;3:2` -> {stored id: class id}: void ids become ignore
    (255); a map sends FROM to TO. An id both voided and mapped, or mapped twice, is refused."""
    hint = f"syntax: {FOLDER_SYNTAX}, e.g. folder:my_data,void=11 or folder:my_data,map=11:255"
    mapping: dict[int, int] = {}

    def add(source: int, target: int) -> None:
        if source in mapping:
            raise DataError(f"{where}: label id {source} is mapped twice", hint=hint)
        mapping[source] = target

    for source in convert(options.get("void", ""), list[int], "void", sep=";",
                          error=DataError, hint=hint) if "void" in options else []:
        add(source, IGNORE_ID)
    for pair in convert(options["map"], list[str], "map", sep=";", error=DataError,
                        hint=hint) if "map" in options else []:
        source_text, colon, target_text = pair.partition(":")
        if not colon:
            raise DataError(f"{where}: map item {pair!r} is not FROM:TO", hint=hint)
        add(convert(source_text, int, "map FROM", error=DataError, hint=hint),
            convert(target_text, int, "map TO", error=DataError, hint=hint))
    for source in mapping:
        if source < 0:
            raise DataError(f"{where}: label id {source} is negative", hint=hint)
    return mapping


def check_mapping(mapping: dict[int, int], classes: list[str], file: Path) -> None:
    """Every target is a class id of classes.txt or 255 (ignore)."""
    for source, target in mapping.items():
        if target != IGNORE_ID and not 0 <= target < len(classes):
            raise DataError(
                f"map={source}:{target}: {target} is not a class id of {file} "
                f"(0-{len(classes) - 1}) nor {IGNORE_ID} (ignore)",
                hint="map each stored id to a line number of classes.txt (from 0) or to 255")


def mapped_reader(mapping: dict[int, int]) -> LabelReader:
    """read_label, then each stored id of `mapping` replaced (all at once: map=1:2;2:1 swaps)."""
    def read(path: Path) -> np.ndarray:
        stored = read_label(path)
        out = stored.copy()
        for source, target in mapping.items():
            out[stored == source] = target
        return out

    return read


def unlabelled_dataset(name: str, classes: list[str], image_dir: Path, labels: Path,
                       hint: str) -> Dataset:
    """The images of `image_dir`, each with a label of ignore_index only (no ground truth);
    `extra[UNLABELLED]` says where the labels would be and how to add them."""
    def reader(stem: str, image: Path) -> Callable[[], Item]:
        def read() -> Item:
            pixels = read_image(image)
            return Item(stem, pixels, np.full(pixels.shape[:2], 255, dtype=np.int64), str(image))
        return read

    pairs = [(stem, reader(stem, path)) for stem, path in _images(image_dir).items()]
    return Dataset(name, classes, require_images(pairs, image_dir),
                   palette=default_palette(len(classes)),
                   extra={UNLABELLED: {"labels": str(labels), "hint": hint}})


def load_folder(arg: str, split: str | None) -> Dataset:
    """folder:PATH, optionally with ,void=ID;ID and ,map=FROM:TO;FROM:TO and ,classes=FILE
    after the path (a folder whose own name holds a comma is taken whole when it exists)."""
    hint = "a folder dataset holds images/, labels/ (same file names) and classes.txt"
    path, options = arg, {}
    if "," in arg and not Path(arg).expanduser().is_dir():
        path, _, rest = arg.partition(",")
        options = parse_pairs(filter(None, (p.strip() for p in rest.split(","))),
                              "folder option", ["void", "map", "classes"], error=DataError,
                              hint=f"syntax: {FOLDER_SYNTAX}")
    root = dataset_root(path, "folder", hint)
    check_flat_split(root, split, (), "folder")
    if options.get("classes") == "":
        raise DataError(f"folder:{arg}: classes= names no file",
                        hint=f"give the class-name file, one name per line: {FOLDER_SYNTAX}")
    classes = Path(options["classes"]).expanduser() if "classes" in options else None
    return folder_dataset(root, f"folder:{root.name}", hint, labels_optional=True,
                          mapping=label_mapping(options, f"folder:{arg}"), classes_file=classes)


def read_manifest(file: Path) -> list[dict[str, Any]]:
    """manifest.jsonl: one JSON object per line, kept as it is in Dataset.extra['manifest']
    (what plugins read; segtk reads the lines as jobs.edit_records.EditLine)."""
    return [record for _, record in json_lines(file)]


def json_lines(file: Path) -> list[tuple[int, dict[str, Any]]]:
    """(line number, JSON object) for each line of a JSON-lines file that is not blank."""
    records = []
    for number, line in enumerate(file.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataError(
                f"{file}:{number}: not valid JSON ({exc.msg})",
                hint=f"{file.name} holds one JSON object per line; rerun `segtk edit` to rewrite it",
            ) from exc
        if not isinstance(record, dict):
            raise DataError(f"{file}:{number}: expected a JSON object, got {type(record).__name__}")
        records.append((number, record))
    return records


def load_edited(arg: str, split: str | None) -> Dataset:
    """The output of `segtk edit`: the folder layout plus an optional manifest.jsonl."""
    hint = "an edited dataset (from `segtk edit`) holds images/, labels/, classes.txt"
    root = dataset_root(arg, "edited", hint)
    check_flat_split(root, split, (), "edited")
    dataset = folder_dataset(root, f"edited:{root.name}", hint)
    manifest = root / MANIFEST
    if manifest.is_file():
        dataset.extra["manifest"] = read_manifest(manifest)
    return dataset


# --- camvid -----------------------------------------------------------------------------------


def load_camvid(arg: str, split: str | None) -> Dataset:
    """SegNet layout: SPLIT/ and SPLITannot/; label 11 (void) becomes ignore."""
    hint = "CamVid (SegNet layout) has SPLIT/ and SPLITannot/ folders, e.g. val/ and valannot/"
    root, split = dataset_root(arg, "camvid", hint), split or "val"

    def label(path: Path) -> np.ndarray:
        lab = read_label(path)
        lab[lab == 11] = 255
        return lab

    if not (root / split).is_dir():
        available = ", ".join(s for s in _subdirs(root) if (root / f"{s}annot").is_dir()) or "none"
        raise DataError(
            f"{root}: unknown split {split!r} (no {split}/ folder; available: {available})",
            hint=f"pass --split with one of: {available}",
        )
    image_dir = root / split
    pairs = pair_folders(image_dir, _dir(root / f"{split}annot", f"{split}annot", hint), label)
    return Dataset(
        f"camvid-{split}", CAMVID_CLASSES, require_images(pairs, image_dir), palette=CAMVID_PALETTE,
        things=list(CAMVID_THINGS),
    )
