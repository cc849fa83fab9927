"""Image weather: fog, rain, snow and night with numpy/OpenCV (the label is unchanged).

fog    the haze model I = J·t + A·(1 − t), t = exp(−β·d), with a depth proxy d that grows
       towards the top of the image (sky, if the dataset has a "sky" class, is farthest) plus
       low-frequency patchiness
rain   overcast grading (darker, flatter, bluer), slanted motion-blurred streaks and a little haze
snow   brighter, desaturated, light haze, and two layers of blurred flakes (near: big, few)
night  a dark gamma curve, blue shift and desaturation; large bright areas (and the "sky"
       class) become dark sky; small bright things (lamps, windows) glow; sensor noise
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from segtk.core import EditedSample, Sample
from segtk.editkit import AttributeEditor

WEATHERS = ("snow", "rain", "fog", "night")


def depth_proxy(sample: Sample, rng: np.random.Generator) -> np.ndarray:
    """0 (near, bottom) .. 1 (far, top/sky), with smooth patchiness."""
    import cv2

    h, w = sample.label.shape
    rows = np.linspace(1.0, 0.0, h, dtype=np.float32)[:, None] ** 1.5
    d = np.repeat(rows, w, axis=1)
    names = [c.lower() for c in sample.classes]
    if "sky" in names:
        d[sample.label == names.index("sky")] = 1.0
        d = cv2.GaussianBlur(d, (0, 0), max(h, w) / 60)
    cell = max(max(h, w) // 8, 4)
    patches = cv2.resize(rng.normal(0, 1, (h // cell + 2, w // cell + 2)).astype(np.float32),
                         (w, h), interpolation=cv2.INTER_CUBIC)
    return np.clip(d + 0.05 * patches, 0, 1)


def haze(image: np.ndarray, depth: np.ndarray, beta: float, airlight) -> np.ndarray:
    t = np.exp(-beta * (0.15 + depth))[..., None]
    return image * t + np.asarray(airlight, np.float32) * (1 - t)


def fog(sample: Sample, rng: np.random.Generator, density: float) -> np.ndarray:
    img = sample.image.astype(np.float32)
    air = np.array([205, 210, 215], np.float32) * rng.uniform(0.95, 1.05)
    beta = 2.2 * density * rng.uniform(0.85, 1.15)
    return haze(img, depth_proxy(sample, rng), beta, air)


def rain(sample: Sample, rng: np.random.Generator, density: float) -> np.ndarray:
    import cv2

    img = sample.image.astype(np.float32)
    h, w = img.shape[:2]
    grey = img.mean(axis=2, keepdims=True)
    img = (0.7 * img + 0.3 * grey) * 0.75 * np.array([0.95, 0.98, 1.05], np.float32)
    img = haze(img, depth_proxy(sample, rng), 0.6 * density, (150, 155, 165))
    layer = np.zeros((h, w), np.float32)
    angle = np.deg2rad(rng.uniform(-20, 20))
    count = int(density * h * w / 250)
    length = max(h, w) / 25
    xs, ys = rng.uniform(0, w, count), rng.uniform(0, h, count)
    lens = length * rng.uniform(0.5, 1.3, count)
    bright = rng.uniform(0.3, 1.0, count)
    for x, y, ln, b in zip(xs, ys, lens, bright):
        dx, dy = ln * np.sin(angle), ln * np.cos(angle)
        cv2.line(layer, (int(x), int(y)), (int(x + dx), int(y + dy)), float(b), 1, cv2.LINE_AA)
    streaks = cv2.GaussianBlur(layer, (3, 3), 0)
    return img * (1 - 0.25 * streaks[..., None]) + 235.0 * 0.55 * streaks[..., None]


def snow(sample: Sample, rng: np.random.Generator, density: float) -> np.ndarray:
    import cv2

    img = sample.image.astype(np.float32)
    h, w = img.shape[:2]
    grey = img.mean(axis=2, keepdims=True)
    img = (0.5 * img + 0.5 * grey) * 1.05 + 20.0
    img = haze(img, depth_proxy(sample, rng), 0.9 * density, (225, 230, 238))
    alpha = np.zeros((h, w), np.float32)
    scale = max(h, w) / 480
    for count, radius, blur in ((int(density * h * w / 90), 1, 0.6), (int(density * h * w / 900), 3, 1.5)):
        pts = np.stack([rng.uniform(0, w, count), rng.uniform(0, h, count)], 1).astype(int)
        r = max(int(round(radius * scale)), 1)
        flakes = np.zeros((h, w), np.float32)
        for (x, y), a in zip(pts, rng.uniform(0.5, 1.0, count)):
            cv2.circle(flakes, (int(x), int(y)), r, float(a), -1, cv2.LINE_AA)
        alpha = np.maximum(alpha, cv2.GaussianBlur(flakes, (0, 0), blur * scale))
    alpha = np.clip(alpha, 0, 1)[..., None]
    return img * (1 - alpha) + 250.0 * alpha


def night(sample: Sample, rng: np.random.Generator, density: float) -> np.ndarray:
    import cv2

    img = sample.image.astype(np.float32) / 255.0
    lum = img @ np.array([0.299, 0.587, 0.114], np.float32)
    grey = lum[..., None]
    img = 0.6 * img + 0.4 * grey
    dark = np.power(img, 1.0 + 0.6 * density) * (0.7 - 0.2 * density)
    dark *= np.array([0.75, 0.85, 1.15], np.float32)
    size = max(lum.shape)
    big = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (max(size // 15, 3),) * 2)
    # Large bright areas (daylight sky) go dark; small bright things (lamps, windows) glow.
    opened = cv2.morphologyEx(lum, cv2.MORPH_OPEN, big)
    sky = np.clip((opened - 0.5) / 0.4, 0, 1)
    names = [c.lower() for c in sample.classes]
    if "sky" in names:
        sky = np.maximum(sky, (sample.label == names.index("sky")).astype(np.float32))
    sky = cv2.GaussianBlur(sky, (0, 0), 3)
    dark = dark * (1 - 0.7 * sky[..., None]) + 0.7 * sky[..., None] * np.array(
        [0.02, 0.03, 0.08], np.float32)
    lights = np.clip((lum - opened - 0.3) / 0.3, 0, 1) * (1 - sky)
    glow = cv2.GaussianBlur(lights, (0, 0), size / 100)
    warm = np.array([1.0, 0.85, 0.55], np.float32)
    out = dark + (0.6 * lights + 0.5 * glow)[..., None] * warm
    out += rng.normal(0, 0.015, out.shape).astype(np.float32)
    return np.clip(out, 0, 1) * 255.0


WEATHER = {"fog": fog, "rain": rain, "snow": snow, "night": night}


class WeatherEditor(AttributeEditor):
    """Change the whole image's weather (fog, rain, snow, night)."""

    name = "weather"
    attribute = "weather"
    kind = "appearance"
    level = "image"
    values = WEATHERS
    prompt_templates: ClassVar[dict[str, str]] = {
        "snow": "{caption} in the snow", "rain": "{caption} in the rain",
        "fog": "{caption} in thick fog", "night": "{caption} at night",
    }
    aliases: ClassVar[dict[str, str]] = {"foggy": "fog", "haze": "fog", "rainy": "rain",
                                         "snowy": "snow", "dark": "night"}
    defaults: ClassVar[dict[str, Any]] = {
        "density": 1.0,  # fog/haze thickness, amount of rain and snow, darkness of night
    }

    def classical(self, sample: Sample, value: str, rng: np.random.Generator) -> EditedSample:
        out = WEATHER[value](sample, rng, float(self.params["density"]))
        image = np.clip(np.round(out), 0, 255).astype(np.uint8)
        return EditedSample(image, sample.label, sample.mask, value)
