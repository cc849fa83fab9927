"""Images, labels and datasets: reading, validating, writing atomically.

Images are uint8 RGB [H,W,3] numpy arrays on disk and float32 [B,3,H,W] tensors in [0,1] for
models. Labels are int64 [H,W] class ids with `ignore_index` (255) for unlabelled pixels.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from PIL import Image, UnidentifiedImageError

from segtk.core._errors import DataError, ImageTooLarge, NoSplits
from segtk.core._png import encode_png

DEFAULT_MAX_PIXELS = 40_000_000
MAX_PIXELS_ENV = "SEGTK_MAX_PIXELS"
# Pillow's 16-bit grey modes; older Pillows open 16-bit PNGs as "I" (32-bit), stored as "I;16B".
GREY_16 = ("I;16", "I;16B", "I;16L", "I;16N")
# Modes Pillow converts to RGB without losing what an image means (alpha is dropped).
IMAGE_MODES = ("1", "L", "LA", "P", "PA", "RGB", "RGBA", "RGBX", "CMYK", "YCbCr")


def max_pixels() -> int:
    """The most pixels (width x height) an image or label map may have to be read: the
    SEGTK_MAX_PIXELS environment variable, which `pixel_limit` (the CLI's --max-pixels, the
    API's max_pixels=) sets, else DEFAULT_MAX_PIXELS. An environment variable, so the
    worker processes a benchmark starts read images under the same limit."""
    value = os.environ.get(MAX_PIXELS_ENV, "").strip()
    if not value:
        return DEFAULT_MAX_PIXELS
    if not value.isdigit() or int(value) < 1:
        raise DataError(f"{MAX_PIXELS_ENV}={value!r} is not a positive whole number of pixels",
                        hint=f"unset it, or set e.g. {MAX_PIXELS_ENV}={DEFAULT_MAX_PIXELS}")
    return int(value)


@contextmanager
def pixel_limit(limit: int | None) -> Iterator[None]:
    """Read images of up to `limit` pixels inside the block, in this process and the worker
    processes started inside it; None leaves the limit in force as it is."""
    if limit is None:
        yield
        return
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise DataError(f"max_pixels={limit!r}: the limit is a whole number of pixels, at least 1")
    before = os.environ.get(MAX_PIXELS_ENV)
    os.environ[MAX_PIXELS_ENV] = str(limit)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(MAX_PIXELS_ENV, None)
        else:
            os.environ[MAX_PIXELS_ENV] = before


def check_size(path: Path, width: int, height: int) -> None:
    """Refuse an image over `max_pixels()` from its header's size, before it is decoded: one
    8000x8000 photo takes a prediction past 13 GB and an attack past 20 GB."""
    limit = max_pixels()
    if width * height > limit:
        raise ImageTooLarge(
            f"{path}: {width}x{height} pixels ({width * height / 1e6:.1f} MP) is over the limit "
            f"of {limit} pixels ({limit / 1e6:g} MP) for one image",
            hint=f"pass --max-pixels {width * height} (Python: max_pixels=, or set "
                 f"{MAX_PIXELS_ENV}) if the machine has the memory, or downscale the image",
        )


def _open(path: Path) -> tuple[Image.Image, str]:
    """The image at `path`, its size checked from the header before it is decoded, and how the
    file stores its pixels (`img.tile`'s raw mode, e.g. "RGB;16B" or "L;2", which decoding
    forgets): Pillow keeps only the high byte of 16-bit colour and scales 1-4-bit grey up."""
    if not path.is_file():
        raise DataError(f"{path}: file not found", hint="check the dataset path and layout")
    try:
        img = Image.open(path)
    except Image.DecompressionBombError as exc:  # Pillow's own limit, past ~179 MP
        raise ImageTooLarge(f"{path}: too large for Pillow to decode ({exc})",
                            hint="downscale the image") from exc
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as exc:
        raise _unreadable(path, exc) from exc
    try:
        check_size(path, *img.size)
        args = img.tile[0][3] if img.tile else img.mode  # TIFF's are (rawmode, ...)
        rawmode = str(args[0] if isinstance(args, tuple) else args)
        img.load()
        return img, rawmode
    except (OSError, SyntaxError, ValueError) as exc:
        img.close()
        raise _unreadable(path, exc) from exc
    except BaseException:
        img.close()
        raise


def _unreadable(path: Path, exc: BaseException) -> DataError:
    return DataError(
        f"{path}: unreadable or corrupt image ({exc})",
        hint="re-export it as PNG or JPEG, or remove it from the dataset",
    )


def _mode_error(path: Path, img: Image.Image, rawmode: str, what: str, hint: str) -> DataError:
    stored = f" (stored as {rawmode})" if rawmode != img.mode else ""
    return DataError(f"{path}: {what} in mode {img.mode}{stored} is not read", hint=hint)


def _is_grey_16(img: Image.Image, rawmode: str) -> bool:
    return img.mode in GREY_16 or (img.mode == "I" and rawmode in GREY_16)


def read_image(path: str | Path) -> np.ndarray:
    """An RGB image as uint8 [H,W,3].

    Grey is replicated to R, G and B; palette images are expanded to their colours; alpha is
    dropped (not composited: the colours are the image the model sees). 16-bit grey is scaled
    by 255/65535 to the nearest 8-bit level; 16-bit colour keeps each value's high byte (Pillow
    decodes it so: within one 8-bit step). Other modes (32-bit integer or float) are refused.
    """
    path = Path(path)
    img, rawmode = _open(path)
    if _is_grey_16(img, rawmode):
        # v/65535 on the 0-255 scale is v/257; +128 rounds to the nearest level (257 is odd:
        # never a tie). Pillow's own convert("RGB") clips at 255, reading it as all white.
        grey = ((np.asarray(img).astype(np.uint32) + 128) // 257).astype(np.uint8)
        return np.repeat(grey[..., None], 3, axis=2)
    if img.mode not in IMAGE_MODES:
        raise _mode_error(path, img, rawmode, "an image",
                          "save it as an 8-bit RGB or grey image, or a 16-bit grey PNG")
    if img.mode in ("P", "PA"):
        img = img.convert("RGBA")  # the palette's colours; its transparency is dropped below
    return np.asarray(img.convert("RGB"), dtype=np.uint8).copy()


def read_label(path: str | Path, palette: dict[tuple[int, int, int], int] | None = None) -> np.ndarray:
    """A label map as int64 [H,W].

    Palette (P) PNGs hold class ids as their indices, grey ones as their values (8 or 16 bits;
    1 bit: ids 0 and 1); alpha is dropped. RGB labels need `palette`, mapping colours to ids
    (without it, only a grey image stored as RGB is read); an RGB colour not in it is an error,
    never a silent class. 16-bit colour and 2- or 4-bit grey label maps are refused: Pillow
    does not decode their values as stored.
    """
    path = Path(path)
    img, rawmode = _open(path)
    if img.mode in ("P", "PA") or (img.mode in ("L", "LA") and rawmode in ("L", "LA")):
        ids = np.asarray(img, dtype=np.int64)
        return (ids[..., 0] if ids.ndim == 3 else ids).copy()
    if img.mode in ("1", "I") or _is_grey_16(img, rawmode):
        return np.asarray(img, dtype=np.int64).copy()
    if img.mode not in ("RGB", "RGBA", "RGBX") or ";16" in rawmode:
        raise _mode_error(path, img, rawmode, "a label map", "save class ids as an 8-bit grey "
                          "or palette PNG (16-bit grey for more than 256 ids)")
    rgb = np.asarray(img.convert("RGB"), dtype=np.int64)
    if palette is None:
        if (rgb[..., 0] == rgb[..., 1]).all() and (rgb[..., 1] == rgb[..., 2]).all():
            return rgb[..., 0].copy()
        raise DataError(
            f"{path}: colour label without a palette",
            hint="this format needs a dataset reader that knows its colour palette (e.g. voc:)",
        )
    codes = (rgb[..., 0] << 16) | (rgb[..., 1] << 8) | rgb[..., 2]
    lut = {(r << 16) | (g << 8) | b: cid for (r, g, b), cid in palette.items()}
    out = np.full(codes.shape, -1, dtype=np.int64)
    for code in np.unique(codes):
        if int(code) not in lut:
            c = int(code)
            raise DataError(
                f"{path}: colour ({c >> 16},{(c >> 8) & 255},{c & 255}) is not in the palette",
                hint="the label uses a colour that the dataset's class list does not define",
            )
        out[codes == code] = lut[int(code)]
    return out


TEMP_SUFFIX = ".tmp"  # atomic writes go through hidden `.NAME.XXXX.tmp` files (see is_temp)


def is_temp(name: str) -> bool:
    """A temp file (or folder) an atomic write leaves when killed before its rename: hidden and
    ending in .tmp. A run removes those in its folder when it opens it (storage.runs)."""
    return name.startswith(".") and name.endswith(TEMP_SUFFIX)


def temp_file(path: Path) -> tuple[int, str]:
    """An open temp file beside `path`, named as `is_temp` recognises: (fd, its path)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=TEMP_SUFFIX)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; results are ordinary files
    return fd, tmp


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write via a temp file and rename, so a crash never leaves half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = temp_file(path)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())  # on disk before the rename, so a power cut leaves old or new
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_png(path: str | Path, array: np.ndarray, palette: np.ndarray | None = None) -> None:
    """Lossless PNG, atomically. uint8 [H,W,3] image, or [H,W] ids (palette mode if given)."""

    if array.dtype != np.uint8 and array.size and (array.min() < 0 or array.max() > 255):
        # Casting would wrap silently (300 -> 44, -1 -> 255): refuse instead.
        raise DataError(
            f"{path}: values {array.min()}..{array.max()} do not fit an 8-bit PNG",
            hint="labels are written as 8-bit class ids (0-254, 255 = ignore)",
        )
    colours = None
    if palette is not None:
        # Exactly 256 entries, so every index (255 = ignore included) has a colour.
        colours = np.zeros((256, 3), dtype=np.uint8)
        given = np.asarray(palette, dtype=np.uint8).reshape(-1, 3)[:256]
        colours[: len(given)] = given
    try:
        # Sub filter + zlib level 1 (core/_png.py), not PIL's: an attack job writes three PNGs
        # per image, and PIL's per-row filter search costs as much as the compression.
        data = encode_png(array, colours)
    except ValueError as exc:
        raise DataError(f"{path}: {exc}", hint="write uint8 [H,W] ids or [H,W,3] RGB images") from exc
    atomic_write_bytes(path, data)


