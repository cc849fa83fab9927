"""The segtk-http/1 wire format, shared by the client and `segtk serve` (see README.md).

Binary (default, lossless): an .npz body, `application/x-npz`.
  request  `images`: float32 [N,3,H,W] in [0,1] (float16/float64 are cast to float32),
           or uint8 [N,3,H,W] (divided by 255); decoded with bounds by `limits.npz_images`
  response `labels`: uint8 [N,H,W] when every id < 256, else uint16
JSON (8-bit images only, for clients in other languages): `application/json`
  request  {"images": ["<base64 PNG>", ...]}  (RGB, all the same size; `limits.png_images`)
  response {"labels": ["<base64 PNG>", ...], "dtype": "uint8" | "uint16"}  (L or 16-bit grey)
"""

from __future__ import annotations

import base64
import io
import zipfile

import numpy as np
from PIL import Image

PROTOCOL = "segtk-http/1"
NPZ = "application/x-npz"
JSON = "application/json"
MAX_MESSAGE = 500  # characters of an error message, at either end: never echo a peer unbounded


class ProtocolError(ValueError):
    """A body that does not follow segtk-http/1 (HTTP 400)."""

    status = 400


class LimitError(ProtocolError):
    """A body, or the images it declares, over the server's limits (HTTP 413)."""

    status = 413


class Busy(ProtocolError):
    """Bodies being received already fill the server's --body-buffer-mb (HTTP 503: retry)."""

    status = 503


def bounded(text: str, limit: int = MAX_MESSAGE) -> str:
    """`text` cut to `limit` characters, saying how much was left out."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text) - limit} more characters)"


def media_type(header: str | None) -> str:
    return (header or "").split(";")[0].strip().lower()


def dump_npz(**arrays: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)  # type: ignore[arg-type]  # numpy's stub reads ** as allow_pickle
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


def labels_to_wire(labels: np.ndarray) -> np.ndarray:
    """int labels -> the smallest wire dtype (uint8 or uint16)."""
    if labels.size and (labels.min() < 0 or labels.max() > 65535):
        raise ValueError(f"label ids must lie in [0, 65535], got [{labels.min()}, {labels.max()}]")
    dtype = np.uint8 if (labels.size == 0 or labels.max() < 256) else np.uint16
    return labels.astype(dtype)


def encode_png(array: np.ndarray) -> str:

    img = Image.fromarray(np.ascontiguousarray(array))  # uint8 -> L, uint16 -> I;16
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return base64.b64encode(buf.getvalue()).decode("ascii")
