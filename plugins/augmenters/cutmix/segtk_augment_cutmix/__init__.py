"""segtk augmenter `cutmix`: CutMix (Yun et al. 2019) for semantic segmentation.

Each image (with probability `p`) gets a box from another image of the batch (a random
derangement, so never itself) pasted in, and the box's labels come with it: the label stays
exact, no soft targets are needed. The box area is 1 − λ with λ ~ Beta(alpha, alpha) and its
aspect follows the image's, centred uniformly and clipped at the borders, as in the paper.

Hand-written on purpose (a dozen tensor lines): albumentations 2.0.8 has no CutMix and kornia's
RandomCutMixV2 mixes class labels, not label maps.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np
import torch

from segtk.core import Augmenter, PluginError, hookimpl, seeds


def cut_box(height: int, width: int, lam: float, rng: np.random.Generator) -> tuple[int, int, int, int]:
    """(y0, y1, x0, x1) of a box covering about 1 − lam of the image (clipped at the border)."""
    ratio = math.sqrt(1.0 - lam)
    ch, cw = int(height * ratio), int(width * ratio)
    cy, cx = int(rng.integers(height)), int(rng.integers(width))
    return (max(cy - ch // 2, 0), min(cy + ch // 2, height),
            max(cx - cw // 2, 0), min(cx + cw // 2, width))


class CutMix(Augmenter):
    """Paste a Beta(alpha, alpha)-sized box of another batch image, with its labels."""

    name = "cutmix"
    description = "box from another image of the batch, labels pasted with it"
    defaults: ClassVar[dict[str, Any]] = {"alpha": 1.0, "p": 0.5}

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        if self.params["alpha"] <= 0 or not 0 <= self.params["p"] <= 1:
            raise PluginError("cutmix: needs alpha > 0 and 0 <= p <= 1", hint="e.g. cutmix:alpha=1,p=0.5")

    def apply(self, images: torch.Tensor, labels: torch.Tensor,
              generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        b, h, w = labels.shape
        rng = np.random.default_rng(seeds(generator, 1)[0])
        out_images, out_labels = images.clone(), labels.clone()
        if b < 2:
            return out_images, out_labels  # nothing to mix with
        shift = 1 + rng.integers(b - 1)  # a rotation of the batch: partner != self
        for i in range(b):
            lam = float(rng.beta(self.params["alpha"], self.params["alpha"]))
            use = rng.random() < self.params["p"]
            y0, y1, x0, x1 = cut_box(h, w, lam, rng)
            if not use:
                continue
            j = (i + shift) % b
            out_images[i, :, y0:y1, x0:x1] = images[j, :, y0:y1, x0:x1]
            out_labels[i, y0:y1, x0:x1] = labels[j, y0:y1, x0:x1]
        return out_images, out_labels


@hookimpl
def register_augmenters(register) -> None:
    register(CutMix)