def to_tensor(images: Sequence[np.ndarray]) -> torch.Tensor:
    """uint8 [H,W,3] arrays (same size) -> float32 [B,3,H,W] in [0,1]."""
    arr = np.stack(images).astype(np.float32) / 255.0
    return torch.from_numpy(arr).permute(0, 3, 1, 2).contiguous()


def to_uint8(images: torch.Tensor) -> np.ndarray:
    """float [B,3,H,W] in [0,1] -> uint8 [B,H,W,3], rounding to the nearest grey level."""
    arr = (images.detach().cpu().clamp(0, 1) * 255.0).round().to(torch.uint8)
    return arr.permute(0, 2, 3, 1).numpy()


@dataclass
class Item:
    name: str
    image: np.ndarray  # uint8 [H,W,3]
    label: np.ndarray  # int64 [H,W]
    image_path: str = ""  # the files it was read from, named in errors ("" if not from files)
    label_path: str = ""


@dataclass
class Dataset:
    """A list of labelled images read lazily, validated as they are read."""

    name: str
    classes: list[str]
    pairs: list[tuple[str, Callable[[], Item]]]  # (image name, reader)
    ignore_index: int = 255
    palette: np.ndarray | None = None  # [K,3] colours for overlays
    extra: dict = field(default_factory=dict)
    # The "thing" classes (countable objects, COCO-Stuff's sense) among `classes`, as the
    # format defines them; None where it does not (`segtk edit --things-only` needs them).
    things: list[str] | None = None

    def __len__(self) -> int:
        return len(self.pairs)

    def __iter__(self) -> Iterator[Item]:
        for i in range(len(self)):
            yield self[i]

    def __getitem__(self, index: int) -> Item:
        item = self.pairs[index][1]()
        check_item(item, len(self.classes), self.ignore_index)
        return item

    @property
    def names(self) -> list[str]:
        return [n for n, _ in self.pairs]

    def subset(self, limit: int | None = None, names: Sequence[str] | None = None) -> Dataset:
        pairs = self.pairs
        if names is not None:
            wanted = set(names)
            pairs = [p for p in pairs if p[0] in wanted]
        if limit is not None:
            pairs = pairs[:limit]
        return Dataset(self.name, self.classes, pairs, self.ignore_index, self.palette, self.extra,
                       self.things)


