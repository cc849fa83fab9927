"""The segtk-http/1 wire format, shared by the client and `segtk serve` (see README.md).

Binary (default, lossless): an uncompressed .npz body, `application/x-npz`.
  request  `images`: float32 [N,3,H,W] in [0,1] (float16/float64 are cast to float32),
           or uint8 [N,3,H,W] (divided by 255)
  response `labels`: uint8 [N,H,W] when every id < 256, else uint16
JSON (8-bit images only, for clients in other languages): `application/json`
  request  {"images": ["<base64 PNG>", ...]}  (RGB, all the same size)
  response {"labels": ["<base64 PNG>", ...], "dtype": "uint8" | "uint16"}  (L or 16-bit grey)
"""

from __future__ import annotations

import base64
import io
import zipfile

import numpy as np

PROTOCOL = "segtk-http/1"
NPZ = "application/x-npz"
JSON = "application/json"


class ProtocolError(ValueError):
    """A body that does not follow segtk-http/1."""


def media_type(header: str | None) -> str:
    return (header or "").split(";")[0].strip().lower()


def dump_npz(**arrays: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def load_npz(body: bytes, key: str) -> np.ndarray:
    """One array from an npz body; never unpickles."""
    try:
        with np.load(io.BytesIO(body), allow_pickle=False) as npz:
            if key not in npz.files:
                raise ProtocolError(f"npz body has no array {key!r} (has: {', '.join(npz.files) or 'none'})")
            return npz[key]
    except ProtocolError:
        raise
    except (ValueError, OSError, EOFError, zipfile.BadZipFile, KeyError) as exc:
        raise ProtocolError(f"body is not a valid npz file ({type(exc).__name__}: {exc})") from exc


def images_to_float(array: np.ndarray) -> np.ndarray:
    """Validate request images and return float32 [N,3,H,W] in [0,1]."""
    if array.ndim != 4 or array.shape[1] != 3:
        raise ProtocolError(f"images must have shape [N,3,H,W], got {list(array.shape)}")
    if array.dtype == np.uint8:
        return array.astype(np.float32) / np.float32(255.0)
    if array.dtype.kind != "f":
        raise ProtocolError(f"images must be float32 in [0,1] or uint8, got {array.dtype}")
    out = np.ascontiguousarray(array, dtype=np.float32)
    if not np.isfinite(out).all():
        raise ProtocolError("images contain NaN or infinite values")
    return out


def labels_to_wire(labels: np.ndarray) -> np.ndarray:
    """int labels -> the smallest wire dtype (uint8 or uint16)."""
    if labels.size and (labels.min() < 0 or labels.max() > 65535):
        raise ValueError(f"label ids must lie in [0, 65535], got [{labels.min()}, {labels.max()}]")
    dtype = np.uint8 if (labels.size == 0 or labels.max() < 256) else np.uint16
    return labels.astype(dtype)


def encode_png(array: np.ndarray) -> str:
    from PIL import Image

    if array.dtype == np.uint16:
        img = Image.fromarray(array.astype(np.uint16), mode="I;16")
    else:
        img = Image.fromarray(array)
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return base64.b64encode(buf.getvalue()).decode("ascii")


def decode_png(text: str, rgb: bool) -> np.ndarray:
    from PIL import Image, UnidentifiedImageError

    try:
        img = Image.open(io.BytesIO(base64.b64decode(text, validate=True)))
        img.load()
    except (ValueError, TypeError, OSError, UnidentifiedImageError, Image.DecompressionBombError) as exc:
        raise ProtocolError(f"not a base64 PNG ({type(exc).__name__}: {exc})") from exc
    if rgb:
        return np.asarray(img.convert("RGB"), dtype=np.uint8)
    if img.mode not in ("L", "P", "I", "I;16"):
        raise ProtocolError(f"label PNGs must be grey (L or 16-bit), got mode {img.mode}")
    return np.asarray(img).astype(np.int64)


def json_images(payload: object) -> np.ndarray:
    """{"images": [b64 PNG, ...]} -> float32 [N,3,H,W]."""
    if not isinstance(payload, dict) or not isinstance(payload.get("images"), list):
        raise ProtocolError('JSON body must be {"images": ["<base64 PNG>", ...]}')
    arrays = [decode_png(item, rgb=True) if isinstance(item, str) else None
              for item in payload["images"]]
    if any(a is None for a in arrays):
        raise ProtocolError("every entry of images must be a base64 PNG string")
    if len({a.shape for a in arrays}) > 1:
        raise ProtocolError("all images of one request must have the same size")
    if not arrays:
        return np.zeros((0, 3, 0, 0), dtype=np.float32)
    return np.stack(arrays).transpose(0, 3, 1, 2).astype(np.float32) / np.float32(255.0)
