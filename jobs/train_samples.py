"""Training samples for `segtk train`: each dataset item resized once (--size), then per step
the standard pipeline before the augmenter: [a random rescale, --scale], the random crop
(--crop; padded with the ignore label where a rescaled image is smaller), [a horizontal flip,
--flip]. Labels are resized nearest, so they stay under their pixels. Every draw comes from the
step's generator, so a batch is a function of (seed, epoch, step).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import torch
import torch.nn.functional as F

from segtk.core import DataError, Dataset, SegtkError

if TYPE_CHECKING:
    from segtk.jobs.train import TrainConfig


def parse_size(text: str | None, option: str) -> tuple[int, int] | None:
    """'240x180' -> (240, 180); None stays None; anything else is a one-line error."""
    if text is None or text == "":
        return None
    w, sep, h = text.lower().partition("x")
    if not sep or not w.isdigit() or not h.isdigit() or int(w) < 8 or int(h) < 8:
        raise SegtkError(f"{option} {text!r} is not WIDTHxHEIGHT (both >= 8)",
                         hint=f"e.g. {option} 240x180")
    return int(w), int(h)



def resize_pair(image: np.ndarray, label: np.ndarray, size: tuple[int, int] | None,
                label_mode: str = "nearest") -> tuple[torch.Tensor, torch.Tensor]:
    """uint8 [H,W,3] + int64 [H,W] -> uint8 [3,h,w] + int64 [h,w] at `size` (W,H): bilinear
    (antialiased) for the image, `label_mode` for the label. torch's "nearest" takes the pixel
    half a pixel up-left of the bilinear sample at ratios that are not integers or halves;
    --size keeps it (runs made with it repeat), --scale takes "nearest-exact"."""
    x = torch.from_numpy(np.ascontiguousarray(image)).permute(2, 0, 1)
    y = torch.from_numpy(np.asarray(label, dtype=np.int64))
    if size is None or (x.shape[2], x.shape[1]) == tuple(size):
        return x.contiguous(), y
    w, h = size
    xf = F.interpolate(x[None].float(), size=(h, w), mode="bilinear", align_corners=False,
                       antialias=True)[0]
    yl = F.interpolate(y[None, None].double(), size=(h, w), mode=label_mode)[0, 0].long()
    return xf.round().clamp(0, 255).to(torch.uint8), yl


def random_crop(image: torch.Tensor, label: torch.Tensor, crop: tuple[int, int] | None,
                generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """The same random (W,H) window of image [3,H,W] and label [H,W]."""
    if crop is None:
        return image, label
    w, h = crop
    height, width = label.shape
    if w > width or h > height:
        raise DataError(f"--crop {w}x{h} is larger than a training image ({width}x{height})",
                        hint="choose a smaller --crop, or a larger --size")
    y0 = int(torch.randint(height - h + 1, (1,), generator=generator))
    x0 = int(torch.randint(width - w + 1, (1,), generator=generator))
    return image[:, y0:y0 + h, x0:x0 + w], label[y0:y0 + h, x0:x0 + w]


def parse_scale(text: str | None) -> tuple[float, float] | None:
    """'0.5,2.0' -> (0.5, 2.0); None or '' stays None; anything else is a one-line error."""
    if text is None or text == "":
        return None
    parts = text.split(",")
    try:
        lo, hi = (float(p) for p in parts)
    except ValueError:
        lo = hi = float("nan")
    if not 0 < lo <= hi <= 16:  # NaN fails too
        raise SegtkError(f"--scale {text!r} is not LO,HI with 0 < LO <= HI <= 16",
                         hint="e.g. --scale 0.5,2.0 (MMSegmentation's ratio range)")
    return lo, hi


def random_scale(image: torch.Tensor, label: torch.Tensor, scale: tuple[float, float] | None,
                 generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Image [3,H,W] uint8 and label [H,W] rescaled by one ratio drawn from `scale`: bilinear
    for the image, nearest (pixel centres aligned) for the label, so every label still sits
    under its pixels."""
    if scale is None:
        return image, label
    lo, hi = scale
    ratio = lo + (hi - lo) * float(torch.rand(1, generator=generator))
    height, width = label.shape
    size = (max(1, round(width * ratio)), max(1, round(height * ratio)))
    return resize_pair(image.permute(1, 2, 0).numpy(), label.numpy(), size, "nearest-exact")


def crop_or_pad(image: torch.Tensor, label: torch.Tensor, crop: tuple[int, int],
                ignore_index: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """A random (W,H) window as MMSegmentation takes it after a rescale: a side shorter than
    the crop is taken whole and padded at the bottom/right (image 0, label `ignore_index`)."""
    height, width = label.shape
    w, h = min(crop[0], width), min(crop[1], height)
    image, label = random_crop(image, label, (w, h), generator)
    pad = (0, crop[0] - w, 0, crop[1] - h)
    if pad[1] or pad[3]:
        image = F.pad(image, pad, value=0)
        label = F.pad(label, pad, value=ignore_index)
    return image, label


def random_flip(image: torch.Tensor, label: torch.Tensor, flip: bool,
                generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Both mirrored left-right with probability 0.5 (when `flip`)."""
    if flip and float(torch.rand(1, generator=generator)) < 0.5:
        return image.flip(-1), label.flip(-1)
    return image, label


def pipeline(image: torch.Tensor, label: torch.Tensor, config: TrainConfig, ignore_index: int,
             generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """One training sample: [random rescale], random crop, [flip]. Without --scale and --flip
    the draws are the crop's alone, so runs made before those options train as they did."""
    if config.scale is None:
        image, label = random_crop(image, label, config.crop, generator)
    else:
        assert config.crop is not None  # checked in `train`
        image, label = random_scale(image, label, config.scale, generator)
        image, label = crop_or_pad(image, label, config.crop, ignore_index, generator)
    return random_flip(image, label, config.flip, generator)



def load_items(data: Dataset, size: tuple[int, int] | None,
               on_item: Callable[[int], None] | None = None) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Every training image and label, resized once, kept as uint8/int64 tensors."""
    items = []
    for i in range(len(data)):
        item = data[i]
        items.append(resize_pair(item.image, item.label, size))
        if on_item:
            on_item(i + 1)
    return items


def batch_of(items: list[tuple[torch.Tensor, torch.Tensor]], indices: list[int],
             config: TrainConfig, ignore_index: int,
             generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """The samples `indices` through the pipeline, stacked: images float [B,3,h,w] in [0,1],
    labels int64 [B,h,w]."""
    pairs = [pipeline(*items[k], config, ignore_index, generator) for k in indices]
    shapes = {tuple(label.shape) for _, label in pairs}
    if len(shapes) > 1:
        raise DataError(f"training images differ in size ({', '.join(f'{w}x{h}' for h, w in sorted(shapes))})",
                        hint="pass --size WxH (resize) or --crop WxH so batches have one size")
    images = torch.stack([image for image, _ in pairs]).float() / 255.0
    return images, torch.stack([label for _, label in pairs])



def make_prepare(config: TrainConfig, ignore_index: int):
    """How a dataset item becomes a training sample (resize, the pipeline): given to augmenters
    that bring in new samples, so those match the batch."""

    def prepare(image: np.ndarray, label: np.ndarray, generator: torch.Generator):
        x, y = pipeline(*resize_pair(image, label, config.size), config, ignore_index, generator)
        return x.float() / 255.0, y

    return prepare
