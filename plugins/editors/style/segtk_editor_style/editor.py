"""Image style: global stylisation with OpenCV filters (the label is unchanged).

painting     cv2.stylization (edge-preserving smoothing + boosted edges)
sketch       cv2.pencilSketch, grey pencil on paper
cartoon      repeated bilateral filtering, lightness quantisation and black outlines
watercolour  mean-shift flattened colour, paler pigment, dark pooled edges, paper grain
oil          Kuwahara filter (flat brush patches) with a light brush-stroke relief
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from segtk.core import EditedSample, Sample
from segtk.editkit import AttributeEditor

STYLES = ("painting", "sketch", "cartoon", "watercolour", "oil")


def scale(image: np.ndarray) -> float:
    """Filter sizes are tuned for 480-pixel-wide images and scale with the image."""
    return max(image.shape[:2]) / 480.0


def odd(x: float, least: int = 3) -> int:
    return max(least, int(round(x)) // 2 * 2 + 1)


def painting(bgr: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    import cv2

    return cv2.stylization(bgr, sigma_s=min(float(rng.uniform(50, 70)) * scale(bgr), 200.0),
                           sigma_r=float(rng.uniform(0.35, 0.5)))


def sketch(bgr: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    import cv2

    grey, _ = cv2.pencilSketch(bgr, sigma_s=min(float(rng.uniform(40, 70)) * scale(bgr), 200.0),
                               sigma_r=float(rng.uniform(0.06, 0.1)),
                               shade_factor=float(rng.uniform(0.03, 0.06)))
    return cv2.cvtColor(grey, cv2.COLOR_GRAY2BGR)


def cartoon(bgr: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    import cv2

    s = scale(bgr)
    smooth = bgr
    for _ in range(int(rng.integers(4, 7))):
        smooth = cv2.bilateralFilter(smooth, odd(7 * s), 40, 7 * s)
    # Quantise lightness only (flat cel shading); hue and chroma stay smooth, so quantisation
    # never invents colours (per-channel steps turn grey asphalt teal or purple).
    levels = int(rng.integers(6, 10))
    step = 256 // levels
    lab = cv2.cvtColor(smooth, cv2.COLOR_BGR2LAB)
    lab[..., 0] = np.clip(lab[..., 0].astype(np.int32) // step * step + step // 2, 0, 255)
    flat = cv2.cvtColor(lab, cv2.COLOR_LAB2BGR)
    grey = cv2.medianBlur(cv2.cvtColor(bgr, cv2.COLOR_BGR2GRAY), odd(5 * s))
    edges = cv2.adaptiveThreshold(grey, 255, cv2.ADAPTIVE_THRESH_MEAN_C, cv2.THRESH_BINARY,
                                  odd(9 * s), 5)
    return cv2.bitwise_and(flat, flat, mask=edges)


def watercolour(bgr: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    import cv2

    s = scale(bgr)
    flat = cv2.pyrMeanShiftFiltering(bgr, sp=max(2, int(rng.integers(8, 13) * s)),
                                     sr=int(rng.integers(20, 32)))
    flat = cv2.edgePreservingFilter(flat, flags=cv2.RECURS_FILTER, sigma_s=min(40 * s, 200.0),
                                    sigma_r=0.3)
    pale = flat.astype(np.float32) * 0.8 + 255.0 * 0.2  # thin pigment on white paper
    grey = cv2.cvtColor(flat, cv2.COLOR_BGR2GRAY).astype(np.float32)
    grad = cv2.magnitude(cv2.Sobel(grey, cv2.CV_32F, 1, 0), cv2.Sobel(grey, cv2.CV_32F, 0, 1))
    pooled = np.clip(grad / 120.0, 0, 1)  # pigment pools at the borders of washes
    h, w = grey.shape
    grain = cv2.GaussianBlur(rng.normal(0, 1, (h, w)).astype(np.float32), (0, 0), 1.2)
    cell = max(int(24 * s), 4)
    blotch = cv2.resize(rng.normal(0, 1, (h // cell + 2, w // cell + 2)).astype(np.float32), (w, h),
                        interpolation=cv2.INTER_CUBIC)
    out = pale * (1 - 0.35 * pooled)[..., None] * (1 + 0.03 * grain + 0.04 * blotch)[..., None]
    return np.clip(out, 0, 255).astype(np.uint8)


def kuwahara(image: np.ndarray, radius: int) -> np.ndarray:
    """Classic Kuwahara: each pixel takes the mean of its least-varied quadrant."""
    import cv2

    img = image.astype(np.float32)
    grey = cv2.cvtColor(image, cv2.COLOR_BGR2GRAY).astype(np.float32)
    k = radius + 1
    mean = cv2.blur(img, (k, k), borderType=cv2.BORDER_REFLECT)
    mean_g = cv2.blur(grey, (k, k), borderType=cv2.BORDER_REFLECT)
    var = cv2.blur(grey * grey, (k, k), borderType=cv2.BORDER_REFLECT) - mean_g**2
    # The k x k box centred at c covers [c - k//2, c + (k-1)//2]; shift it into each quadrant.
    h, w = grey.shape
    lo, hi = -(k - 1) + k // 2, k // 2
    best_var = np.full((h, w), np.inf, np.float32)
    out = np.zeros_like(img)
    mean = np.pad(mean, ((k, k), (k, k), (0, 0)), mode="edge")
    var = np.pad(var, k, mode="edge")
    for dy in (lo, hi):
        for dx in (lo, hi):
            m = mean[k + dy:k + dy + h, k + dx:k + dx + w]
            v = var[k + dy:k + dy + h, k + dx:k + dx + w]
            better = v < best_var
            best_var = np.where(better, v, best_var)
            out[better] = m[better]
    return out


def oil(bgr: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    import cv2

    radius = max(1, int(round(rng.integers(3, 6) * scale(bgr))))
    out = kuwahara(bgr, radius)
    h, w = out.shape[:2]
    strokes = cv2.GaussianBlur(rng.normal(0, 1, (h, w)).astype(np.float32), (0, 0), 1.0)
    strokes = cv2.blur(strokes, (1, 2 * radius + 1))  # short vertical brush marks
    relief = cv2.Sobel(strokes, cv2.CV_32F, 1, 1)
    out = out * (1 + 0.25 * relief)[..., None]
    out = out * 1.08 - 0.04 * 255  # a touch more contrast, like varnished paint
    return np.clip(out, 0, 255).astype(np.uint8)


STYLISE = {"painting": painting, "sketch": sketch, "cartoon": cartoon,
           "watercolour": watercolour, "oil": oil}


class StyleEditor(AttributeEditor):
    """Restyle the whole image (painting, sketch, cartoon, watercolour, oil)."""

    name = "style"
    attribute = "style"
    kind = "appearance"
    level = "image"
    values = STYLES
    prompt_templates: ClassVar[dict[str, str]] = {
        "painting": "a painting of {subject}", "sketch": "a pencil sketch of {subject}",
        "cartoon": "a cartoon of {subject}", "watercolour": "a watercolour painting of {subject}",
        "oil": "an oil painting of {subject}",
    }
    aliases: ClassVar[dict[str, str]] = {"watercolor": "watercolour", "pencil": "sketch",
                                         "oil painting": "oil", "drawing": "sketch"}
    defaults: ClassVar[dict[str, Any]] = {
        "strength": 1.0,  # blend of the stylised image over the original (1 = fully stylised)
    }

    def classical(self, sample: Sample, value: str, rng: np.random.Generator) -> EditedSample:
        bgr = np.ascontiguousarray(sample.image[..., ::-1])
        styled = STYLISE[value](bgr, rng)[..., ::-1].astype(np.float32)
        s = float(self.params["strength"])
        out = s * styled + (1 - s) * sample.image.astype(np.float32)
        image = np.clip(np.round(out), 0, 255).astype(np.uint8)
        return EditedSample(image, sample.label, sample.mask, value)
