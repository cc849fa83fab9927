"""Every image and label mode the readers meet, against the pixel values written.

The PNGs are written byte by byte here (filter 0, no interlace) from the samples as stored, so
each expected array is computed with numpy from the numbers written, not by a decoder. Images
read as uint8 RGB: grey replicated, palette expanded, alpha dropped, 16-bit grey scaled by
255/65535. Label maps read as ids: grey values or palette indices, 8 or 16 bits.
"""

from __future__ import annotations

import re
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from segtk.core import DataError, load_dataset, read_image, read_label, write_png
from segtk.datasets.formats import VOC_COLOURS, VOC_PALETTE

GREY, RGB, PALETTE, GREY_ALPHA, RGBA = 0, 2, 3, 4, 6  # PNG colour types
H, W = 3, 5


def chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png(path: Path, samples: np.ndarray, colour_type: int, bits: int, palette: np.ndarray | None = None,
        trns: bytes | None = None) -> Path:
    """A PNG holding `samples` ([H,W] or [H,W,C] as stored: 0..2**bits-1) exactly."""
    h, w = samples.shape[:2]
    flat = samples.reshape(h, -1)
    if bits == 16:
        rows = flat.astype(">u2").view(np.uint8).reshape(h, -1)
    elif bits == 8:
        rows = flat.astype(np.uint8)
    else:  # 1, 2 or 4 bits a sample, packed from the left, each row padded to a byte
        unpacked = np.unpackbits(flat.astype(np.uint8)[..., None], axis=-1)[..., 8 - bits:]
        rows = np.packbits(unpacked.reshape(h, -1), axis=1)
    raw = b"".join(b"\x00" + row.tobytes() for row in rows)
    data = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, bits, colour_type, 0, 0, 0))
    if palette is not None:
        data += chunk(b"PLTE", np.asarray(palette, dtype=np.uint8).tobytes())
    if trns is not None:
        data += chunk(b"tRNS", trns)
    path.write_bytes(data + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
    return path


def samples(bits: int, channels: int = 0, seed: int = 0) -> np.ndarray:
    """Random samples of `bits`, with the extremes and (16 bits) the rounding edges in them."""
    shape = (H, W, channels) if channels else (H, W)
    values = np.random.default_rng(seed).integers(0, 2**bits, shape, dtype=np.int64)
    edges = [0, 2**bits - 1] + ([128, 129, 257, 385, 386, 32896, 65406] if bits == 16 else [])
    values.reshape(-1)[: len(edges)] = edges
    return values


def to_8bit(values: np.ndarray, bits: int) -> np.ndarray:
    """The reference scaling: value / (2**bits - 1) of the full range, to the nearest 8-bit step."""
    return np.round(values / (2**bits - 1) * 255).astype(np.uint8)


def as_rgb(grey: np.ndarray) -> np.ndarray:
    return np.repeat(grey[..., None], 3, axis=2)


# --- images -----------------------------------------------------------------------------------


def test_16_bit_grey_is_scaled_by_65535_not_read_as_white(tmp_path: Path) -> None:
    values = samples(16)
    image = read_image(png(tmp_path / "g16.png", values, GREY, 16))
    assert image.dtype == np.uint8 and np.array_equal(image, as_rgb(to_8bit(values, 16)))


def test_16_bit_grey_tiff_is_scaled_too(tmp_path: Path) -> None:
    values = samples(16)
    Image.fromarray(values.astype(np.uint16)).save(tmp_path / "g16.tif")
    assert np.array_equal(read_image(tmp_path / "g16.tif"), as_rgb(to_8bit(values, 16)))


@pytest.mark.parametrize("bits", [1, 2, 4, 8])
def test_grey_of_8_bits_or_fewer_spans_the_full_range(tmp_path: Path, bits: int) -> None:
    values = samples(bits)
    image = read_image(png(tmp_path / "g.png", values, GREY, bits))
    assert np.array_equal(image, as_rgb(to_8bit(values, bits)))


@pytest.mark.parametrize("bits", [8, 16])
def test_grey_alpha_drops_the_alpha(tmp_path: Path, bits: int) -> None:
    values = samples(bits, 2)
    values[0, 0, 1] = 0  # fully transparent pixels keep their grey: alpha is dropped
    image = read_image(png(tmp_path / "la.png", values, GREY_ALPHA, bits))
    expected = as_rgb(to_8bit(values[..., 0], bits))
    # 16-bit colour: Pillow keeps each value's high byte, at most one step below the scaling
    assert np.abs(image.astype(int) - expected).max() <= (bits == 16)
    assert np.array_equal(image, as_rgb((values[..., 0] >> (bits - 8)).astype(np.uint8)))


@pytest.mark.parametrize(("colour_type", "bits"), [(RGB, 8), (RGB, 16), (RGBA, 8), (RGBA, 16)])
def test_rgb_and_rgba_keep_the_colours_and_drop_the_alpha(tmp_path: Path, colour_type: int,
                                                          bits: int) -> None:
    values = samples(bits, 3 if colour_type == RGB else 4)
    if colour_type == RGBA:
        values[0, :, 3] = 0
    image = read_image(png(tmp_path / "c.png", values, colour_type, bits))
    assert np.abs(image.astype(int) - to_8bit(values[..., :3], bits)).max() <= (bits == 16)
    assert np.array_equal(image, (values[..., :3] >> (bits - 8)).astype(np.uint8))


def test_16_bit_colour_that_holds_8_bit_values_reads_them_exactly(tmp_path: Path) -> None:
    eight = samples(8, 3)
    image = read_image(png(tmp_path / "c16.png", eight * 257, RGB, 16))  # 8-bit v as v*257
    assert np.array_equal(image, eight.astype(np.uint8))


@pytest.mark.parametrize(("bits", "trns"), [(8, None), (4, None), (8, bytes(range(0, 256, 16)))])
def test_palette_images_are_expanded_to_their_colours(tmp_path: Path, bits: int,
                                                      trns: bytes | None) -> None:
    colours = np.random.default_rng(1).integers(0, 256, (2**bits, 3))
    indices = samples(bits)
    image = read_image(png(tmp_path / "p.png", indices, PALETTE, bits, colours, trns))
    assert np.array_equal(image, colours[indices].astype(np.uint8))  # transparency dropped


def test_transparent_colour_keys_are_dropped(tmp_path: Path) -> None:
    grey, colour = samples(8), samples(8, 3)
    key = struct.pack(">H", int(grey[0, 0]))
    assert np.array_equal(read_image(png(tmp_path / "l.png", grey, GREY, 8, trns=key)), as_rgb(grey))
    key = struct.pack(">HHH", *(int(v) for v in colour[0, 0]))
    assert np.array_equal(read_image(png(tmp_path / "c.png", colour, RGB, 8, trns=key)), colour)


@pytest.mark.parametrize(("array", "mode"), [(np.full((H, W), 70000, np.int32), "I"),
                                             (np.full((H, W), 0.5, np.float32), "F")])
def test_32_bit_images_are_refused_naming_file_and_mode(tmp_path: Path, array: np.ndarray,
                                                        mode: str) -> None:
    path = tmp_path / "deep.tif"
    Image.fromarray(array).save(path)
    with pytest.raises(DataError, match=rf"deep\.tif: an image in mode {mode}\b.* is not read") as caught:
        read_image(path)
    assert "16-bit grey" in (caught.value.hint or "")  # what to save it as


# --- label maps -------------------------------------------------------------------------------


@pytest.mark.parametrize(("colour_type", "bits"), [(GREY, 8), (GREY, 16), (PALETTE, 8), (PALETTE, 4),
                                                   (PALETTE, 2)])
def test_grey_and_palette_labels_are_their_values_as_ids(tmp_path: Path, colour_type: int,
                                                         bits: int) -> None:
    ids = samples(bits)
    palette = VOC_PALETTE[: 2**bits] if colour_type == PALETTE else None
    label = read_label(png(tmp_path / "ids.png", ids, colour_type, bits, palette))
    assert label.dtype == np.int64 and np.array_equal(label, ids)


def test_a_1_bit_label_holds_ids_0_and_1_not_0_and_ignore(tmp_path: Path) -> None:
    ids = samples(1)
    assert np.array_equal(read_label(png(tmp_path / "mask.png", ids, GREY, 1)), ids)


@pytest.mark.parametrize("bits", [2, 4])
def test_2_and_4_bit_grey_labels_are_refused(tmp_path: Path, bits: int) -> None:
    """Pillow scales them to 0-255 (2 bits: 0, 85, 170, 255), which are not the ids stored."""
    path = png(tmp_path / "low.png", samples(bits), GREY, bits)
    with pytest.raises(DataError, match=rf"low\.png: a label map in mode L \(stored as L;{bits}\)"):
        read_label(path)


def test_grey_alpha_labels_drop_the_alpha(tmp_path: Path) -> None:
    values = samples(8, 2)
    assert np.array_equal(read_label(png(tmp_path / "la.png", values, GREY_ALPHA, 8)), values[..., 0])


@pytest.mark.parametrize(("colour_type", "channels"), [(GREY_ALPHA, 2), (RGB, 3), (RGBA, 4)])
def test_16_bit_colour_labels_are_refused(tmp_path: Path, colour_type: int, channels: int) -> None:
    """Pillow keeps the high byte of each value: id 300 would read as 1."""
    ids = np.full((H, W, channels), 300)
    path = png(tmp_path / "wide.png", ids, colour_type, 16)
    with pytest.raises(DataError, match=r"wide\.png: a label map in mode \w+ \(stored as \w+;16B\)"):
        read_label(path)


def test_rgb_labels_need_the_formats_colour_map(tmp_path: Path) -> None:
    ids = np.array([[0, 1, 2, 15, 255]])
    colours = np.concatenate([VOC_PALETTE[ids], np.full((1, 5, 1), 255)], axis=2)  # RGBA
    path = png(tmp_path / "rgba.png", colours, RGBA, 8)
    assert np.array_equal(read_label(path, palette=VOC_COLOURS), ids)  # alpha dropped
    with pytest.raises(DataError, match=r"rgba\.png: colour label without a palette"):
        read_label(path)


def test_float_labels_are_refused(tmp_path: Path) -> None:
    Image.fromarray(np.full((H, W), 2.0, np.float32)).save(tmp_path / "f.tif")
    with pytest.raises(DataError, match=r"f\.tif: a label map in mode F\b.* is not read"):
        read_label(tmp_path / "f.tif")


# --- every built-in reader reads through them -------------------------------------------------


def tree(root: Path, fmt: str, image: Path) -> str:
    """A one-image dataset of `fmt` with `image` as its picture and ids 0 as its label."""
    ids = np.zeros((H, W), dtype=np.uint8)
    layouts = {
        "folder": ("images/x.png", "labels/x.png"),
        "camvid": ("val/x.png", "valannot/x.png"),
        "cityscapes": ("leftImg8bit/x_leftImg8bit.png", "gtFine/x_gtFine_labelTrainIds.png"),
        "voc": ("images/x.png", "targets/x.png"),
        "ade20k": ("images/x.png", "annotations/x.png"),
    }
    picture, label = (root / p for p in layouts[fmt])
    picture.parent.mkdir(parents=True, exist_ok=True)
    picture.write_bytes(image.read_bytes())
    write_png(label, ids + (fmt == "ade20k"), VOC_PALETTE if fmt == "voc" else None)
    (root / "classes.txt").write_text("a\nb\n")
    return f"{fmt}:{root}"


@pytest.mark.parametrize("fmt", ["folder", "camvid", "cityscapes", "voc", "ade20k"])
def test_every_reader_reads_16_bit_grey_images(tmp_path: Path, fmt: str) -> None:
    values = samples(16)
    image = png(tmp_path / "g16.png", values, GREY, 16)
    item = load_dataset(tree(tmp_path / fmt, fmt, image))[0]
    assert np.array_equal(item.image, as_rgb(to_8bit(values, 16)))
    assert re.fullmatch(r"x(_leftImg8bit)?\.png", Path(item.image_path).name)
