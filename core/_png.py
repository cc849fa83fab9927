"""A small, fast PNG encoder for the images segtk writes by the thousand (attack results).

PIL's encoder picks a filter per row by trying all five, which costs as much as the deflate
itself. Here every row gets the Sub filter (one vectorised subtraction for the whole image)
and zlib level 1 with run-length matching: half of PIL's time at level 1 on a 480×360 photo,
files about 5% larger. Any PNG reader decodes the same pixels.
"""

from __future__ import annotations

import struct
import zlib

import numpy as np

SIGNATURE = b"\x89PNG\r\n\x1a\n"
COLOUR_TYPES = {1: 0, 2: 4, 3: 2, 4: 6}  # channels -> grey, grey+alpha, RGB, RGBA
PALETTE = 3
SUB = 1  # filter type: each byte minus the byte one pixel to its left, mod 256


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(data, zlib.crc32(kind)))


def encode_png(array: np.ndarray, palette: np.ndarray | None = None) -> bytes:
    """PNG bytes of a uint8 [H,W] (grey, or palette indices if `palette` [N≤256,3] is given)
    or [H,W,C] image with C in 1..4. The caller checks the values fit 8 bits."""
    if array.ndim not in (2, 3) or (array.ndim == 3 and array.shape[2] not in COLOUR_TYPES):
        raise ValueError(f"a PNG holds [H,W] or [H,W,1..4] arrays, got shape {array.shape}")
    h, w = array.shape[:2]
    if h == 0 or w == 0:
        raise ValueError(f"a PNG needs at least one pixel, got shape {array.shape}")
    c = 1 if array.ndim == 2 else array.shape[2]
    flat = np.ascontiguousarray(array, dtype=np.uint8).reshape(h, w * c)
    rows = np.empty((h, 1 + w * c), dtype=np.uint8)
    rows[:, 0] = SUB
    rows[:, 1 : 1 + c] = flat[:, :c]
    np.subtract(flat[:, c:], flat[:, :-c], out=rows[:, 1 + c :])  # uint8 wraps: mod 256
    deflate = zlib.compressobj(1, zlib.DEFLATED, 15, 9, zlib.Z_RLE)
    data = deflate.compress(rows.data) + deflate.flush()
    colour = COLOUR_TYPES[c] if palette is None else PALETTE
    if palette is not None and c != 1:
        raise ValueError("a palette PNG holds [H,W] indices")
    parts = [SIGNATURE, _chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, colour, 0, 0, 0))]
    if palette is not None:
        parts.append(_chunk(b"PLTE", np.ascontiguousarray(palette, dtype=np.uint8).reshape(-1, 3)[:256].tobytes()))
    parts += [_chunk(b"IDAT", data), _chunk(b"IEND", b"")]
    return b"".join(parts)
