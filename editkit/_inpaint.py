"""Repainting the area an object uncovered: `inpaint` (row-wise interpolation with the image's
grain, `fill_rows`, or OpenCV's Telea / Navier-Stokes inpainting), and the words for what
surrounds the object (`surroundings_prompt`), the text a backend repaints it with."""

from __future__ import annotations

import numpy as np

from segtk.core import Sample

INPAINT_METHODS = ("rows", "telea", "ns")


def inpaint(image: np.ndarray, hole: np.ndarray, rng: np.random.Generator, method: str = "rows",
            dilate: int = 3, radius: float = 5.0, grain: float = 1.0) -> np.ndarray:
    """`image` (uint8 RGB) repainted over `hole` (bool) dilated by `dilate` px, so that a soft
    object edge goes too: `method` "rows" (`fill_rows` with `grain`), "telea" or "ns" (OpenCV
    inpainting with `radius`). A new array; pixels outside the dilated hole are kept."""
    import cv2  # the editors' optional dependency (`requires`)

    if method not in INPAINT_METHODS:
        raise ValueError(f"inpaint method {method!r} is not one of {', '.join(INPAINT_METHODS)}")
    holes: np.ndarray = hole.astype(np.uint8)
    if dilate > 0:
        kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * dilate + 1,) * 2)
        holes = cv2.dilate(holes, kernel)
    if method == "rows":
        return fill_rows(image, holes.astype(bool), rng, grain)
    flag = cv2.INPAINT_TELEA if method == "telea" else cv2.INPAINT_NS
    bgr = np.ascontiguousarray(image[..., ::-1])
    out: np.ndarray = cv2.inpaint(bgr, holes * 255, radius, flag)[..., ::-1].copy()
    return out


def surroundings_prompt(sample: Sample, width: int = 5, top: int = 2) -> str:
    """'a photo of road and building': what surrounds the object, a text for repainting its
    old place (the paper asks a VLM; this is the label's answer)."""
    m = sample.mask
    ring = np.zeros_like(m)
    for dy in range(-width, width + 1):  # a square dilation without OpenCV
        for dx in range(-width, width + 1):
            ring[max(dy, 0):m.shape[0] + min(dy, 0), max(dx, 0):m.shape[1] + min(dx, 0)] |= \
                m[max(-dy, 0):m.shape[0] - max(dy, 0), max(-dx, 0):m.shape[1] - max(dx, 0)]
    ring &= ~m
    ids = sample.label[ring]
    ids = ids[(ids != sample.ignore_index) & (ids >= 0) & (ids < len(sample.classes))]
    values, counts = np.unique(ids, return_counts=True)
    names = [sample.classes[int(v)].replace("_", " ") for v in values[np.argsort(-counts)][:top]]
    return "a photo of " + " and ".join(names) if names else ""


def fill_rows(image: np.ndarray, hole: np.ndarray, rng: np.random.Generator,
              grain: float = 1.0) -> np.ndarray:
    """Fill `hole` row by row, interpolating linearly between the known pixels left and right
    of it (constant beyond the last one), plus noise as strong as the image's fine grain
    around the hole (robust MAD estimate, × `grain`). Ground, kerbs, walls and fences
    continue across the hole, which suits street and indoor scenes; rows that are all hole
    copy the nearest filled row."""
    import cv2  # the editors' optional dependency (`requires`)

    out = image.astype(np.float32)
    h, w = hole.shape
    cols = np.arange(w)
    # the values to interpolate from: a 7-px horizontal mean over known pixels only
    known_f = (~hole).astype(np.float32)
    num = cv2.blur(out * known_f[..., None], (7, 1), borderType=cv2.BORDER_REPLICATE)
    den = cv2.blur(known_f, (7, 1), borderType=cv2.BORDER_REPLICATE)[..., None]
    smooth = np.where(den > 1e-3, num / np.maximum(den, 1e-3), out)
    for y in np.nonzero(hole.any(axis=1))[0]:
        known = ~hole[y]
        if not known.any():
            continue
        gaps = hole[y]
        for c in range(3):
            out[y, gaps, c] = np.interp(cols[gaps], cols[known], smooth[y, known, c])
    good = [y for y in range(h) if not hole[y].all()]
    for y in np.nonzero(hole.all(axis=1))[0]:
        if good:
            out[y] = out[min(good, key=lambda g: abs(g - y))]
    if grain > 0 and hole.any():
        ring = cv2.dilate(hole.astype(np.uint8), np.ones((9, 9), np.uint8)).astype(bool) & ~hole
        detail = image.astype(np.float32) - cv2.GaussianBlur(image.astype(np.float32), (0, 0), 1.5)
        # robust (MAD) noise level: the sensor/texture grain, not the edges around the hole
        d = detail[ring] if ring.any() else np.zeros((1, 3), np.float32)
        std = 1.4826 * np.median(np.abs(d - np.median(d, axis=0)), axis=0)
        noise = rng.normal(0.0, 1.0, (h, w, 1)).astype(np.float32) * std * grain
        out[hole] += noise[hole]
    return np.clip(np.round(out), 0, 255).astype(np.uint8)
