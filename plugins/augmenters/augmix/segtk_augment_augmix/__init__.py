"""segtk augmenter `augmix`: AugMix (Hendrycks et al. 2020) for semantic segmentation.

Per image: `width` chains of 1–3 ops (or exactly `depth`), each op drawn from the op set and
applied by albumentations; the chains are mixed with Dirichlet(alpha) weights, and the mix is
blended with the original image with a Beta(alpha, alpha) weight. Only AugMix's photometric
ops are used (autocontrast, equalize, posterize, solarize, brightness, contrast, colour
saturation, sharpness): its geometric ops (rotate, shear, translate) would move each chain's
pixels differently, and no single label map fits a convex mix of differently moved images.
So the label is returned unchanged. `severity` (1–10, default 3 as in the paper) scales every op.
`jsd` > 0 trains with the paper's Jensen–Shannon consistency loss at that weight (the paper's
12): the trainer takes two AugMix views of each clean batch and adds `jsd` times the JSD of the
three predictions to the clean batch's cross-entropy (`segtk.jobs.train.step_loss`); 0, the
default, trains on the augmented batch with cross-entropy alone.
"""

from __future__ import annotations

import os
from typing import Any, ClassVar

import numpy as np
import torch

from segtk.core import Augmenter, PluginError, hookimpl, seeds

os.environ.setdefault("NO_ALBUMENTATIONS_UPDATE", "1")  # no network check at import

OPS = ("autocontrast", "equalize", "posterize", "solarize", "brightness", "contrast", "color",
       "sharpness")


def make_ops(severity: int) -> list[Any]:
    """The albumentations transforms (p=1) for each name in OPS, scaled by severity."""
    import albumentations as A

    m = severity / 10.0
    return [
        A.AutoContrast(p=1.0),
        A.Equalize(p=1.0),
        A.Posterize(num_bits=(max(1, 4 - int(4 * m)), 4), p=1.0),
        A.Solarize(threshold_range=(1.0 - m, 1.0), p=1.0),
        A.RandomBrightnessContrast(brightness_limit=(-m, m), contrast_limit=(0.0, 0.0), p=1.0),
        A.RandomBrightnessContrast(brightness_limit=(0.0, 0.0), contrast_limit=(-m, m), p=1.0),
        A.ColorJitter(brightness=0.0, contrast=0.0, saturation=(max(0.0, 1 - m), 1 + m),
                      hue=0.0, p=1.0),
        A.Sharpen(alpha=(0.0, m), lightness=(1.0, 1.0), p=1.0),
    ]


class AugMix(Augmenter):
    """Mix `width` chains of photometric ops with the original image; labels unchanged."""

    name = "augmix"
    description = "AugMix with photometric ops only (albumentations); label unchanged"
    requires: ClassVar[tuple[str, ...]] = ("albumentations",)
    install: ClassVar[str] = "pip install -e plugins/augmenters/augmix"
    defaults: ClassVar[dict[str, Any]] = {"severity": 3, "width": 3, "depth": -1, "alpha": 1.0,
                                          "p": 1.0, "jsd": 0.0}

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        p = self.params
        if not 1 <= p["severity"] <= 10 or p["width"] < 1 or p["depth"] == 0 or p["depth"] < -1 \
                or p["alpha"] <= 0 or not 0 <= p["p"] <= 1 or not 0 <= p["jsd"] < float("inf"):
            raise PluginError("augmix: needs severity 1-10, width >= 1, depth -1 (1-3 ops) or "
                              ">= 1, alpha > 0, 0 <= p <= 1, jsd >= 0 (finite)",
                              hint="e.g. augmix:severity=3,width=3 or augmix:jsd=12")
        self._ops = make_ops(int(p["severity"]))

    def consistency(self) -> float:
        return float(self.params["jsd"])

    def mix(self, image: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """AugMix of one uint8 HWC image -> float32 HWC in [0, 255]."""
        import albumentations as A

        p = self.params
        weights = rng.dirichlet([p["alpha"]] * int(p["width"]))
        m = float(rng.beta(p["alpha"], p["alpha"]))
        mixed = np.zeros(image.shape, np.float32)
        for w in weights:
            depth = int(p["depth"]) if p["depth"] > 0 else int(rng.integers(1, 4))
            chain = [self._ops[int(k)] for k in rng.integers(len(self._ops), size=depth)]
            compose = A.Compose(chain, seed=int(rng.integers(2**31 - 1)))
            mixed += float(w) * compose(image=image)["image"].astype(np.float32)
        return (1 - m) * image.astype(np.float32) + m * mixed

    def apply(self, images: torch.Tensor, labels: torch.Tensor,
              generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        out = images.clone()
        for i, seed in enumerate(seeds(generator, images.shape[0])):
            rng = np.random.default_rng(seed)
            if rng.random() >= self.params["p"]:
                continue
            image = (images[i].permute(1, 2, 0).cpu().numpy() * 255).round().clip(0, 255)
            mixed = self.mix(image.astype(np.uint8), rng)
            out[i] = torch.from_numpy(mixed / 255.0).permute(2, 0, 1).to(out.dtype)
        return out, labels.clone()


@hookimpl
def register_augmenters(register) -> None:
    register(AugMix)
