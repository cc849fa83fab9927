"""What one /predict request may make `segtk serve` allocate, checked before anything is decoded.

A small body can declare a huge image (a decompression bomb: a deflated npy of zeros, a PNG
whose header says 60000x60000), so sizes are read from the headers first: the npy header
(shape, dtype) of the npz's `images` member and each PNG's IHDR. Only then are pixels
decompressed, straight into one float32 [N,3,H,W] array (12 bytes a pixel, nothing else as
big), so decoding a request costs at most its body plus 12 bytes x `max_request_pixels`. What
the model's forward pass may cost is sized in budget.py.
"""

from __future__ import annotations

import binascii
import io
import re
import struct
import zipfile
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import IO

import numpy as np
from PIL import Image, UnidentifiedImageError

from segtk.core import SegtkError
from segtk_http.npzfile import NPZ_ERRORS, check_directory, open_member
from segtk_http.protocol import LimitError, ProtocolError

MIB = 2**20
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
READ_BLOCK = 4 * MIB  # bytes decompressed at a time


@dataclass(frozen=True)
class Limits:
    """Bounds on requests (the `segtk serve` options of the same names).

    These defaults are fixed; `budget.plan_limits` derives `max_pixels` and
    `max_forward_pixels` from a memory budget and the model's measured cost, as `segtk serve`
    does.
    """

    max_batch: int = 64
    max_pixels: int = 4096 * 4096  # one image, H*W
    max_request_pixels: int = 4096 * 4096  # all images of a request: 192 MiB as float32
    max_body_bytes: int = 64 * MIB
    max_forward_pixels: int = 4096 * 4096  # one model forward pass: bigger requests are chunked
    max_buffered_bytes: int = 256 * MIB  # bodies being received at once, all requests together
    body_timeout: float = 30.0  # seconds to receive a whole body
    max_connections: int = 1000  # open at once; `segtk serve` fits it to the open-file limit
    header_timeout: float = 10.0  # seconds from a connection (or its last answer) to the headers

    def __post_init__(self) -> None:
        for flag, value in (("--max-batch", self.max_batch), ("--max-pixels", self.max_pixels),
                            ("--max-request-pixels", self.max_request_pixels),
                            ("--max-body-mb", self.max_body_bytes),
                            ("--forward-pixels", self.max_forward_pixels),
                            ("--body-buffer-mb", self.max_buffered_bytes),
                            ("--body-timeout", self.body_timeout),
                            ("--max-connections", self.max_connections),
                            ("--header-timeout", self.header_timeout)):
            if value <= 0:
                raise SegtkError(f"{flag} must be positive, got {value}", hint=f"raise {flag}")
        for small, flag, big, other in (
                (self.max_request_pixels, "--max-request-pixels", self.max_pixels, "--max-pixels"),
                (self.max_forward_pixels, "--forward-pixels", self.max_pixels, "--max-pixels"),
                (self.max_buffered_bytes, "--body-buffer-mb", self.max_body_bytes,
                 "--max-body-mb")):
            if small < big:
                raise SegtkError(f"{flag} {small} is below {other} {big}, so the largest "
                                 f"{'body' if 'body' in flag else 'image'} is refused",
                                 hint=f"raise {flag} to at least {other}, or lower {other}")

    def info(self) -> dict[str, int]:
        """What GET /info tells clients, so they split batches to fit."""
        return {"max_batch": self.max_batch, "max_pixels": self.max_pixels,
                "max_request_pixels": self.max_request_pixels,
                "max_body_bytes": self.max_body_bytes,
                "max_forward_pixels": self.max_forward_pixels}

    def check_count(self, count: int) -> None:
        if count > self.max_batch:
            raise LimitError(f"{count} images in one request, the server takes at most "
                             f"{self.max_batch}; split the batch")

    def check(self, sizes: Sequence[tuple[int, int]]) -> None:
        """Refuse (413) a request whose declared image sizes (H, W) are over the limits."""
        self.check_count(len(sizes))
        for i, (h, w) in enumerate(sizes):
            if h * w > self.max_pixels:
                raise LimitError(f"image {i} is {h}x{w} = {h * w} pixels, the server takes at "
                                 f"most {self.max_pixels} per image (segtk serve --max-pixels, "
                                 "sized by --memory-mb)")
        total = sum(h * w for h, w in sizes)
        if total > self.max_request_pixels:
            raise LimitError(f"{total} pixels in one request, the server takes at most "
                             f"{self.max_request_pixels} (segtk serve --max-request-pixels); "
                             "send fewer images per request")


def check_nonempty(index: int | None, h: int, w: int) -> None:
    if h == 0 or w == 0:
        what = "images have" if index is None else f"image {index} has"
        raise ProtocolError(f"{what} zero size ({h}x{w}); send images of at least 1x1 pixel")


# --- npz ---------------------------------------------------------------------------------------