def check_item(item: Item, num_classes: int, ignore_index: int) -> None:
    """Refuse labels that do not fit the image or the class list, naming the file."""
    where = item.label_path or item.name
    if item.image.shape[:2] != item.label.shape:
        image = f" of {item.image_path}" if item.image_path else ""
        raise DataError(
            f"{where}: label size {item.label.shape[1]}x{item.label.shape[0]} differs from "
            f"image size {item.image.shape[1]}x{item.image.shape[0]}{image}",
            hint="labels must have exactly the image's width and height",
        )
    bad = (item.label != ignore_index) & ((item.label < 0) | (item.label >= num_classes))
    if bad.any():
        ids = sorted(int(v) for v in np.unique(item.label[bad]))[:8]
        raise DataError(
            f"{where}: label ids {ids} are outside the {num_classes} classes "
            f"(0-{num_classes - 1}, ignore = {ignore_index})",
            hint="check --data FORMAT: the reader must match how the labels are encoded",
        )


@dataclass
class DatasetPlugin:
    """A `--data NAME:PATH` reader. `load(path, split)` returns a Dataset."""

    name: str
    load: Callable[[str, str | None], Dataset]
    syntax: str
    example: str
    description: str = ""
    requires: tuple[str, ...] = ()
    install: str = ""


