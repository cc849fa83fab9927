"""Small deterministic stand-ins: a segmenter, image batches, editing samples, a dataset.

Everything here is seeded and CPU-cheap, so suites built on it run in milliseconds and give
the same answer on every machine.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import torch

from segtk.core import Dataset, EditedSample, Item, Sample, Segmenter
from segtk.editkit import prepare_sample

# The toy scene's classes: what `toy_sample` and `toy_dataset` label their pixels with.
TOY_CLASSES = ["background", "road", "car", "person"]
TOY_OBJECT = "car"


class TinySegmenter(Segmenter):
    """A fixed random 3x3-conv classifier: cheap, deterministic and batch-invariant."""

    name = "tiny"

    def __init__(self, num_classes: int = 4, seed: int = 0) -> None:
        g = torch.Generator().manual_seed(seed)
        self.classes = [f"class{i}" for i in range(num_classes)]
        self.weight = torch.randn(num_classes, 3, 3, 3, generator=g)
        self.bias = torch.randn(num_classes, generator=g) * 0.1
        self.calls = 0

    def logits(self, images: torch.Tensor) -> torch.Tensor:
        centred = images - 0.5
        # One image at a time: identical results whatever the batch composition.
        return torch.cat(
            [torch.nn.functional.conv2d(x[None], self.weight, self.bias, padding=1) for x in centred]
        )

    def predict(self, images: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return self.logits(images).argmax(1)

    def differentiable_logits(self, images: torch.Tensor) -> torch.Tensor:
        return self.logits(images)  # plain convolutions: autograd follows them


class RecordingSegmenter(TinySegmenter):
    """A TinySegmenter that keeps what it was asked: each call's batch, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[torch.Tensor] = []

    def predict(self, images: torch.Tensor) -> torch.Tensor:
        self.batches.append(images.clone())
        return super().predict(images)

    @property
    def seen(self) -> list[torch.Tensor]:
        """Every queried image [3,H,W], in query order."""
        return [x for batch in self.batches for x in batch]

    @property
    def sizes(self) -> list[int]:
        return [len(batch) for batch in self.batches]


class GridSegmenter(Segmenter):
    """Class 1 ("one") on an image of whole 0–255 steps, class 0 on any other: its decision flips
    between a float candidate and the 8-bit image stored from it, so a test can tell which of
    the two a score was computed on."""

    name = "grid"
    classes = ["zero", "one"]

    def predict(self, images: torch.Tensor) -> torch.Tensor:
        steps = images * 255
        on_grid = (steps - steps.round()).abs().flatten(1).amax(1) < 1e-3
        return on_grid.long()[:, None, None].expand(-1, *images.shape[2:]).clone()


