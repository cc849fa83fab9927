"""Object material: a procedural texture, oriented along the object and lit by its shading.

For every material but glass the object's pixels become albedo × shading, where the albedo is a
procedural texture (textures.py) rotated to the object's main axis and the shading is the
object's own relative luminance (Y / its 90th percentile, to a material-specific power), so the
light, shadows and panel lines of the original stay. Metals also keep a specular term from the
original highlights. Glass is different: what is behind the object is guessed by inpainting it
away, refracted by the object's shading gradient, tinted, with a Fresnel-like bright rim and
the original highlights on top.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from segtk.core import EditedSample, Sample
from segtk.editkit import AttributeEditor, bbox
from segtk_editor_material.textures import SHADING, TEXTURES

MATERIALS = ("wood", "metal", "stone", "marble", "glass", "fabric", "gold")


def luminance(image: np.ndarray) -> np.ndarray:
    """Luma in [0, 1] (gamma-encoded, roughly perceptual)."""
    return (image.astype(np.float32) @ np.array([0.299, 0.587, 0.114], np.float32)) / 255.0


def main_axis(mask: np.ndarray) -> float:
    """The angle (radians, image coordinates, y down) of the mask's longest axis."""
    ys, xs = np.nonzero(mask)
    if len(xs) < 2:
        return 0.0
    cov = np.cov(np.stack([xs, ys]).astype(np.float64))
    return 0.5 * float(np.arctan2(2 * cov[0, 1], cov[0, 0] - cov[1, 1]))


def oriented(texture: np.ndarray, angle: float, h: int, w: int) -> np.ndarray:
    """Rotate a square [d,d,3] texture so its x axis points along `angle`; crop h x w."""
    import cv2

    d = texture.shape[0]
    rot = cv2.getRotationMatrix2D((d / 2, d / 2), -np.degrees(angle), 1.0)
    turned = cv2.warpAffine(texture, rot, (d, d), flags=cv2.INTER_LINEAR,
                            borderMode=cv2.BORDER_REFLECT)
    top, left = (d - h) // 2, (d - w) // 2
    return turned[top:top + h, left:left + w]


class MaterialEditor(AttributeEditor):
    """Give the salient object another material (procedural texture × original shading)."""

    name = "material"
    attribute = "material"
    kind = "appearance"
    level = "object"
    values = MATERIALS
    prompt_templates: ClassVar[dict[str, str]] = {"*": "a photo of {a_cls} made of {value}"}
    aliases: ClassVar[dict[str, str]] = {"steel": "metal", "cloth": "fabric", "rock": "stone"}
    defaults: ClassVar[dict[str, Any]] = {
        "shading": 1.0,  # multiplies the material's shading exponent (0 = flat texture)
        "angle_jitter": 12.0,  # degrees of random texture rotation around the main axis
        "scale": 1.0,  # texture feature size, relative to the object's size
    }

    def classical(self, sample: Sample, value: str, rng: np.random.Generator) -> EditedSample:
        mask = sample.mask
        x0, y0, x1, y1 = bbox(mask)
        h, w = y1 - y0, x1 - x0
        size = float(np.sqrt(mask.sum())) * float(self.params["scale"])
        angle = main_axis(mask) + np.deg2rad(float(rng.normal(0, self.params["angle_jitter"])))
        image = sample.image.copy()
        region = (slice(y0, y1), slice(x0, x1))
        if value == "glass":
            out = glass(sample.image, mask, size, rng)
        else:
            d = int(np.ceil(np.hypot(h, w))) + 2
            albedo = oriented(TEXTURES[value](rng, d, size).astype(np.float32), angle, h, w)
            out = image.astype(np.float32)
            out[region] = shade(albedo, sample.image[region], mask[region],
                                SHADING[value] * float(self.params["shading"]),
                                specular=value in ("metal", "gold"))
        image[mask] = np.clip(np.round(out[mask]), 0, 255).astype(np.uint8)
        meta = {"texture_angle_deg": round(float(np.degrees(angle)), 2),
                "texture_size_px": round(size, 2)}
        return EditedSample(image, sample.label, mask, value, metadata=meta)


def shade(albedo: np.ndarray, original: np.ndarray, mask: np.ndarray, gamma: float,
          specular: bool) -> np.ndarray:
    """albedo × (Y / Y_lit)^gamma, Y_lit = the object's 90th luminance percentile; what is
    brighter than Y_lit (and, for metals, the original's highlights) is added as highlight."""
    y = luminance(original)
    lit = max(float(np.percentile(y[mask], 90)), 1e-3)  # the object's well-lit level
    rel = np.clip(y / lit, 0.15, 1.0) ** gamma
    over = np.clip(y / lit - 1.0, 0.0, 1.0)  # brighter than that: keep as a soft highlight
    out = albedo * rel[..., None]
    out += (255.0 - out) * (0.5 * over)[..., None]
    if specular:
        hi = np.clip((y - 0.75) / 0.25, 0, 1) ** 2
        out = out * (1 - hi[..., None]) + 255.0 * hi[..., None]
    return np.clip(out, 0, 255)


def glass(image: np.ndarray, mask: np.ndarray, size: float, rng: np.random.Generator) -> np.ndarray:
    """A transparent object: inpainted background, refracted, tinted, rimmed, highlighted."""
    import cv2

    k = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (7, 7))
    hole = cv2.dilate(mask.astype(np.uint8), k)
    behind = cv2.inpaint(np.ascontiguousarray(image[..., ::-1]), hole * 255, 7,
                         cv2.INPAINT_TELEA)[..., ::-1].astype(np.float32)
    y = cv2.GaussianBlur(luminance(image), (0, 0), max(size / 40, 1.0))
    gy, gx = np.gradient(y)
    strength = size * rng.uniform(0.8, 1.4)
    hh, ww = mask.shape
    grid_y, grid_x = np.mgrid[0:hh, 0:ww].astype(np.float32)
    refracted = cv2.remap(behind, grid_x + strength * gx, grid_y + strength * gy,
                          cv2.INTER_LINEAR, borderMode=cv2.BORDER_REFLECT)
    tint = np.array([0.86, 0.95, 0.95], np.float32) * rng.uniform(0.95, 1.02)
    dist = cv2.distanceTransform(mask.astype(np.uint8), cv2.DIST_L2, 3)
    rim = np.exp(-dist / max(size / 25, 1.5))[..., None]
    edge_colour = np.array([205, 230, 225], np.float32)
    spec = np.clip((luminance(image) - 0.8) / 0.2, 0, 1)[..., None]
    out = refracted * tint * (1 - 0.45 * rim) + 0.45 * rim * edge_colour
    return out * (1 - spec) + 250.0 * spec
