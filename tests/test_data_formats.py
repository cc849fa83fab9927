"""Readers on synthetic trees in the real dataset layouts, and the image/label file primitives."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from segtk.core import (
    DataError,
    DatasetPlugin,
    load_dataset,
    read_image,
    read_label,
    registry,
    write_png,
)
from segtk.datasets.formats import (
    ADE20K_CLASSES,
    CITYSCAPES_CLASSES,
    VOC_CLASSES,
    VOC_COLOURS,
    VOC_PALETTE,
)
from segtk.testing import DatasetSuite, shared

# cityscapesScripts labels.py, id 0..33 -> trainId, typed out independently of the reader.
TRAIN_ID_OF = [255] * 7 + [0, 1, 255, 255, 2, 3, 4, 255, 255, 255, 5, 255, 6, 7, 8, 9, 10,
                           11, 12, 13, 14, 15, 255, 255, 16, 17, 18]  # fmt: skip


def save(path: Path, array: np.ndarray, mode: str | None = None, palette=None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    img = Image.fromarray(np.asarray(array, dtype=np.uint8), mode=mode)
    if palette is not None:
        img.putpalette(np.asarray(palette, dtype=np.uint8).reshape(-1).tolist())
    img.save(path)
    return path


def mode_of(path: Path) -> str:
    with Image.open(path) as img:
        return img.mode


def rgb(h: int = 6, w: int = 8, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8)


# --- Cityscapes -------------------------------------------------------------------------------


def cityscapes_tree(root: Path) -> Path:
    ids = np.arange(48).reshape(6, 8) % 34  # every labelId 0..33 appears
    for split, city, frame in [
        ("val", "frankfurt", "000000_000001"),
        ("val", "frankfurt", "000000_000002"),
        ("val", "lindau", "000000_000019"),
        ("train", "aachen", "000000_000000"),
    ]:
        name = f"{city}_{frame}"
        save(root / "leftImg8bit" / split / city / f"{name}_leftImg8bit.png", rgb())
        save(root / "gtFine" / split / city / f"{name}_gtFine_labelIds.png", ids)
        save(root / "gtFine" / split / city / f"{name}_gtFine_color.png", rgb(seed=1))
    return root


def test_cityscapes_real_layout_maps_every_label_id(tmp_path: Path) -> None:
    root = cityscapes_tree(tmp_path / "cityscapes")
    ds = load_dataset(f"cityscapes:{root}")
    assert ds.name == "cityscapes-val" and ds.classes == CITYSCAPES_CLASSES
    assert ds.names == [
        "frankfurt_000000_000001",
        "frankfurt_000000_000002",
        "lindau_000000_000019",
    ]
    item = ds[2]
    expected = np.array(TRAIN_ID_OF)[np.arange(48).reshape(6, 8) % 34]
    assert np.array_equal(item.label, expected)
    assert item.image_path.endswith("leftImg8bit/val/lindau/lindau_000000_000019_leftImg8bit.png")
    train = load_dataset(f"cityscapes:{root}", split="train")
    assert train.name == "cityscapes-train" and train.names == ["aachen_000000_000000"]


def test_cityscapes_train_ids_only_when_label_ids_are_absent(tmp_path: Path) -> None:
    root = tmp_path / "cs"
    save(root / "leftImg8bit" / "a_1_leftImg8bit.png", rgb())
    save(root / "gtFine" / "a_1_gtFine_labelTrainIds.png", np.full((6, 8), 13))
    save(root / "leftImg8bit" / "b_1_leftImg8bit.png", rgb())
    save(root / "gtFine" / "b_1_gtFine_labelTrainIds.png", np.full((6, 8), 13))
    save(root / "gtFine" / "b_1_gtFine_labelIds.png", np.full((6, 8), 26))  # car as well
    a, b = load_dataset(f"cityscapes:{root}")
    assert a.label_path.endswith("a_1_gtFine_labelTrainIds.png") and (a.label == 13).all()
    assert b.label_path.endswith("b_1_gtFine_labelIds.png") and (b.label == 13).all()


def test_cityscapes_license_plate_stored_as_255_is_ignored(tmp_path: Path) -> None:
    root = tmp_path / "cs"
    save(root / "leftImg8bit" / "a_1_leftImg8bit.png", rgb(2, 2))
    save(root / "gtFine" / "a_1_gtFine_labelIds.png", np.array([[255, 26], [7, 0]]))
    assert load_dataset(f"cityscapes:{root}")[0].label.tolist() == [[255, 13], [0, 255]]


# --- Pascal VOC -------------------------------------------------------------------------------


def voc_tree(root: Path, lists: bool = True) -> Path:
    labels = {"2007_000032": 1, "2007_000033": 15, "2008_000001": 20}
    for i, (name, cls) in enumerate(labels.items()):
        save(root / "JPEGImages" / f"{name}.jpg", rgb(seed=i))
        label = np.zeros((6, 8), dtype=np.uint8)
        label[1:5, 2:6], label[1, 1] = cls, 255  # object with a boundary pixel
        write_png(root / "SegmentationClass" / f"{name}.png", label, palette=VOC_PALETTE)
    save(root / "JPEGImages" / "2009_000001.jpg", rgb())  # detection only: no segmentation
    if lists:
        sets = root / "ImageSets" / "Segmentation"
        sets.mkdir(parents=True)
        (sets / "train.txt").write_text("2007_000032\n")
        (sets / "val.txt").write_text("2007_000033\n2008_000001\n")
    return root


def test_voc_real_layout_palette_pngs_and_split_lists(tmp_path: Path) -> None:
    root = voc_tree(tmp_path / "VOCdevkit" / "VOC2012")
    assert mode_of(root / "SegmentationClass" / "2007_000033.png") == "P"
    for path in (root, tmp_path / "VOCdevkit", tmp_path):  # the devkit folders are found too
        ds = load_dataset(f"voc:{path}")
        assert ds.name == "voc-val" and ds.names == ["2007_000033", "2008_000001"]
    assert ds.classes == VOC_CLASSES and len(ds.classes) == 21
    item = ds[0]
    assert item.image.shape == (6, 8, 3)
    assert set(np.unique(item.label).tolist()) == {0, 15, 255}
    assert item.label[1, 1] == 255 and item.label[2, 3] == 15
    train = load_dataset(f"voc:{root}", split="train")
    assert train.names == ["2007_000032"] and (train[0].label[1:5, 2:6] == 1).all()


def test_voc_real_layout_without_lists_reads_every_labelled_image(tmp_path: Path) -> None:
    root = voc_tree(tmp_path / "voc", lists=False)
    ds = load_dataset(f"voc:{root}")
    assert ds.names == ["2007_000032", "2007_000033", "2008_000001"]  # not 2009_000001


def test_voc_rgb_targets_in_the_flat_layout(tmp_path: Path) -> None:
    root = tmp_path / "voc"
    ids = np.array([[0, 1, 20], [15, 255, 0]])
    save(root / "images" / "a.png", rgb(2, 3))
    save(root / "targets" / "a.png", VOC_PALETTE[ids])
    assert load_dataset(f"voc:{root}")[0].label.tolist() == ids.tolist()


def test_voc_palette_is_the_bit_interleaving_scheme() -> None:
    assert VOC_PALETTE.shape == (256, 3)
    assert tuple(VOC_PALETTE[0]) == (0, 0, 0) and tuple(VOC_PALETTE[1]) == (128, 0, 0)
    assert tuple(VOC_PALETTE[15]) == (192, 128, 128) and tuple(VOC_PALETTE[255]) == (224, 224, 192)
    assert VOC_COLOURS[(224, 224, 192)] == 255 and len(VOC_COLOURS) == 22


# --- ADE20K -----------------------------------------------------------------------------------


def test_ade20k_challenge_layout_and_split_names(tmp_path: Path) -> None:
    root = tmp_path / "ADEChallengeData2016"
    for split, name in [("training", "ADE_train_00000001"), ("validation", "ADE_val_00000001")]:
        save(root / "images" / split / f"{name}.jpg", rgb())
        save(root / "annotations" / split / f"{name}.png", np.arange(48).reshape(6, 8) * 3 + 7)
    save(root / "annotations" / "validation" / "ADE_val_00000001.png", np.array([[0, 1], [150, 7]]))
    save(root / "images" / "validation" / "ADE_val_00000001.jpg", rgb(2, 2))
    for path in (root, tmp_path):
        ds = load_dataset(f"ade20k:{path}")
        assert ds.name == "ade20k-validation" and ds.names == ["ADE_val_00000001"]
    assert ds.classes == ADE20K_CLASSES and len(ds.classes) == 150
    assert ds[0].label.tolist() == [[255, 0], [149, 6]]
    for split in ("training", "train"):
        train = load_dataset(f"ade20k:{root}", split=split)
        assert train.name == "ade20k-training" and train.names == ["ADE_train_00000001"]
    assert load_dataset(f"ade20k:{root}", split="val").names == ["ADE_val_00000001"]


def test_ade20k_class_list() -> None:
    assert len(set(ADE20K_CLASSES)) == 150
    assert ADE20K_CLASSES[:8] == [
        "wall",
        "building",
        "sky",
        "floor",
        "tree",
        "ceiling",
        "road",
        "bed",
    ]
    assert ADE20K_CLASSES[12] == "person" and ADE20K_CLASSES[20] == "car"
    assert ADE20K_CLASSES[-3:] == ["glass", "clock", "flag"]


# --- folder and edited ------------------------------------------------------------------------


def folder_tree(root: Path, n: int = 3, classes=("a", "b", "c")) -> Path:
    for i in range(n):
        save(root / "images" / f"im{i}.png", rgb(seed=i))
        write_png(root / "labels" / f"im{i}.png", np.full((6, 8), i % len(classes)))
    (root / "classes.txt").write_text("\n".join(classes) + "\n\n")
    return root


def test_folder_reader(tmp_path: Path) -> None:
    root = folder_tree(tmp_path / "mine")
    (root / "images" / ".im9.png.tmp").write_bytes(b"half written")
    (root / "images" / ".hidden.png").write_bytes(b"not an image")
    ds = load_dataset(f"folder:{root}")
    assert ds.name == "folder:mine" and ds.classes == ["a", "b", "c"]
    assert ds.names == ["im0", "im1", "im2"] and int(ds[2].label[0, 0]) == 2
    assert load_dataset(f"folder:{root}", limit=2).names == ["im0", "im1"]


def test_edited_reader_reuses_the_folder_layout_with_a_manifest(tmp_path: Path) -> None:
    root = folder_tree(tmp_path / "edit-fog", n=2)
    records = [
        {"name": "im0", "source": "camvid-val/x", "attribute": "fog", "value": "0.5"},
        {"name": "im1", "source": "camvid-val/y", "attribute": "fog", "value": "0.9"},
    ]
    (root / "manifest.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    ds = load_dataset(f"edited:{root}")
    assert ds.name == "edited:edit-fog" and ds.names == ["im0", "im1"]
    assert ds.extra["manifest"] == records
    assert ds[1].image.shape == (6, 8, 3)
    (root / "manifest.jsonl").unlink()
    assert "manifest" not in load_dataset(f"edited:{root}").extra


# --- read_label, read_image, write_png --------------------------------------------------------


def test_read_label_palette_grey_and_rgb(tmp_path: Path) -> None:
    ids = np.array([[0, 1, 2], [20, 255, 7]])
    p = save(tmp_path / "p.png", ids, mode="P", palette=VOC_PALETTE)
    grey = save(tmp_path / "l.png", ids)
    colour = save(tmp_path / "rgb.png", VOC_PALETTE[ids])
    assert mode_of(p) == "P" and mode_of(grey) == "L"
    for path in (p, grey):
        label = read_label(path)
        assert label.dtype == np.int64 and label.tolist() == ids.tolist()
        assert read_label(path, palette=VOC_COLOURS).tolist() == ids.tolist()  # ids, not colours
    assert read_label(colour, palette=VOC_COLOURS).tolist() == ids.tolist()
    grey_rgb = save(tmp_path / "grey_rgb.png", np.repeat(ids[..., None], 3, axis=2))
    assert read_label(grey_rgb).tolist() == ids.tolist()  # R=G=B without a palette: the ids
    wide = tmp_path / "i16.png"
    Image.fromarray(np.array([[0, 300]], dtype=np.uint16)).save(wide)
    assert read_label(wide).tolist() == [[0, 300]]


def test_read_image_jpeg_and_grey(tmp_path: Path) -> None:
    smooth = np.zeros((16, 24, 3), dtype=np.uint8)
    smooth[..., 0] = np.linspace(0, 255, 24).astype(np.uint8)
    smooth[..., 1] = 100
    Image.fromarray(smooth).save(tmp_path / "a.jpg", quality=95)
    image = read_image(tmp_path / "a.jpg")
    assert image.shape == (16, 24, 3) and image.dtype == np.uint8
    assert np.abs(image.astype(int) - smooth).mean() < 4
    save(tmp_path / "g.png", np.full((3, 4), 77))
    assert read_image(tmp_path / "g.png").tolist() == np.full((3, 4, 3), 77).tolist()


def test_write_png_round_trip_is_lossless(tmp_path: Path) -> None:
    image = rgb(9, 11)
    write_png(tmp_path / "out" / "im.png", image)  # creates the folder, atomically
    assert np.array_equal(read_image(tmp_path / "out" / "im.png"), image)
    assert not list((tmp_path / "out").glob("*.tmp"))

    ids = np.array([[0, 1, 2, 3], [20, 255, 19, 0]], dtype=np.int64)
    write_png(tmp_path / "p.png", ids, palette=VOC_PALETTE[:21])
    with Image.open(tmp_path / "p.png") as img:
        palette = img.getpalette()
        assert img.mode == "P" and palette is not None
        assert len(palette) == 256 * 3  # 255 has an entry too
        colours = np.asarray(img.convert("RGB"))
    assert np.array_equal(read_label(tmp_path / "p.png"), ids)
    assert np.array_equal(
        colours, np.concatenate([VOC_PALETTE[:21], np.zeros((235, 3), np.uint8)])[ids]
    )
    write_png(tmp_path / "l.png", ids)
    assert mode_of(tmp_path / "l.png") == "L"
    assert np.array_equal(read_label(tmp_path / "l.png"), ids)


@pytest.mark.parametrize("value", [300, -1])
def test_write_png_refuses_ids_that_do_not_fit_8_bits(tmp_path: Path, value: int) -> None:
    with pytest.raises(DataError, match=r"bad\.png: values .* do not fit an 8-bit PNG"):
        write_png(tmp_path / "bad.png", np.array([[0, value]]))
    assert not (tmp_path / "bad.png").exists()


# --- every built-in reader meets the dataset contract (segtk.testing.DatasetSuite) ------------


class ReaderContract(DatasetSuite):
    reader = ""

    def make(self) -> DatasetPlugin:
        return registry.dataset_plugin(self.reader)


class TestFolderContract(ReaderContract):
    reader = "folder"

    def arg(self, root: Path) -> str:
        return str(folder_tree(root / "mine"))


class TestEditedContract(ReaderContract):
    reader = "edited"

    def arg(self, root: Path) -> str:
        return str(folder_tree(root / "edit-fog", n=2))


class TestCityscapesContract(ReaderContract):
    reader = "cityscapes"
    splits = (None, "train")

    def arg(self, root: Path) -> str:
        return str(cityscapes_tree(root))


class TestVocContract(ReaderContract):
    reader = "voc"
    splits = (None, "train", "val")

    def arg(self, root: Path) -> str:
        return str(voc_tree(root / "VOC2012"))


class TestAde20kContract(ReaderContract):
    reader = "ade20k"
    splits = (None, "training")

    def arg(self, root: Path) -> str:
        base = root / "ADEChallengeData2016"
        for split, name in [("training", "ADE_train_00000001"), ("validation", "ADE_val_00000001")]:
            save(base / "images" / split / f"{name}.jpg", rgb())
            save(base / "annotations" / split / f"{name}.png", np.arange(48).reshape(6, 8) * 3)
        return str(base)


@pytest.mark.shared
class TestCamvidContract(ReaderContract):
    reader = "camvid"
    splits = (None, "train")
    max_items = 2

    def arg(self, root: Path) -> str:
        return str(shared("data/camvid"))