def smooth_images(n: int, height: int, width: int, seed: int = 0) -> torch.Tensor:
    """Float [n,3,H,W] in [0,1]: random colours at 1/4 resolution, bilinearly upsampled (so
    neighbouring pixels are alike, as in photos)."""
    g = torch.Generator().manual_seed(seed)
    low = torch.rand(n, 3, max(height // 4, 1), max(width // 4, 1), generator=g)
    images = torch.nn.functional.interpolate(low, size=(height, width), mode="bilinear")
    return images.clamp(0, 1)


def toy_batch(n: int = 2, height: int = 17, width: int = 23,
              seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Smooth random images and labels equal to the tiny model's clean prediction."""
    images = smooth_images(n, height, width, seed)
    labels = TinySegmenter().predict(images)
    return images, labels


def toy_scene(height: int = 48, width: int = 64, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A uint8 RGB image [H,W,3] and its int64 label [H,W] over TOY_CLASSES: background above,
    road below, a car (an ellipse, ~15% of the image, room around it) in the middle, a small
    person on the left, and the top-left corner unlabelled (255)."""
    rgb = smooth_images(1, height, width, seed)[0].permute(1, 2, 0).numpy()
    image = np.round(rgb * 255).astype(np.uint8)
    label = np.zeros((height, width), dtype=np.int64)
    label[height // 2:] = TOY_CLASSES.index("road")
    ys, xs = np.mgrid[:height, :width]
    cy, cx = height / 2, width / 2 + (seed % 3) - 1
    car = ((ys - cy) / (height / 4)) ** 2 + ((xs - cx) / (width / 5)) ** 2 <= 1
    label[car] = TOY_CLASSES.index(TOY_OBJECT)
    image[car] = (image[car] // 2 + np.array([110, 20, 20], dtype=np.uint8))  # a reddish car
    person = (xs >= width // 16) & (xs < width // 16 + max(width // 16, 1)) & \
             (ys >= height // 3) & (ys < 2 * height // 3)
    label[person] = TOY_CLASSES.index("person")
    label[: max(height // 16, 1), : max(width // 16, 1)] = 255
    return image, label


def toy_sample(height: int = 48, width: int = 64, seed: int = 0, level: str = "object") -> Sample:
    """A prepared editing Sample of `toy_scene`: the car as the object ("object" level), or
    the whole image ("image" level, as style/weather editors get it)."""
    image, label = toy_scene(height, width, seed)
    if level == "image":
        return Sample(f"toy{seed}", image, label, np.ones(label.shape, dtype=bool),
                      list(TOY_CLASSES), "", "a photo of a scene with road and car")
    mask = label == TOY_CLASSES.index(TOY_OBJECT)
    return Sample(f"toy{seed}", image, label, mask, list(TOY_CLASSES), TOY_OBJECT,
                  f"a photo of a {TOY_OBJECT}")


def toy_dataset(n: int = 3, height: int = 48, width: int = 64) -> Dataset:
    """`n` toy scenes (seeds 0..n-1) as a Dataset, for filters that `prepare` on sources."""

    def reader(seed: int) -> Item:
        image, label = toy_scene(height, width, seed)
        return Item(f"toy{seed}", image, label)

    pairs: list[tuple[str, Callable[[], Item]]] = [(f"toy{s}", partial(reader, s)) for s in range(n)]
    return Dataset("toy", list(TOY_CLASSES), pairs)


# The editor tests' street scene: sky, road, a tree and an elliptic red car (`car_sample`).
CAR_CLASSES = ["sky", "road", "car", "tree"]
SKY, ROAD, CAR, TREE = range(4)


def car_scene(h: int = 48, w: int = 64, car=(24, 30, 9, 13),
              red: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """A smooth image; sky, road, a tree and an elliptic car (cy, cx, ry, rx), tinted red
    unless `red=False`."""
    rng = np.random.default_rng(1)
    low = rng.integers(0, 256, (h // 8 + 1, w // 8 + 1, 3)).astype(np.float64)
    yy, xx = np.mgrid[0:h, 0:w]
    image = low[yy // 8, xx // 8] * 0.7 + rng.integers(0, 60, (h, w, 3))
    label = np.full((h, w), ROAD, np.int64)
    label[: h // 4] = SKY
    label[h // 4: h // 2, w - 8:] = TREE
    cy, cx, ry, rx = car
    car_px = ((yy - cy) / ry) ** 2 + ((xx - cx) / rx) ** 2 <= 1
    label[car_px] = CAR
    if red:
        image[car_px] = image[car_px] * 0.5 + np.array([200, 40, 40]) * 0.5
    label[0, :3] = 255
    return image.clip(0, 255).astype(np.uint8), label


def car_sample(level: str = "object", classes=CAR_CLASSES, **kw) -> Sample:
    """The car scene prepared for editing (`car=(cy, cx, ry, rx)` moves or resizes the car)."""
    image, label = car_scene(**kw)
    s = prepare_sample("toy", image, label, classes, level=level, min_area=0.01)
    assert isinstance(s, Sample), s
    return s


def shifted(a: np.ndarray, dx: int, dy: int) -> np.ndarray:
    """`a` moved by (dx, dy) pixels, zeros where nothing moved in (what a shift edit expects)."""
    out = np.zeros_like(a)
    h, w = a.shape[:2]
    out[max(dy, 0):h + min(dy, 0), max(dx, 0):w + min(dx, 0)] = \
        a[max(-dy, 0):h - max(dy, 0), max(-dx, 0):w - max(dx, 0)]
    return out


def check_geometry(s: Sample, out: EditedSample, fill: int, object_id: int = CAR) -> None:
    """A geometry edit of the car scene: the object's label moved with its mask, the uncovered
    area is `fill` (ignore or background) and marked for repainting, nothing else relabelled."""
    new, old = out.mask, s.mask
    assert new.any() and new.shape == old.shape
    assert (out.label[new] == object_id).all()
    uncovered = old & ~new
    assert (out.label[uncovered] == fill).all()
    rest = ~(old | new)
    assert np.array_equal(out.label[rest], s.label[rest])
    assert out.repaint is not None and np.array_equal(out.repaint, uncovered)


@dataclass
class FakeEntryPoint:
    """Stands in for an installed distribution's entry point (tests of plugin loading): `load()`
    returns `module`, `dist` carries the distribution's `name` and `version`."""

    name: str
    module: Any
    dist: Any

    def load(self) -> Any:
        return self.module
