"""Procedural material albedos (float32 [h,w,3] in 0..255) from one numpy Generator.

Every texture is drawn on a square canvas in "grain" coordinates (x along the grain, y across)
and rotated to the object's main axis, so wood grain and brushed-metal streaks follow the
object. `size` is the object's scale in pixels (√area): feature sizes are fractions of it, so a
texture looks the same on a small and a large object.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

Texture = Callable[[np.random.Generator, int, float], np.ndarray]


def noise(rng: np.random.Generator, h: int, w: int, cell_y: float, cell_x: float | None = None,
          octaves: int = 1, persistence: float = 0.5) -> np.ndarray:
    """Fractal value noise in about [-1, 1], [h, w]; cells may differ along y and x."""
    import cv2

    cell_x = cell_y if cell_x is None else cell_x
    out = np.zeros((h, w), np.float32)
    amp, total = 1.0, 0.0
    for o in range(octaves):
        cy, cx = max(cell_y / 2**o, 1.0), max(cell_x / 2**o, 1.0)
        gh, gw = int(h / cy) + 3, int(w / cx) + 3
        grid = rng.uniform(-1, 1, (gh, gw)).astype(np.float32)
        big = cv2.resize(grid, (max(int(round(gw * cx)), w), max(int(round(gh * cy)), h)),
                         interpolation=cv2.INTER_CUBIC)
        out += amp * big[:h, :w]
        total += amp
        amp *= persistence
    return out / total


def lerp(a, b, t: np.ndarray) -> np.ndarray:
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    return a + (b - a) * t[..., None]


def jitter(rng: np.random.Generator, colour, amount: float = 4.0) -> np.ndarray:
    """The colour a little brighter or darker, with a slight per-channel change."""
    c = np.asarray(colour, np.float32) * rng.uniform(0.92, 1.08)
    return np.clip(c + rng.normal(0, amount, 3), 0, 255)


def wood(rng: np.random.Generator, d: int, size: float) -> np.ndarray:
    light, dark = [((205, 160, 105), (125, 80, 40)), ((170, 115, 70), (90, 55, 30)),
                   ((225, 190, 140), (160, 115, 70))][rng.integers(3)]
    y = np.arange(d, dtype=np.float32)[:, None] * np.ones((1, d), np.float32)
    spacing = size / rng.uniform(18, 30)
    warp = noise(rng, d, d, size / 4, size / 1.2, octaves=3)
    rings = y / spacing + 3.0 * warp
    late = (0.5 + 0.5 * np.sin(2 * np.pi * rings)) ** 3  # darker latewood bands
    grain = noise(rng, d, d, 1.0, size / 4, octaves=2) * 0.5 + 0.5
    tone = noise(rng, d, d, size / 2, octaves=2) * 0.5 + 0.5
    t = np.clip(0.55 * late + 0.35 * grain + 0.15 * tone - 0.05, 0, 1)
    return lerp(jitter(rng, light), jitter(rng, dark), t)


def metal(rng: np.random.Generator, d: int, size: float) -> np.ndarray:
    base = jitter(rng, (172, 175, 182), 2)
    streaks = noise(rng, d, d, 0.8, size / 1.5) * 0.6 + noise(rng, d, d, 2.5, size, octaves=2) * 0.4
    tone = noise(rng, d, d, size / 2, octaves=2)
    return base * (0.9 + 0.1 * streaks + 0.05 * tone)[..., None]


def gold(rng: np.random.Generator, d: int, size: float) -> np.ndarray:
    base = jitter(rng, (222, 178, 60), 3)
    tone = noise(rng, d, d, size / 3, octaves=3)
    streaks = noise(rng, d, d, 1.0, size / 2)
    return base * (0.93 + 0.05 * tone + 0.04 * streaks)[..., None]


def stone(rng: np.random.Generator, d: int, size: float) -> np.ndarray:
    c1, c2 = [((120, 118, 112), (178, 172, 160)), ((150, 128, 100), (200, 178, 142)),
              ((95, 98, 102), (150, 152, 155))][rng.integers(3)]
    body = noise(rng, d, d, size / 8, octaves=6, persistence=0.65) * 0.9 + 0.5
    ridged = 1 - np.abs(noise(rng, d, d, size / 3, octaves=4))
    crack = np.clip((ridged - 0.975) / 0.025, 0, 1)
    speck = (rng.random((d, d)) > 0.9).astype(np.float32) * rng.uniform(-1, 1, (d, d))
    shift = rng.uniform(0.92, 1.08)
    albedo = lerp(np.asarray(c1) * shift, np.asarray(c2) * shift, np.clip(body, 0, 1))
    return albedo * (1 - 0.3 * crack + 0.15 * speck)[..., None]


def marble(rng: np.random.Generator, d: int, size: float) -> np.ndarray:
    base = jitter(rng, (236, 233, 226), 5)
    vein_colour = [(85, 85, 92), (70, 100, 82), (140, 110, 90)][rng.integers(3)]
    yy, xx = np.mgrid[0:d, 0:d].astype(np.float32)
    turb = noise(rng, d, d, size / 4, octaves=5, persistence=0.55)
    v = np.sin(2 * np.pi * (xx + 0.6 * yy) / (size / rng.uniform(1.5, 3.0)) + 6.0 * turb)
    veins = (1 - np.abs(v)) ** 8
    fine = (1 - np.abs(noise(rng, d, d, size / 6, octaves=4))) ** 40
    cloud = noise(rng, d, d, size / 3, octaves=3) * 0.5 + 0.5
    albedo = base * (0.94 + 0.06 * cloud)[..., None]
    return lerp(albedo, vein_colour, np.clip(0.6 * veins + 0.2 * fine, 0, 1))


def fabric(rng: np.random.Generator, d: int, size: float) -> np.ndarray:
    colour = jitter(rng, [(60, 80, 130), (160, 45, 50), (170, 155, 115), (70, 110, 75),
                          (110, 70, 120)][rng.integers(5)])
    period = max(3.0, size / rng.uniform(20, 35))
    yy, xx = np.mgrid[0:d, 0:d].astype(np.float32) / period
    over = ((np.floor(xx) + np.floor(yy)) % 2).astype(bool)
    thread = np.where(over, np.sin(np.pi * (yy % 1)), np.sin(np.pi * (xx % 1)))
    fibres = noise(rng, d, d, 0.7, 4.0) * 0.5 + 0.5
    tone = noise(rng, d, d, size / 3, octaves=2)
    return colour * (0.68 + 0.27 * thread + 0.08 * fibres + 0.05 * tone)[..., None]


TEXTURES: dict[str, Texture] = {
    "wood": wood, "metal": metal, "gold": gold, "stone": stone, "marble": marble, "fabric": fabric,
}
# How strongly the original shading shows (exponent on the relative luminance).
SHADING = {"wood": 0.8, "metal": 1.3, "gold": 1.3, "stone": 0.7, "marble": 0.7, "fabric": 0.8}
