"""Bad input reaches the user as a DataError naming the file or folder, the problem and a fix."""

from __future__ import annotations

import io
import re
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from segtk.core import DataError, load_dataset, read_image, read_label, write_png
from segtk.datasets.formats import VOC_PALETTE


def save(path: Path, array) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.asarray(array, dtype=np.uint8)).save(path)
    return path


def folder(root: Path, n: int = 2, size=(6, 8), classes=("a", "b", "c")) -> Path:
    for sub in ("images", "labels"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    for i in range(n):
        save(root / "images" / f"im{i}.png", np.full((*size, 3), 40 * i))
        save(root / "labels" / f"im{i}.png", np.full(size, i % len(classes)))
    (root / "classes.txt").write_text("\n".join(classes))
    return root


def raises(
    spec_or_call, match: str, split: str | None = None, index: int | None = None
) -> DataError:
    """The DataError from loading (or reading item `index` of) a dataset, checked for a hint."""
    with pytest.raises(DataError, match=match) as info:
        if callable(spec_or_call):
            spec_or_call()
        else:
            ds = load_dataset(spec_or_call, split=split)
            if index is not None:
                ds[index]
    assert info.value.hint, "every data error says what to do"
    assert info.value.hint in str(info.value)
    return info.value


def esc(path: Path) -> str:
    return re.escape(str(path))


def png_bytes(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(array).save(buf, format="PNG")
    return buf.getvalue()


# --- pairing problems, found when the dataset loads -------------------------------------------


def test_missing_label_names_the_image(tmp_path: Path) -> None:
    root = folder(tmp_path / "d")
    (root / "labels" / "im1.png").unlink()
    raises(
        f"folder:{root}",
        rf"{esc(root / 'images' / 'im1.png')}: no label \(expected .*labels/im1\.png",
    )


def test_missing_cityscapes_label_names_the_image(tmp_path: Path) -> None:
    image = save(
        tmp_path / "cs" / "leftImg8bit" / "val" / "ulm" / "ulm_1_2_leftImg8bit.png",
        np.zeros((2, 2, 3)),
    )
    (tmp_path / "cs" / "gtFine" / "val" / "ulm").mkdir(parents=True)
    raises(
        f"cityscapes:{tmp_path / 'cs'}",
        rf"{esc(image)}: no label \(expected .*ulm_1_2_gtFine_labelIds\.png",
    )


def test_voc_split_list_naming_missing_files(tmp_path: Path) -> None:
    root = tmp_path / "voc"
    save(root / "JPEGImages" / "a.jpg", np.zeros((2, 2, 3)))
    (root / "SegmentationClass").mkdir()
    (root / "ImageSets" / "Segmentation").mkdir(parents=True)
    (root / "ImageSets" / "Segmentation" / "val.txt").write_text("a\n")
    raises(f"voc:{root}", rf"{esc(root / 'JPEGImages' / 'a.jpg')}: no label \(expected .*a\.png")
    (root / "ImageSets" / "Segmentation" / "val.txt").write_text("b\n")
    raises(f"voc:{root}", r"val\.txt: lists 'b', but .*JPEGImages/b\.jpg is missing")


@pytest.mark.parametrize("fmt", ["folder", "edited", "camvid", "cityscapes", "voc", "ade20k"])
def test_missing_root_folder(tmp_path: Path, fmt: str) -> None:
    raises(
        f"{fmt}:{tmp_path / 'nowhere'}", rf"{esc(tmp_path / 'nowhere')}: dataset folder not found"
    )


def test_root_that_is_a_file_or_empty_path(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    raises(f"folder:{tmp_path / 'f'}", "is a file, not a dataset folder")
    raises("voc:", "no dataset path given")


def test_missing_subfolder_and_class_list(tmp_path: Path) -> None:
    root = folder(tmp_path / "d")
    (root / "classes.txt").unlink()
    raises(f"folder:{root}", rf"{esc(root / 'classes.txt')}: not found")
    (root / "classes.txt").write_text("\n \n")
    raises(f"folder:{root}", "classes.txt: empty class list")
    (root / "classes.txt").write_text("a\nb\n")
    for sub in (root / "labels").iterdir():
        sub.unlink()
    (root / "labels").rmdir()
    raises(f"folder:{root}", rf"{esc(root / 'labels')}: labels folder not found")
    (tmp_path / "cs" / "leftImg8bit").mkdir(parents=True)
    raises(f"cityscapes:{tmp_path / 'cs'}", r"cs/gtFine: gtFine folder not found")
    (tmp_path / "voc").mkdir()
    raises(f"voc:{tmp_path / 'voc'}", r"voc/JPEGImages: JPEGImages folder not found")


def test_empty_dataset_names_the_folder(tmp_path: Path) -> None:
    root = folder(tmp_path / "d", n=0)
    raises(f"folder:{root}", rf"{esc(root / 'images')}: no images found")
    raises(f"edited:{root}", rf"{esc(root / 'images')}: no images found")
    (tmp_path / "cs" / "leftImg8bit").mkdir(parents=True)
    (tmp_path / "cs" / "gtFine").mkdir()
    raises(f"cityscapes:{tmp_path / 'cs'}", r"leftImg8bit: no \*_leftImg8bit\.png images found")
    for sub in ("images", "annotations"):
        (tmp_path / "ade" / sub).mkdir(parents=True)
    raises(f"ade20k:{tmp_path / 'ade'}", r"ade/images: no images found")


def test_unknown_split(tmp_path: Path) -> None:
    cs = tmp_path / "cs"
    save(cs / "leftImg8bit" / "train" / "ulm" / "ulm_1_2_leftImg8bit.png", np.zeros((2, 2, 3)))
    (cs / "gtFine" / "train").mkdir(parents=True)
    raises(
        f"cityscapes:{cs}", r"leftImg8bit: unknown split 'val' \(no val/ folder; available: train\)"
    )
    voc = tmp_path / "voc"
    for sub in ("JPEGImages", "SegmentationClass", "ImageSets/Segmentation"):
        (voc / sub).mkdir(parents=True)
    (voc / "ImageSets" / "Segmentation" / "train.txt").write_text("")
    raises(f"voc:{voc}", r"Segmentation: unknown split 'val' \(no val\.txt; available: train\)")
    ade = tmp_path / "ade"
    for sub in ("images/training", "annotations/training"):
        (ade / sub).mkdir(parents=True)
    raises(f"ade20k:{ade}", r"images: unknown split 'test'.*available: training", split="test")
    camvid = tmp_path / "camvid"
    (camvid / "train").mkdir(parents=True)
    (camvid / "trainannot").mkdir()
    raises(f"camvid:{camvid}", r"camvid: unknown split 'val' \(no val/ folder; available: train\)")
    flat = tmp_path / "flatvoc"
    (flat / "images").mkdir(parents=True)
    (flat / "targets").mkdir()
    raises(
        f"voc:{flat}",
        r"flatvoc: unknown split 'train': this VOC folder has no split",
        split="train",
    )


# --- file problems, found when an item is read ------------------------------------------------


@pytest.mark.parametrize("damage", ["garbage", "truncated", "empty"])
def test_corrupt_image_names_the_file(tmp_path: Path, damage: str) -> None:
    root = folder(tmp_path / "d")
    good = png_bytes(np.zeros((6, 8, 3), dtype=np.uint8) + 9)
    data = {"garbage": b"not a png", "truncated": good[: len(good) // 2], "empty": b""}[damage]
    (root / "images" / "im1.png").write_bytes(data)
    ds = load_dataset(f"folder:{root}")
    assert ds[0].name == "im0"  # the other images still read
    raises(lambda: ds[1], rf"{esc(root / 'images' / 'im1.png')}: unreadable or corrupt image")


def test_corrupt_label_names_the_file(tmp_path: Path) -> None:
    root = folder(tmp_path / "d")
    (root / "labels" / "im0.png").write_bytes(b"\x89PNG\r\n\x1a\n broken")
    raises(
        f"folder:{root}",
        rf"{esc(root / 'labels' / 'im0.png')}: unreadable or corrupt image",
        index=0,
    )


def test_corrupt_jpeg(tmp_path: Path) -> None:
    buf = io.BytesIO()
    Image.fromarray(np.zeros((32, 32, 3), dtype=np.uint8)).save(buf, format="JPEG")
    (tmp_path / "x.jpg").write_bytes(buf.getvalue()[:-200])
    raises(lambda: read_image(tmp_path / "x.jpg"), r"x\.jpg: unreadable or corrupt image")
    raises(lambda: read_image(tmp_path / "gone.jpg"), r"gone\.jpg: file not found")


def test_size_mismatch_names_label_and_image(tmp_path: Path) -> None:
    root = folder(tmp_path / "d")
    save(root / "labels" / "im1.png", np.zeros((5, 8)))
    raises(
        f"folder:{root}",
        rf"{esc(root / 'labels' / 'im1.png')}: label size 8x5 differs from image size 8x6 "
        rf"of {esc(root / 'images' / 'im1.png')}",
        index=1,
    )


def test_label_ids_outside_the_class_list(tmp_path: Path) -> None:
    root = folder(tmp_path / "d")
    label = np.zeros((6, 8))
    label[0, :4], label[1, :2], label[2] = 3, 7, 255
    save(root / "labels" / "im1.png", label)
    raises(
        f"folder:{root}",
        rf"{esc(root / 'labels' / 'im1.png')}: label ids \[3, 7\] are outside the 3 classes",
        index=1,
    )
    camvid = tmp_path / "camvid"
    save(camvid / "val" / "a.png", np.zeros((2, 2, 3)))
    save(camvid / "valannot" / "a.png", np.array([[0, 12], [11, 3]]))
    raises(
        f"camvid:{camvid}", r"valannot/a\.png: label ids \[12\] are outside the 11 classes", index=0
    )


def test_label_values_a_format_does_not_define(tmp_path: Path) -> None:
    cs = tmp_path / "cs"
    save(cs / "leftImg8bit" / "a_1_leftImg8bit.png", np.zeros((2, 2, 3)))
    save(cs / "gtFine" / "a_1_gtFine_labelIds.png", np.array([[7, 40], [34, 0]]))
    raises(
        f"cityscapes:{cs}",
        r"a_1_gtFine_labelIds\.png: values \[34, 40\] are not Cityscapes labelIds",
        index=0,
    )
    ade = tmp_path / "ade"
    save(ade / "images" / "a.jpg", np.zeros((2, 2, 3)))
    save(ade / "annotations" / "a.png", np.array([[0, 151], [150, 200]]))
    raises(
        f"ade20k:{ade}",
        r"annotations/a\.png: values \[151, 200\] are outside ADE20K's 0-150",
        index=0,
    )


def test_rgb_colour_not_in_the_palette(tmp_path: Path) -> None:
    voc = tmp_path / "voc"
    save(voc / "images" / "a.png", np.zeros((2, 2, 3)))
    target = VOC_PALETTE[np.array([[0, 1], [255, 2]])].copy()
    target[1, 1] = (1, 2, 3)
    save(voc / "targets" / "a.png", target)
    raises(
        f"voc:{voc}",
        rf"{esc(voc / 'targets' / 'a.png')}: colour \(1,2,3\) is not in the palette",
        index=0,
    )
    root = folder(tmp_path / "d")
    save(root / "labels" / "im0.png", np.full((6, 8, 3), (128, 0, 0)))
    raises(
        f"folder:{root}",
        rf"{esc(root / 'labels' / 'im0.png')}: colour label without a palette",
        index=0,
    )
    save(voc / "targets" / "b.png", VOC_PALETTE[np.array([[0, 1], [1, 0]])])
    raises(
        lambda: read_label(voc / "targets" / "b.png", palette={(0, 0, 0): 0}),
        r"b\.png: colour \(128,0,0\)",
    )


def test_bad_manifest_line(tmp_path: Path) -> None:
    root = folder(tmp_path / "e")
    (root / "manifest.jsonl").write_text('{"name": "im0"}\n{"name": \n')
    raises(f"edited:{root}", rf"{esc(root / 'manifest.jsonl')}:2: not valid JSON")


def test_empty_dataset_via_load_dataset_limit(tmp_path: Path) -> None:
    root = folder(tmp_path / "d")
    raises(lambda: load_dataset(f"folder:{root}", limit=0), r"dataset 'folder:.*' has no images")


def test_write_png_refusal_names_the_file(tmp_path: Path) -> None:
    raises(lambda: write_png(tmp_path / "x.png", np.array([[256]])), r"x\.png: values 256\.\.256")