def npz_images(body: IO[bytes], limits: Limits) -> np.ndarray:
    """The npz body's `images` as float32 [N,3,H,W] in [0,1]; never unpickles.

    The zip directory is bounded before zipfile parses it; the shape and dtype come from the
    npy header and are checked against `limits` before a pixel is read; the zip member must
    declare exactly the bytes that header implies (zipfile never inflates past the declared
    size), and data is decompressed block by block.
    """
    try:
        check_directory(body, "npz body")
        with zipfile.ZipFile(body) as zf:
            fp, header = open_member(zf, "images", "npz body",
                                     lambda h: check_images_header(h.shape, h.dtype, limits))
            with fp:
                out = read_into_float32(fp, header.shape, header.fortran, header.dtype)
    except ProtocolError:
        raise
    except NPZ_ERRORS as exc:
        raise ProtocolError(f"body is not a valid npz file ({type(exc).__name__}: {exc})") from exc
    if header.dtype == np.uint8:
        out /= np.float32(255.0)
    else:
        check_range(out)
    return out


def check_images_header(shape: tuple[int, ...], dtype: np.dtype, limits: Limits) -> None:
    if not (dtype == np.uint8 or (dtype.kind == "f" and dtype.itemsize <= 8)):
        raise ProtocolError(f"images must be float32 in [0,1] or uint8, got {dtype}")
    if len(shape) != 4 or shape[1] != 3 or min(shape, default=0) < 0:
        raise ProtocolError(f"images must have shape [N,3,H,W], got {list(shape)}")
    n, _, h, w = shape
    limits.check_count(n)
    if n:
        check_nonempty(None, h, w)
        limits.check([(h, w)] * n)


