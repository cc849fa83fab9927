"""`segtk.attack_tensors`: adversarial images out for tensors in (torchattacks' `atk(images,
labels)`), the same attack, records and numbers as `segtk.attack` on the same images."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import torch

from segtk.api import sanity
from segtk.api.attacks import attack as attack_images
from segtk.api.data import dataset_from_tensors
from segtk.api.loading import model_of
from segtk.api.models import ModelKeywords
from segtk.api.results import AttackRun
from segtk.core import Segmenter

__all__ = ["attack_tensors"]


def attack_tensors(model: str | Segmenter | torch.nn.Module, images: torch.Tensor,
                   labels: torch.Tensor, attack: str = "dla", budget: int = 50, eps: float = 8.0,
                   seed: int = 0, params: Mapping[str, Any] | Iterable[str] | None = None,
                   device: str | None = None, *, names: Sequence[str] | None = None,
                   batch_size: int = 8, time_limit: float | None = None,
                   reference: str = "labels", classes: Sequence[str] | None = None,
                   mean: Sequence[float] | None = None, std: Sequence[float] | None = None,
                   size: tuple[int, int] | None = None,
                   warn: Callable[[str], None] = sanity.warn) -> tuple[torch.Tensor, AttackRun]:
    """Attack `images` (float [B,3,H,W] in [0,1], or uint8) with their `labels` (integer
    [B,H,W], 255 = ignore) and return `(adversarial, run)`: float32 [B,3,H,W] in [0,1] on the
    images' device, within `eps`/255 of the images as 8-bit levels (segtk scores 8-bit images,
    so float images are rounded to the nearest level first), and the `AttackRun` (per-image
    records, summary). Nothing is written. `names` name the images in the records (default
    00000, 00001, ...); each image's random stream derives from `seed` and its name, so the
    same images under the same names give `segtk.attack`'s numbers. The other arguments are
    `segtk.attack`'s (`model` may be a torch module with `classes`, `mean`, `std`, `size`)."""
    segmenter = model_of(model, device, ModelKeywords(classes, mean, std, size))
    dataset = dataset_from_tensors(images, labels, segmenter.classes, names)
    run = attack_images(segmenter, dataset, attack, budget, eps, seed, params=params,
                        batch_size=batch_size, time_limit=time_limit, reference=reference,
                        warn=warn)
    adversarial = torch.stack([torch.from_numpy(run.images[name]).permute(2, 0, 1)
                               for name in dataset.names])
    return adversarial.to(images.device, torch.float32) / 255.0, run
