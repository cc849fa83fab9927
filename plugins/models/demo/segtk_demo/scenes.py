"""Procedural street scenes with exact labels: the demo model's whole world.

A scene is a street in one-point perspective: sky above a horizon, a road converging to a
vanishing point, sidewalks on both sides, building facades whose roof lines converge to the same
point, trees, bushes, parked and driving cars (seen from behind), pedestrians and poles. Object
sizes follow the perspective, nearer objects occlude farther ones, and colours, lighting,
texture and noise vary, so the task is learnable but not trivial. Everything is drawn from one
`np.random.default_rng(seed)`, so a seed always gives the same image and label.

Seeds >= TRAIN_SEED_BASE are reserved for training; evaluation and the shipped images use seeds
below it, so the model never sees them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

CLASSES = ("sky", "road", "sidewalk", "building", "vegetation", "car", "person", "pole")
SKY, ROAD, SIDEWALK, BUILDING, VEGETATION, CAR, PERSON, POLE = range(len(CLASSES))
IGNORE_INDEX = 255
HEIGHT, WIDTH = 120, 160
TRAIN_SEED_BASE = 1 << 32  # training seeds are TRAIN_SEED_BASE + i; everything else stays below

PALETTE = np.array(
    [
        [110, 170, 230],  # sky: light blue
        [90, 90, 90],  # road: grey
        [200, 180, 150],  # sidewalk: sand
        [160, 70, 50],  # building: brick
        [60, 160, 50],  # vegetation: green
        [30, 60, 220],  # car: blue
        [230, 30, 70],  # person: red
        [250, 200, 20],  # pole: yellow
    ],
    dtype=np.uint8,
)

Colour = np.ndarray  # float32 [3] or [H,W,3], 0..255


def smooth_noise(rng: np.random.Generator, h: int, w: int, cell: float) -> np.ndarray:
    """Value noise in [-1,1], [h,w]: a coarse random grid, bilinearly upsampled (textures)."""
    cell = max(float(cell), 1.0)
    gh, gw = int(h / cell) + 2, int(w / cell) + 2
    grid = rng.uniform(-1.0, 1.0, (gh, gw)).astype(np.float32)
    ys, xs = np.arange(h) / cell, np.arange(w) / cell
    y0, x0 = ys.astype(int), xs.astype(int)
    fy, fx = (ys - y0)[:, None].astype(np.float32), (xs - x0)[None, :].astype(np.float32)
    top = grid[y0][:, x0] * (1 - fx) + grid[y0][:, x0 + 1] * fx
    bottom = grid[y0 + 1][:, x0] * (1 - fx) + grid[y0 + 1][:, x0 + 1] * fx
    return top * (1 - fy) + bottom * fy


class Canvas:
    """An image being painted (float, 0..255) and its label map, always painted together."""

    def __init__(self, h: int, w: int) -> None:
        self.h, self.w = h, w
        self.image = np.zeros((h, w, 3), np.float32)
        self.label = np.zeros((h, w), np.int64)
        yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
        self.yy, self.xx = yy + 0.5, xx + 0.5  # pixel centres

    def paint(self, mask: np.ndarray, colour: Colour, cls: int) -> None:
        colour = np.asarray(colour, np.float32)
        self.image[mask] = colour if colour.ndim == 1 else colour[mask]
        self.label[mask] = cls

    def shade(self, mask: np.ndarray, factor: float | np.ndarray) -> None:
        """Darken without relabelling (shadows)."""
        f = factor if np.ndim(factor) == 0 else np.asarray(factor)[mask][:, None]
        self.image[mask] *= f

    def rect(self, x0: float, x1: float, y0: float, y1: float) -> np.ndarray:
        return (self.xx >= x0) & (self.xx < x1) & (self.yy >= y0) & (self.yy < y1)

    def ellipse(self, cx: float, cy: float, rx: float | np.ndarray,
                ry: float | np.ndarray) -> np.ndarray:
        rx, ry = np.maximum(rx, 0.5), np.maximum(ry, 0.5)
        return ((self.xx - cx) / rx) ** 2 + ((self.yy - cy) / ry) ** 2 <= 1

    def trapezoid(self, y0: float, y1: float, top: tuple[float, float],
                  bottom: tuple[float, float]) -> np.ndarray:
        """Rows y0..y1 whose x span goes linearly from `top` (at y0) to `bottom` (at y1)."""
        t = np.clip((self.yy - y0) / max(y1 - y0, 1e-3), 0, 1)
        left = top[0] + (bottom[0] - top[0]) * t
        right = top[1] + (bottom[1] - top[1]) * t
        return (self.yy >= y0) & (self.yy < y1) & (self.xx >= left) & (self.xx < right)


@dataclass
class Street:
    """One-point perspective: where the road, sidewalks and ground are, and how big things are."""

    h: int
    w: int
    horizon: float
    vx: float  # vanishing point x
    bottom_x: float  # road centre at the image bottom
    half_top: float  # road half-width at the horizon
    half_bottom: float  # road half-width at the image bottom
    walk_left: float  # sidewalk width as a fraction of the road half-width
    walk_right: float

    def depth(self, y: np.ndarray | float) -> np.ndarray | float:
        """0 at the horizon, 1 at the bottom row: the perspective scale of the ground at y."""
        return (np.asarray(y) - self.horizon) / (self.h - self.horizon)

    def centre(self, y: np.ndarray | float) -> np.ndarray | float:
        return self.vx + (self.bottom_x - self.vx) * self.depth(y)

    def half(self, y: np.ndarray | float) -> np.ndarray | float:
        return self.half_top + (self.half_bottom - self.half_top) * self.depth(y)

    def ground_x(self, y: float, side: int, frac: float) -> float:
        """x at ground row y: frac 0 = road edge on `side` (-1 left, +1 right), 1 = walk edge."""
        walk = self.walk_left if side < 0 else self.walk_right
        return float(self.centre(y) + side * self.half(y) * (1 + frac * walk))

    def size(self, y: float) -> float:
        """Road width at ground row y: the yardstick for object sizes (a car is ~0.27 of it)."""
        return float(2 * self.half(y))


def sample_street(rng: np.random.Generator, h: int, w: int) -> Street:
    horizon = rng.uniform(0.36, 0.52) * h
    vx = rng.uniform(0.3, 0.7) * w
    return Street(
        h=h, w=w, horizon=horizon, vx=vx,
        bottom_x=vx + rng.uniform(-0.25, 0.25) * w,
        half_top=rng.uniform(0.005, 0.02) * w,
        half_bottom=rng.uniform(0.3, 0.6) * w,
        walk_left=rng.uniform(0.25, 0.5),
        walk_right=rng.uniform(0.25, 0.5),
    )


def _pick(rng: np.random.Generator, colours: Sequence[tuple[float, float, float]],
          jitter: float = 12.0) -> np.ndarray:
    base = np.asarray(colours[int(rng.integers(len(colours)))], np.float32)
    return np.clip(base + rng.uniform(-jitter, jitter, 3), 0, 255).astype(np.float32)


def textured(rng: np.random.Generator, cv: Canvas, base: np.ndarray, amount: float,
             cell: float) -> np.ndarray:
    """A full-frame colour field: `base` modulated by grey value noise of size `cell`."""
    n = smooth_noise(rng, cv.h, cv.w, cell)[..., None]
    return base[None, None, :] * (1 + amount * n)


FACADES = [(150, 70, 50), (185, 110, 80), (215, 200, 170), (235, 225, 200), (140, 140, 140),
           (110, 115, 125), (200, 170, 120), (170, 185, 200), (95, 80, 75), (220, 190, 190)]
CAR_PAINT = [(200, 30, 30), (30, 60, 170), (235, 235, 235), (25, 25, 28), (150, 155, 160),
             (230, 200, 40), (40, 120, 60), (110, 20, 30), (90, 90, 100), (210, 120, 30)]
SHIRTS = [(200, 40, 40), (40, 70, 160), (240, 240, 235), (30, 30, 30), (90, 140, 60),
          (230, 170, 40), (150, 60, 140), (120, 120, 120), (40, 150, 170), (190, 120, 90)]
PANTS = [(40, 45, 70), (30, 30, 30), (70, 90, 130), (100, 85, 65), (150, 150, 145)]
SKIN = [(240, 200, 170), (200, 150, 110), (150, 100, 70), (95, 65, 45)]
GREENS = [(60, 120, 40), (40, 95, 35), (90, 140, 50), (70, 110, 60), (110, 130, 45)]


def paint_sky(rng: np.random.Generator, cv: Canvas, st: Street) -> None:
    if rng.random() < 0.25:  # overcast
        top = rng.uniform((150, 155, 165), (195, 200, 210))
        bottom = top + rng.uniform(10, 30)
    else:
        top = rng.uniform((40, 90, 160), (100, 150, 230))
        bottom = top + rng.uniform((40, 40, 10), (100, 90, 25))
    t = np.clip(cv.yy / max(st.horizon, 1.0), 0, 1)[..., None]
    colour = top * (1 - t) + np.minimum(bottom, 250) * t
    if rng.random() < 0.6:
        cloud = np.clip((smooth_noise(rng, cv.h, cv.w, rng.uniform(10, 30)) - 0.2) * 2, 0, 1)
        colour = colour * (1 - cloud[..., None]) + rng.uniform(215, 250) * cloud[..., None]
    cv.paint(np.ones((cv.h, cv.w), bool), colour, SKY)


def paint_background(rng: np.random.Generator, cv: Canvas, st: Street) -> None:
    """Grass below the horizon; sometimes a distant tree line or far buildings on it."""
    grass = textured(rng, cv, _pick(rng, GREENS, 15), 0.15, 3)
    cv.paint(cv.yy >= st.horizon, grass, VEGETATION)
    if rng.random() < 0.5:
        height = rng.uniform(0.04, 0.12) * cv.h
        edge = st.horizon - height * (0.6 + 0.4 * smooth_noise(rng, 1, cv.w, 6)[0])
        trees = textured(rng, cv, _pick(rng, GREENS, 15) * 0.8, 0.25, 2)
        cv.paint((cv.yy >= edge[None, :]) & (cv.yy < st.horizon + 1), trees, VEGETATION)
    if rng.random() < 0.5:
        x = rng.uniform(0, 0.2) * cv.w
        tone = rng.uniform((120, 125, 135), (170, 175, 190))
        while x < cv.w:
            bw, top = rng.uniform(0.05, 0.15) * cv.w, st.horizon - rng.uniform(3, 0.15 * cv.h)
            if rng.random() < 0.7:
                shade = tone * rng.uniform(0.85, 1.1)
                cv.paint(cv.rect(x, x + bw, top, st.horizon + 1), shade, BUILDING)
            x += bw


def paint_buildings(rng: np.random.Generator, cv: Canvas, st: Street) -> None:
    """Facades on both sides, roof lines converging to the vanishing point, with windows."""
    for side in (-1, 1):
        edge = 0.0 if side < 0 else float(cv.w)
        span = abs(edge - st.vx)
        x = edge
        while abs(x - st.vx) > 0.05 * cv.w:
            bw = min(rng.uniform(0.1, 0.35) * cv.w, abs(x - st.vx) - 0.02 * cv.w)
            nx = x - side * bw
            x0, x1 = min(x, nx), max(x, nx)
            x = nx
            if rng.random() < 0.2:  # a gap: sky and grass show through
                continue
            roof_edge = rng.uniform(-0.3, 0.6) * st.horizon
            roof = st.horizon - (st.horizon - roof_edge) * np.abs(cv.xx - st.vx) / span
            mask = (cv.xx >= x0) & (cv.xx < x1) & (cv.yy >= roof)
            wall = textured(rng, cv, _pick(rng, FACADES, 15), 0.08, rng.uniform(2, 6))
            px, py = rng.uniform(5, 14), rng.uniform(6, 14)
            u = (cv.xx - x0) / px - rng.uniform(0, 1)
            v = (cv.yy - roof) / py
            fu, fv = u - np.floor(u), v - np.floor(v)
            ww, wh = rng.uniform(0.35, 0.7), rng.uniform(0.35, 0.65)
            windows = mask & (fu < ww) & (fv > 0.2) & (fv < 0.2 + wh) & (v > 0.6)
            glass = np.asarray(rng.uniform((30, 35, 45), (90, 110, 140)), np.float32)
            lit = rng.random() < 0.3
            cv.paint(mask, wall, BUILDING)
            shade = 1 + 0.3 * np.sin(np.floor(u) * 12.9898 + np.floor(v) * 78.233) ** 2
            colour = glass * shade[..., None]
            if lit:
                colour = np.where((np.sin(np.floor(u) * 4.1 + np.floor(v) * 7.3) > 0.6)[..., None],
                                  np.asarray((235, 210, 140), np.float32), colour)
            cv.paint(windows, colour, BUILDING)


def paint_street(rng: np.random.Generator, cv: Canvas, st: Street) -> None:
    """Sidewalks with tiles and a curb, then the road with lane markings and a crossing."""
    below = cv.yy >= st.horizon
    off = cv.xx - st.centre(cv.yy)
    half = st.half(cv.yy)
    road = below & (np.abs(off) <= half)
    walk = below & (off >= -half * (1 + st.walk_left)) & (off <= half * (1 + st.walk_right))
    depth = np.maximum(st.depth(cv.yy), 1e-3)
    z = 1.0 / (depth + 0.03)  # distance along the street, for perspective-correct patterns

    paving = _pick(rng, [(165, 165, 160), (190, 180, 160), (160, 110, 95), (130, 130, 135)], 15)
    tiles = textured(rng, cv, paving, 0.07, 2)
    joint = (z * rng.uniform(0.8, 1.6)) % 1 < 0.12
    tiles[joint] *= 0.8
    curb = np.abs(off) <= half * (1 + rng.uniform(0.04, 0.08))
    tiles[curb] = np.minimum(paving * 1.15 + 15, 255)
    cv.paint(walk, tiles, SIDEWALK)

    asphalt = textured(rng, cv, np.full(3, rng.uniform(55, 115), np.float32)
                       + rng.uniform(-5, 5, 3).astype(np.float32), 0.12, 1.5)
    asphalt *= 1 + 0.08 * smooth_noise(rng, cv.h, cv.w, 12)[..., None]
    paint = np.asarray((235, 235, 230) if rng.random() < 0.7 else (230, 190, 50), np.float32)
    line_w = np.maximum(0.6, 0.025 * half)
    lane = rng.uniform(-0.1, 0.1)
    dashes = (np.abs(off - lane * half) < line_w) & ((z * rng.uniform(0.5, 1.0)) % 1 < 0.5)
    asphalt[dashes] = paint
    if rng.random() < 0.5:
        asphalt[(np.abs(off) > half * 0.9) & (np.abs(off) < half * 0.9 + line_w)] = paint
    if rng.random() < 0.3:
        y = st.horizon + rng.uniform(0.35, 0.8) * (cv.h - st.horizon)
        thick = 0.2 * st.size(y) * rng.uniform(0.5, 1.0)
        stripes = ((off / np.maximum(half * 0.12, 0.5)) % 1 < 0.5) & (cv.yy >= y) & (
            cv.yy < y + thick)
        asphalt[stripes] = paint
    cv.paint(road, asphalt, ROAD)


Painter = Callable[[Canvas], None]


def make_car(rng: np.random.Generator, st: Street, yg: float, cx: float) -> Painter:
    w = st.size(yg) * rng.uniform(0.2, 0.3)
    h = w * rng.uniform(0.7, 0.95)
    body = _pick(rng, CAR_PAINT, 15)
    glass = rng.uniform((25, 30, 40), (70, 80, 100)).astype(np.float32)
    x0, x1, top = cx - w / 2, cx + w / 2, yg - h
    inset = rng.uniform(0.08, 0.16) * w

    def paint(cv: Canvas) -> None:
        cv.shade(cv.ellipse(cx, yg, 0.6 * w, 0.08 * h + 1) & (cv.label == ROAD), 0.6)
        tyre = np.full(3, 22, np.float32)
        cv.paint(cv.rect(x0 + 0.04 * w, x0 + 0.24 * w, yg - 0.2 * h, yg), tyre, CAR)
        cv.paint(cv.rect(x1 - 0.24 * w, x1 - 0.04 * w, yg - 0.2 * h, yg), tyre, CAR)
        lower = cv.rect(x0, x1, top + 0.42 * h, yg - 0.12 * h)
        cv.paint(lower, body, CAR)
        cabin = cv.trapezoid(top, top + 0.45 * h, (x0 + inset, x1 - inset), (x0 + 0.03 * w, x1 - 0.03 * w))
        cv.paint(cabin, body * 0.95, CAR)
        window = cv.trapezoid(top + 0.08 * h, top + 0.4 * h, (x0 + inset + 0.06 * w, x1 - inset - 0.06 * w),
                              (x0 + 0.1 * w, x1 - 0.1 * w))
        cv.paint(window, glass, CAR)
        red = np.asarray((200, 20, 20), np.float32)
        cv.paint(cv.rect(x0 + 0.02 * w, x0 + 0.16 * w, top + 0.48 * h, top + 0.6 * h), red, CAR)
        cv.paint(cv.rect(x1 - 0.16 * w, x1 - 0.02 * w, top + 0.48 * h, top + 0.6 * h), red, CAR)
        plate = np.asarray((225, 225, 215), np.float32)
        cv.paint(cv.rect(cx - 0.14 * w, cx + 0.14 * w, top + 0.64 * h, top + 0.76 * h), plate, CAR)

    return paint


def make_person(rng: np.random.Generator, st: Street, yg: float, cx: float) -> Painter:
    h = st.size(yg) * rng.uniform(0.22, 0.3)
    skin, shirt, pants = _pick(rng, SKIN, 8), _pick(rng, SHIRTS, 20), _pick(rng, PANTS, 12)
    hair = rng.uniform(20, 110) * np.asarray((1.0, 0.8, 0.6), np.float32)
    stride = rng.uniform(0.0, 0.08) * h
    bulk = rng.uniform(0.12, 0.17) * h

    def paint(cv: Canvas) -> None:
        cv.paint(cv.rect(cx - 0.11 * h - stride, cx - 0.01 * h - stride / 2, yg - 0.48 * h, yg),
                 pants, PERSON)
        cv.paint(cv.rect(cx + 0.01 * h + stride / 2, cx + 0.11 * h + stride, yg - 0.48 * h, yg),
                 pants * 0.9, PERSON)
        cv.paint(cv.rect(cx - bulk - 0.06 * h, cx + bulk + 0.06 * h, yg - 0.8 * h, yg - 0.52 * h),
                 skin, PERSON)  # arms, covered by the torso but for the hands
        cv.paint(cv.rect(cx - bulk - 0.06 * h, cx + bulk + 0.06 * h, yg - 0.8 * h, yg - 0.6 * h),
                 shirt * 0.9, PERSON)
        cv.paint(cv.rect(cx - bulk, cx + bulk, yg - 0.82 * h, yg - 0.44 * h), shirt, PERSON)
        cv.paint(cv.rect(cx - 0.04 * h, cx + 0.04 * h, yg - 0.86 * h, yg - 0.8 * h), skin, PERSON)
        cv.paint(cv.ellipse(cx, yg - 0.92 * h, 0.075 * h, 0.085 * h), skin, PERSON)
        cv.paint(cv.ellipse(cx, yg - 0.95 * h, 0.078 * h, 0.06 * h), hair, PERSON)

    return paint


def make_pole(rng: np.random.Generator, st: Street, yg: float, cx: float, side: int) -> Painter:
    size = st.size(yg)
    pw = max(1.6, size * rng.uniform(0.015, 0.03))
    top = yg - size * rng.uniform(0.7, 1.4)
    metal = _pick(rng, [(70, 70, 75), (40, 70, 50), (160, 165, 170), (110, 100, 90)], 12)
    lamp = rng.random() < 0.5
    sign = rng.random() < 0.45
    sign_colour = _pick(rng, [(200, 30, 30), (30, 80, 190), (240, 240, 240), (240, 200, 30)], 10)
    sign_y = top + rng.uniform(0.15, 0.45) * (yg - top)
    arm = -side * size * rng.uniform(0.15, 0.3)

    def paint(cv: Canvas) -> None:
        cv.paint(cv.rect(cx - pw / 2, cx + pw / 2, top, yg), metal, POLE)
        if lamp:
            ax0, ax1 = sorted((cx, cx + arm))
            cv.paint(cv.rect(ax0, ax1, top, top + pw * 0.8), metal, POLE)
            cv.paint(cv.ellipse(cx + arm, top + pw, abs(arm) * 0.25, pw * 0.9), metal * 1.3, POLE)
        if sign:
            r = pw * 2.2
            cv.paint(cv.ellipse(cx, sign_y, r, r), sign_colour, POLE)

    return paint


def make_tree(rng: np.random.Generator, st: Street, yg: float, cx: float) -> Painter:
    size = st.size(yg)
    tw, th = size * rng.uniform(0.025, 0.05), size * rng.uniform(0.3, 0.6)
    r = size * rng.uniform(0.15, 0.3)
    ry = r * rng.uniform(0.9, 1.4)
    leaf, bark = _pick(rng, GREENS, 15), _pick(rng, [(90, 65, 45), (70, 60, 50)], 10)
    seed = int(rng.integers(1 << 31))

    def paint(cv: Canvas) -> None:
        trng = np.random.default_rng(seed)
        cv.paint(cv.rect(cx - tw / 2, cx + tw / 2, yg - th - ry * 0.5, yg), bark, VEGETATION)
        wobble = 1 + 0.25 * smooth_noise(trng, cv.h, cv.w, max(r / 3, 1.5))
        crown = ((cv.xx - cx) / r) ** 2 + ((cv.yy - (yg - th - ry)) / ry) ** 2 <= wobble**2
        cv.paint(crown, textured(trng, cv, leaf, 0.3, 1.5), VEGETATION)

    return paint


def make_bush(rng: np.random.Generator, st: Street, yg: float, cx: float) -> Painter:
    size = st.size(yg)
    rx, ry = size * rng.uniform(0.1, 0.25), size * rng.uniform(0.05, 0.12)
    leaf = _pick(rng, GREENS, 15)
    seed = int(rng.integers(1 << 31))

    def paint(cv: Canvas) -> None:
        brng = np.random.default_rng(seed)
        mask = cv.ellipse(cx, yg, rx, ry * (1 + 0.3 * smooth_noise(brng, cv.h, cv.w, 3))) & (
            cv.yy <= yg)
        cv.paint(mask, textured(brng, cv, leaf, 0.3, 1.5), VEGETATION)

    return paint


def sample_objects(rng: np.random.Generator, st: Street) -> list[tuple[float, Painter]]:
    """Cars, people, poles, trees and bushes as (ground row, painter), in sampling order."""
    objects: list[tuple[float, Painter]] = []
    span = st.h - st.horizon

    def ground(lo: float = 0.15, hi: float = 1.1) -> float:
        return float(st.horizon + rng.uniform(lo, hi) * span)

    for _ in range(rng.integers(1, 5)):
        yg = ground(0.15, 1.15)
        cx = float(st.centre(yg) + rng.uniform(-0.75, 0.75) * st.half(yg))
        objects.append((yg, make_car(rng, st, yg, cx)))
    for _ in range(rng.integers(1, 5)):
        yg, side = ground(0.2, 1.05), int(rng.choice((-1, 1)))
        frac = rng.uniform(0.15, 0.9) if rng.random() < 0.85 else -rng.uniform(0.1, 0.9)
        objects.append((yg, make_person(rng, st, yg, st.ground_x(yg, side, frac))))
    for _ in range(rng.integers(1, 4)):
        yg, side = ground(0.1, 1.0), int(rng.choice((-1, 1)))
        frac = rng.uniform(0.1, 0.3) if rng.random() < 0.6 else rng.uniform(0.7, 0.95)
        objects.append((yg, make_pole(rng, st, yg, st.ground_x(yg, side, frac), side)))
    for _ in range(rng.integers(0, 4)):
        yg, side = ground(0.1, 0.9), int(rng.choice((-1, 1)))
        objects.append((yg, make_tree(rng, st, yg, st.ground_x(yg, side, rng.uniform(0.7, 1.3)))))
    for _ in range(rng.integers(0, 4)):
        yg, side = ground(0.1, 0.9), int(rng.choice((-1, 1)))
        objects.append((yg, make_bush(rng, st, yg, st.ground_x(yg, side, rng.uniform(1.0, 1.6)))))
    return objects


def light(rng: np.random.Generator, cv: Canvas, st: Street) -> np.ndarray:
    """Global exposure, colour cast, soft illumination, a cast shadow and sensor noise."""
    image = cv.image
    if rng.random() < 0.4:  # a building's shadow across the street
        slope = rng.uniform(-1.5, 1.5)
        x_at = rng.uniform(0.1, 0.9) * cv.w + slope * (cv.yy - st.horizon)
        side = rng.choice((-1.0, 1.0))
        mask = (side * (cv.xx - x_at) > 0) & (cv.yy > st.horizon - rng.uniform(0, 0.3) * cv.h)
        mask &= cv.label != SKY
        image = np.where(mask[..., None], image * rng.uniform(0.55, 0.8), image)
    gain = rng.uniform(0.7, 1.2) * rng.uniform(0.92, 1.08, 3).astype(np.float32)
    field = 1 + 0.12 * smooth_noise(rng, cv.h, cv.w, 40)[..., None]
    noise = rng.normal(0, rng.uniform(2, 7), image.shape).astype(np.float32)
    return np.clip(image * gain * field + noise, 0, 255).round().astype(np.uint8)


def make_scene(seed: int, height: int = HEIGHT, width: int = WIDTH) -> tuple[np.ndarray, np.ndarray]:
    """The scene for `seed`: uint8 RGB [H,W,3] and int64 labels [H,W] (every pixel labelled)."""
    rng = np.random.default_rng(seed)
    cv = Canvas(height, width)
    st = sample_street(rng, height, width)
    paint_sky(rng, cv, st)
    paint_background(rng, cv, st)
    paint_buildings(rng, cv, st)
    paint_street(rng, cv, st)
    objects = sample_objects(rng, st)
    for _, paint in sorted(objects, key=lambda o: o[0]):  # far to near: near ones occlude
        paint(cv)
    return light(rng, cv, st), cv.label


def colourise(label: np.ndarray) -> np.ndarray:
    """Label ids -> RGB with PALETTE (ignore pixels black), for looking at scenes."""
    out = np.zeros((*label.shape, 3), np.uint8)
    known = label < len(PALETTE)
    out[known] = PALETTE[label[known]]
    return out