def default_palette(num_classes: int) -> np.ndarray:
    """Distinct colours for overlays (the VOC bit-interleaving scheme)."""
    pal = np.zeros((max(num_classes, 1), 3), dtype=np.uint8)
    for i in range(num_classes):
        c, r, g, b = i + 1, 0, 0, 0
        for j in range(8):
            r |= ((c >> 0) & 1) << (7 - j)
            g |= ((c >> 1) & 1) << (7 - j)
            b |= ((c >> 2) & 1) << (7 - j)
            c >>= 3
        pal[i] = (r, g, b)
    return pal


def check_flat_split(root: Path | str, split: str | None, accepted: Sequence[str], fmt: str) -> None:
    """The one check of --split for readers that do not pick a split folder: a flat folder is
    read as its format's default split only, and a format without splits (`accepted` empty)
    takes no --split at all. Every reader must refuse a split it ignores, never drop it."""
    if split is None or split in accepted:
        return
    if not accepted:
        raise NoSplits(
            f"{root}: unknown split {split!r}: {fmt} datasets have no splits",
            hint=f"drop --split, or point --data at the split's own {fmt} folder",
        )
    raise NoSplits(
        f"{root}: unknown split {split!r}: this {fmt} folder has no split subfolders",
        hint=f"drop --split (the folder is read as split {accepted[0]!r}) "
        f"or point PATH at a full {fmt} tree",
    )
