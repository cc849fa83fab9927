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

from segtk.core import EditedSample, Sample
from segtk.editkit import AttributeEditor, oklab_to_linear, oklab_to_rgb, rgb_to_oklab

COLOURS = ("red", "orange", "yellow", "green", "blue", "purple", "pink", "brown", "white",
           "black", "grey")

# sRGB reference colours (clearly that colour, not the most saturated display primaries).
REFERENCE = {
    "red": (200, 30, 35), "orange": (235, 120, 20), "yellow": (240, 205, 30),
    "green": (40, 150, 50), "blue": (30, 70, 190), "purple": (120, 45, 160),
    "pink": (235, 120, 170), "brown": (120, 75, 40), "white": (235, 235, 232),
    "black": (28, 28, 30), "grey": (128, 128, 128),
}  # fmt: skip
ACHROMATIC = ("white", "black", "grey")

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
    prompt_templates: ClassVar[dict[str, str]] = {"*": "a photo of {a_value} {cls}"}
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
