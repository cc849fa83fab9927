"""Object transforms: the object's box, its scaled and shifted place, and the rigid transform
that moves image, mask and label together (Gen4Seg Eq. 8)."""

from __future__ import annotations

import numpy as np
from PIL import Image

from segtk.core import EditedSample, PluginError, Sample, SkipSample


def background_fill(classes: list[str], ignore_index: int, fill: str = "auto") -> int:
    """The label of uncovered pixels: "auto" = the class named background if any, else ignore;
    "ignore"; or a class name."""
    names = [c.strip().lower() for c in classes]
    f = str(fill).strip().lower()
    if f == "ignore":
        return ignore_index
    if f == "auto":
        for candidate in ("background", "_background_", "backgroud"):
            if candidate in names:
                return names.index(candidate)
        return ignore_index
    if f in names:
        return names.index(f)
    raise PluginError(f"fill={fill!r} is not a class of this dataset",
                      hint="use fill=auto, fill=ignore or one of: " + ", ".join(classes))


def bbox(mask: np.ndarray) -> tuple[int, int, int, int]:
    """(x0, y0, x1, y1), end-exclusive, of a non-empty mask."""
    ys, xs = np.nonzero(mask)
    return int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1


def _resize(channel: np.ndarray, size: tuple[int, int], nearest: bool) -> np.ndarray:
    if nearest:
        img = Image.fromarray(channel.astype(np.int32), mode="I")
        return np.asarray(img.resize(size, Image.Resampling.NEAREST), dtype=np.int64)
    img = Image.fromarray(channel.astype(np.float32), mode="F")
    return np.asarray(img.resize(size, Image.Resampling.BOX), dtype=np.float32)


Scale = float | tuple[float, float]  # one factor, or (e_x, e_y) of Gen4Seg Eq. 8


def scales(scale: Scale) -> tuple[float, float]:
    """(e_x, e_y) of a scale given as one factor or a pair."""
    if isinstance(scale, tuple | list):
        return float(scale[0]), float(scale[1])
    return float(scale), float(scale)


def target_box(box: tuple[int, int, int, int], scale: Scale,
               shift: tuple[int, int] = (0, 0)) -> tuple[int, int, int, int]:
    """(x0, y0, width, height) of `box` scaled by `scale` (e_x, e_y) about its centre, then
    shifted."""
    x0, y0, x1, y1 = box
    ex, ey = scales(scale)
    nw, nh = max(1, int(round((x1 - x0) * ex))), max(1, int(round((y1 - y0) * ey)))
    nx0 = int(round((x0 + x1) / 2 - nw / 2)) + int(shift[0])
    ny0 = int(round((y0 + y1) / 2 - nh / 2)) + int(shift[1])
    return nx0, ny0, nw, nh


def border_sides(mask: np.ndarray) -> set[str]:
    """The image borders the object touches ("left", "right", "top", "bottom"): it is cut there."""
    h, w = mask.shape
    x0, y0, x1, y1 = bbox(mask)
    sides = {"left": x0 == 0, "right": x1 == w, "top": y0 == 0, "bottom": y1 == h}
    return {k for k, v in sides.items() if v}


def transform_object(sample: Sample, scale: Scale, shift: tuple[int, int], fill: int) -> EditedSample:
    """Scale the object about its box centre by `scale` (one factor, or (e_x, e_y) of Gen4Seg
    Eq. 8), then move it by `shift` = (dx, dy) px.

    Image, mask and label move together: the mask and the object's label with nearest-neighbour
    sampling, the image with area averaging over object pixels only (no background halo). The
    object is pasted over whatever is at its new place; the area it uncovers (`repaint`) gets
    label `fill` and keeps its old pixels for a backend to repaint. Raises SkipSample
    ("no-room") if the object would leave the image.
    """
    h_img, w_img = sample.mask.shape
    x0, y0, x1, y1 = bbox(sample.mask)
    w, h = x1 - x0, y1 - y0
    nx0, ny0, nw, nh = target_box((x0, y0, x1, y1), scale, shift)
    if nx0 < 0 or ny0 < 0 or nx0 + nw > w_img or ny0 + nh > h_img:
        raise SkipSample("no-room", f"the moved object box ({nx0},{ny0})+{nw}x{nh} leaves the "
                                    f"{w_img}x{h_img} image")
    crop_mask = sample.mask[y0:y1, x0:x1]
    crop_label = sample.label[y0:y1, x0:x1]
    crop_image = sample.image[y0:y1, x0:x1]
    if (nw, nh) == (w, h):
        new_mask, new_label, new_pixels = crop_mask, crop_label, crop_image
    else:
        new_mask = _resize(crop_mask, (nw, nh), nearest=True).astype(bool)
        new_label = _resize(crop_label, (nw, nh), nearest=True)
        weight = _resize(crop_mask.astype(np.float32), (nw, nh), nearest=False)
        chans = [_resize(crop_image[..., c].astype(np.float32) * crop_mask, (nw, nh), False)
                 for c in range(3)]
        avg = np.stack(chans, -1) / np.maximum(weight, 1e-6)[..., None]
        near = np.stack([_resize(crop_image[..., c], (nw, nh), True) for c in range(3)], -1)
        new_pixels = np.where((weight > 1e-6)[..., None], avg, near)
        new_pixels = np.clip(np.round(new_pixels), 0, 255).astype(np.uint8)
    mask_star = np.zeros_like(sample.mask)
    mask_star[ny0:ny0 + nh, nx0:nx0 + nw] = new_mask
    uncovered = sample.mask & ~mask_star
    image = sample.image.copy()
    label = sample.label.copy()
    label[uncovered] = fill
    region = (slice(ny0, ny0 + nh), slice(nx0, nx0 + nw))
    image[region][new_mask] = new_pixels[new_mask]
    label[region][new_mask] = new_label[new_mask]
    ex, ey = scales(scale)
    meta = {"scale": [ex, ey], "shift": [int(shift[0]), int(shift[1])],
            "box": [x0, y0, x1, y1], "new_box": [nx0, ny0, nx0 + nw, ny0 + nh],
            "fill": int(fill), "uncovered_px": int(uncovered.sum())}
    return EditedSample(image, label, mask_star, "", metadata=meta, repaint=uncovered)
