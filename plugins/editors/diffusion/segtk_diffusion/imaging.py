"""Pixel-side helpers: working size, resizing, colourised labels, masks. numpy + torch only."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image

from segtk.core import DataError, colourise, voc_colormap


def work_size(height: int, width: int, resolution: int, multiple: int) -> tuple[int, int]:
    """(h, w) with the long side near `resolution`, aspect kept, both multiples of `multiple`."""
    scale = resolution / max(height, width)
    h = max(multiple, int(round(height * scale / multiple)) * multiple)
    w = max(multiple, int(round(width * scale / multiple)) * multiple)
    return h, w


def resize_rgb(image: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """uint8 [H,W,3] to uint8 [h,w,3] (bicubic); a no-op copy when the size already matches."""
    h, w = size
    if image.shape[:2] == (h, w):
        return image.copy()
    return np.array(Image.fromarray(image).resize((w, h), Image.Resampling.BICUBIC))


def resize_nearest(label: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """Integer [H,W] to [h,w] by nearest neighbour (labels are never interpolated)."""
    h, w = size
    if label.shape == (h, w):
        return label.copy()
    rows = (np.arange(h) * label.shape[0] / h).astype(np.int64)
    cols = (np.arange(w) * label.shape[1] / w).astype(np.int64)
    return label[rows][:, cols]


def to_model(image: np.ndarray, device, dtype) -> torch.Tensor:
    """uint8 [H,W,3] to float [1,3,H,W] in [-1, 1] (the VAE's range)."""
    x = torch.from_numpy(np.ascontiguousarray(image)).permute(2, 0, 1)[None].float() / 127.5 - 1
    return x.to(device=device, dtype=dtype)


def from_model(x: torch.Tensor) -> np.ndarray:
    """float [1,3,H,W] in [-1, 1] to uint8 [H,W,3]."""
    x = ((x[0].float().clamp(-1, 1) + 1) * 127.5).round()
    return x.permute(1, 2, 0).to(torch.uint8).cpu().numpy()


def load_palette(spec) -> np.ndarray:
    """None (VOC bit palette), an [K,3] array-like, or a .npy / .json file of [K,3] colours."""
    if spec is None:
        return voc_colormap()
    if isinstance(spec, str | Path):
        p = Path(spec)
        if not p.is_file():
            raise DataError(f"palette file {p} does not exist",
                            hint="give a .npy or .json file holding [K,3] RGB colours")
        spec = np.load(p) if p.suffix == ".npy" else json.loads(p.read_text())
    pal = np.asarray(spec, dtype=np.int64)
    if pal.ndim != 2 or pal.shape[1] != 3 or pal.min() < 0 or pal.max() > 255:
        raise DataError(f"a palette must be [K,3] RGB values in 0..255, got shape {pal.shape}")
    return pal.astype(np.uint8)


def control_tensor(label: np.ndarray, palette: np.ndarray, ignore_index: int,
                   size: tuple[int, int], device, dtype) -> torch.Tensor:
    """The ControlNet condition: the colourised label at the working size, [1,3,h,w] in [0,1]."""
    rgb = colourise(resize_nearest(label, size), palette, ignore_index)
    x = torch.from_numpy(rgb).permute(2, 0, 1)[None].float() / 255.0
    return x.to(device=device, dtype=dtype)


def latent_mask(mask: np.ndarray, size: tuple[int, int], device) -> torch.Tensor:
    """A binary [1,1,h,w] float mask at `size`: cells at least half covered by the object.

    Falls back to "any pixel covered" when that leaves nothing, so thin objects still count.
    """
    m = torch.from_numpy(mask.astype(np.float32))[None, None]
    frac = F.interpolate(m, size=size, mode="area")
    out = (frac >= 0.5).float()
    if out.sum() == 0 and mask.any():
        out = (frac > 0).float()
    return out.to(device)


def soft_inpaint_mask(region: np.ndarray, dilate: int = 5, smooth: int = 3) -> np.ndarray:
    """The paper's repaint mask: `region` dilated (dilate×dilate), then box-averaged (smooth×smooth).

    float32 [H,W] in [0,1]; exactly 0 far from the region (more than dilate//2 + smooth//2 px).
    """
    m = torch.from_numpy(region.astype(np.float32))[None, None]
    if dilate > 1:
        m = F.max_pool2d(m, dilate, stride=1, padding=dilate // 2)
    if smooth > 1:
        m = F.avg_pool2d(m, smooth, stride=1, padding=smooth // 2, count_include_pad=False)
    return m[0, 0].clamp(0, 1).numpy()