def read_into_float32(fp: IO[bytes], shape: tuple[int, ...], fortran: bool,
                      dtype: np.dtype) -> np.ndarray:
    """Decompress the npy data a block at a time, casting straight into float32."""
    count = int(np.prod(shape))
    flat = np.empty(count, dtype=np.float32)
    step = max(1, READ_BLOCK // dtype.itemsize)
    with np.errstate(over="ignore", invalid="ignore"):  # float64 beyond float32 -> inf: refused later
        for start in range(0, count, step):
            n = min(step, count - start)
            raw = fp.read(n * dtype.itemsize)
            if len(raw) != n * dtype.itemsize:
                raise ProtocolError(f"images.npy ends early: {count} values declared")
            flat[start:start + n] = np.frombuffer(raw, dtype=dtype)
    if fortran:
        return np.ascontiguousarray(flat.reshape(shape[::-1]).transpose())
    return flat.reshape(shape)


def check_range(images: np.ndarray) -> None:
    """Float images must be finite and in [0, 1]; min/max make no temporary arrays."""
    if images.size == 0:
        return
    low, high = float(images.min()), float(images.max())
    if np.isnan(low) or np.isnan(high):
        raise ProtocolError("images contain NaN values; send pixel values in [0, 1]")
    if np.isinf(low) or np.isinf(high):
        raise ProtocolError("images contain infinite values (or float64 beyond float32's "
                            "range); send pixel values in [0, 1]")
    if low < 0 or high > 1:
        raise ProtocolError(f"images must hold pixel values in [0, 1], got values in "
                            f"[{low:g}, {high:g}]")


# --- JSON / PNG --------------------------------------------------------------------------------

JSON_SHAPE = 'JSON body must be {"images": ["<base64 PNG>", ...]}'
_JSON_HEAD = re.compile(rb'[ \t\r\n]*\{[ \t\r\n]*"images"[ \t\r\n]*:[ \t\r\n]*\[[ \t\r\n]*')
_JSON_SPACE = re.compile(rb"[ \t\r\n]*")
_JSON_COMMA = re.compile(rb",[ \t\r\n]*")
_JSON_TAIL = re.compile(rb"\][ \t\r\n]*\}[ \t\r\n]*")


def json_pngs(data: bytes, max_batch: int) -> list[bytes]:
    """The PNGs of a JSON body `{"images": ["<base64 PNG>", ...]}`, read from its bytes.

    No JSON document is built: parsing arbitrary JSON costs up to ~20x its size in Python
    objects (millions of empty lists), recurses on nesting and converts numbers of any length,
    so the body is matched against the one shape the protocol has instead. It costs at most
    the decoded PNGs (3/4 of the body) and refuses (413) a string past `max_batch` at once.
    """
    head = _JSON_HEAD.match(data)
    if head is None:
        raise ProtocolError(f"{JSON_SHAPE}; it starts with {_excerpt(data, 0)}")
    pos = head.end()
    pngs: list[bytes] = []
    while data[pos:pos + 1] != b"]" or pngs:  # a string, then a comma and the next, or the end
        if data[pos:pos + 1] != b'"':
            raise ProtocolError("every entry of images must be a base64 PNG string; found "
                                f"{_excerpt(data, pos)} at byte {pos}")
        if len(pngs) == max_batch:
            raise LimitError(f"more than {max_batch} images in one request, the server takes "
                             f"at most {max_batch}; split the batch")
        end = data.find(b'"', pos + 1)  # base64 has no quotes, and \" is no escape of it
        if end < 0:
            raise ProtocolError(f"image {len(pngs)} is not base64 (its string at byte {pos} "
                                "does not end)")
        pngs.append(_b64(_unescaped(data, pos + 1, end, len(pngs)), len(pngs)))
        space = _JSON_SPACE.match(data, end + 1)  # always matches, maybe nothing
        pos = space.end() if space else end + 1
        comma = _JSON_COMMA.match(data, pos)
        if comma is None:
            break
        pos = comma.end()
    if data[pos:pos + 1] != b"]":
        raise ProtocolError("every entry of images must be a base64 PNG string, with commas "
                            f"between; found {_excerpt(data, pos)} at byte {pos}")
    if _JSON_TAIL.fullmatch(data, pos) is None:
        raise ProtocolError(f"{JSON_SHAPE} and nothing more; found {_excerpt(data, pos)} at "
                            f"byte {pos}")
    return pngs


def _unescaped(data: bytes, start: int, end: int, index: int) -> memoryview:
    """data[start:end] without a copy, or with the `\\/` escapes some JSON encoders write
    replaced; any other escape cannot be base64."""
    if data.find(b"\\", start, end) < 0:
        return memoryview(data)[start:end]
    text = data[start:end].replace(b"\\/", b"/")
    if b"\\" in text:
        raise ProtocolError(f"image {index} is not base64 (an escape other than \\/ in its "
                            f"string at byte {start - 1})")
    return memoryview(text)


def _excerpt(data: bytes, pos: int, size: int = 24) -> str:
    """A few bytes of a peer's body, quoted: never echo it unbounded."""
    return repr(data[pos:pos + size]) + ("..." if len(data) > pos + size else "")


def png_images(payload: object, limits: Limits) -> np.ndarray:
    """{"images": [b64 PNG, ...]} (already parsed) -> float32 [N,3,H,W]; see `decode_pngs`."""
    if not isinstance(payload, dict) or not isinstance(payload.get("images"), list):
        raise ProtocolError(JSON_SHAPE)
    items = payload["images"]
    limits.check_count(len(items))
    if not all(isinstance(item, str) for item in items):
        raise ProtocolError("every entry of images must be a base64 PNG string")
    return decode_pngs([_b64(text, i) for i, text in enumerate(items)], limits)


def decode_pngs(pngs: list[bytes], limits: Limits) -> np.ndarray:
    """PNG files -> float32 [N,3,H,W]; sizes are read from each IHDR and checked first."""
    sizes = [png_size(data, i) for i, data in enumerate(pngs)]
    limits.check(sizes)
    for i, (h, w) in enumerate(sizes):
        check_nonempty(i, h, w)
    if len(set(sizes)) > 1:
        raise ProtocolError(f"all images of one request must have the same size, got "
                            f"{', '.join(sorted({f'{h}x{w}' for h, w in sizes}))}")
    if not pngs:
        return np.zeros((0, 3, 0, 0), dtype=np.float32)
    out = np.empty((len(pngs), 3, *sizes[0]), dtype=np.float32)
    for i, data in enumerate(pngs):
        out[i] = decode_png(data, i, sizes[i]).transpose(2, 0, 1)
        pngs[i] = b""
    out /= np.float32(255.0)
    return out


def _b64(text: str | memoryview, index: int) -> bytes:
    """Strict base64 (no other characters, no data after the padding); `text` is not copied."""
    try:
        if isinstance(text, str):
            text = memoryview(text.encode("ascii"))
        return binascii.a2b_base64(text, strict_mode=True)
    except (binascii.Error, ValueError, UnicodeEncodeError) as exc:
        raise ProtocolError(f"image {index} is not base64 ({exc})") from exc


def png_size(data: bytes, index: int) -> tuple[int, int]:
    """(H, W) from the IHDR chunk, which the PNG standard puts first."""
    if data[:8] != PNG_SIGNATURE or data[12:16] != b"IHDR" or len(data) < 24:
        raise ProtocolError(f"image {index} is not a PNG (no PNG signature and header)")
    width, height = struct.unpack(">II", data[16:24])
    return height, width


def decode_png(data: bytes, index: int, size: tuple[int, int]) -> np.ndarray:
    """RGB uint8 [H,W,3] of a PNG whose size was already checked."""

    try:
        with Image.open(io.BytesIO(data), formats=["PNG"]) as img:
            if (img.height, img.width) != size:
                raise ProtocolError(f"image {index} is not a PNG (its header is inconsistent)")
            img.load()
            return np.asarray(img.convert("RGB"), dtype=np.uint8)
    except ProtocolError:
        raise
    except Image.DecompressionBombError as exc:  # PIL's own guard, set lower than ours
        raise LimitError(f"image {index} refused by Pillow: {exc}") from exc
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError, EOFError,
            struct.error, zlib.error) as exc:
        raise ProtocolError(f"image {index} is not a PNG ({type(exc).__name__}: {exc})") from exc
