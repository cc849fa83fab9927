"""Object colour: new hue and chroma in OKLab inside the mask, keeping the object's shading.

Each pixel keeps its own OKLab lightness L, shifted as a whole by `lightness` × (target L −
the object's median L) so a yellow car gets lighter and a black one darker while shadows and
highlights stay where they were. Its (a, b) chroma becomes the target's hue and chroma, then is
reduced, pixel by pixel, just enough to stay inside the sRGB gamut (no clipping hue shifts).
White, black and grey set the chroma to zero and move the lightness all the way.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from segtk.core.editing import AttributeEditor, EditedSample, Sample
from segtk.core.samples import COLOURS

# sRGB reference colours (clearly that colour, not the most saturated display primaries).
REFERENCE = {
    "red": (200, 30, 35), "orange": (235, 120, 20), "yellow": (240, 205, 30),
    "green": (40, 150, 50), "blue": (30, 70, 190), "purple": (120, 45, 160),
    "pink": (235, 120, 170), "brown": (120, 75, 40), "white": (235, 235, 232),
    "black": (28, 28, 30), "grey": (128, 128, 128),
}  # fmt: skip
ACHROMATIC = ("white", "black", "grey")

_M1 = np.array([[0.4122214708, 0.5363325363, 0.0514459929],
                [0.2119034982, 0.6806995451, 0.1073969566],
                [0.0883024619, 0.2817188376, 0.6299787005]])
_M2 = np.array([[0.2104542553, 0.7936177850, -0.0040720468],
                [1.9779984951, -2.4285922050, 0.4505937099],
                [0.0259040371, 0.7827717662, -0.8086757660]])
_M1_INV, _M2_INV = np.linalg.inv(_M1), np.linalg.inv(_M2)


def srgb_to_linear(c: np.ndarray) -> np.ndarray:
    return np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)


def linear_to_srgb(c: np.ndarray) -> np.ndarray:
    c = np.clip(c, 0.0, 1.0)
    return np.where(c <= 0.0031308, c * 12.92, 1.055 * np.power(c, 1 / 2.4) - 0.055)


def rgb_to_oklab(rgb: np.ndarray) -> np.ndarray:
    """uint8 or [0,1] float sRGB [...,3] -> OKLab [...,3] (L in [0,1])."""
    x = rgb.astype(np.float64) / (255.0 if rgb.dtype == np.uint8 else 1.0)
    lms = srgb_to_linear(x) @ _M1.T
    return np.cbrt(lms) @ _M2.T


def oklab_to_linear(lab: np.ndarray) -> np.ndarray:
    return (lab @ _M2_INV.T) ** 3 @ _M1_INV.T


def oklab_to_rgb(lab: np.ndarray) -> np.ndarray:
    """OKLab -> uint8 sRGB (out-of-gamut values clipped)."""
    return np.clip(np.round(linear_to_srgb(oklab_to_linear(lab)) * 255.0), 0, 255).astype(np.uint8)


def fit_chroma(lightness: np.ndarray, ab: np.ndarray, steps: int = 12) -> np.ndarray:
    """Scale each (a, b) by the largest factor in [0, 1] that keeps the colour in sRGB gamut."""
    lo, hi = np.zeros(len(lightness)), np.ones(len(lightness))
    eps = 1e-4
    for _ in range(steps):
        mid = (lo + hi) / 2
        lab = np.concatenate([lightness[:, None], ab * mid[:, None]], axis=1)
        lin = oklab_to_linear(lab)
        ok = ((lin >= -eps) & (lin <= 1 + eps)).all(axis=1)
        lo, hi = np.where(ok, mid, lo), np.where(ok, hi, mid)
    inside = oklab_to_linear(np.concatenate([lightness[:, None], ab], axis=1))
    full = ((inside >= -eps) & (inside <= 1 + eps)).all(axis=1)
    return ab * np.where(full, 1.0, lo)[:, None]


class ColorEditor(AttributeEditor):
    """Recolour the salient object (OKLab chroma swap keeping lightness/shading)."""

    name = "color"
    attribute = "color"
    kind = "appearance"
    level = "object"
    values = COLOURS
    aliases: ClassVar[dict[str, str]] = {"gray": "grey", "violet": "purple"}
    requires: ClassVar[tuple[str, ...]] = ()  # numpy only
    install: ClassVar[str] = ""
    defaults: ClassVar[dict[str, Any]] = {
        "strength": 1.0,  # 1 = the target chroma; 0.5 = half-way from the original's
        "lightness": 0.5,  # share of the move of the median lightness towards the target's
        "contrast": 1.0,  # scale of the lightness variations around the median (shading)
        "hue_jitter": 6.0,  # degrees of random hue change per sample (rng)
    }

    def classical(self, sample: Sample, value: str, rng: np.random.Generator) -> EditedSample:
        p = self.params
        mask = sample.mask
        lab = rgb_to_oklab(sample.image[mask])
        target = rgb_to_oklab(np.array(REFERENCE[value], dtype=np.uint8))
        jitter = float(rng.normal(0.0, p["hue_jitter"])) if p["hue_jitter"] > 0 else 0.0
        chroma_scale = float(rng.uniform(0.9, 1.1))
        light, med = lab[:, 0], float(np.median(lab[:, 0]))
        achromatic = value in ACHROMATIC
        shift = ({"white": 0.8, "black": 0.9, "grey": 1.0}.get(value, p["lightness"])
                 * (target[0] - med))
        contrast = p["contrast"] * (0.6 if value == "black" else 1.0)
        new_l = np.clip(med + shift + contrast * (light - med), 0.02, 0.99)
        if achromatic:
            ab = np.zeros((len(light), 2))
        else:
            angle = np.arctan2(target[2], target[1]) + np.deg2rad(jitter)
            chroma = np.hypot(target[1], target[2]) * chroma_scale
            ab = np.tile([chroma * np.cos(angle), chroma * np.sin(angle)], (len(light), 1))
        ab = (1 - p["strength"]) * lab[:, 1:] + p["strength"] * ab
        ab = fit_chroma(new_l, ab)
        image = sample.image.copy()
        image[mask] = oklab_to_rgb(np.concatenate([new_l[:, None], ab], axis=1))
        meta = {"hue_jitter_deg": round(jitter, 3), "chroma_scale": round(chroma_scale, 4),
                "lightness_shift": round(float(shift), 4)}
        return EditedSample(image, sample.label, mask, value, metadata=meta)
