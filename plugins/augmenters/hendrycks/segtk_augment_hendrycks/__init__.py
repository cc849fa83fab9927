"""segtk augmenter `hendrycks`: the common corruptions of Hendrycks & Dietterich (ICLR 2019),
the "Hendrycks et al." augmentation of Gen4Seg's Tables IV and V, for semantic segmentation.

Per image (probability `p`): one corruption drawn uniformly from `corruptions`, at `severity`
1-5 (0: a severity drawn per image), applied by albumentations with the severity table of the
ImageNet-C code where albumentations takes the same quantity (noise std and amount, photon
count, defocus radius, zoom factors, blur sigma, brightness shift, contrast factor, JPEG
quality, pixelation factor) and a monotone scale of albumentations' own knob where it does not
(motion-blur kernel, fog, snow). Only photometric corruptions are used, so the label is
returned unchanged: the geometric ones (elastic transform, glass blur's pixel shuffling) would
move pixels without their labels, and frost needs the frost photographs ImageNet-C ships.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np
import torch

from segtk.core import Augmenter, PluginError, hookimpl, seeds

os.environ.setdefault("NO_ALBUMENTATIONS_UPDATE", "1")  # no network check at import

SEVERITIES = 5


def _tables() -> dict[str, Callable[[int], Any]]:
    """Corruption name -> severity (1-5) -> an albumentations transform (p=1)."""
    import albumentations as A
    import cv2

    def at(values: tuple[Any, ...]) -> Callable[[int], Any]:
        return lambda s: values[s - 1]

    noise, photons = at((0.08, 0.12, 0.18, 0.26, 0.38)), at((60, 25, 12, 5, 3))
    amount = at((0.03, 0.06, 0.09, 0.17, 0.27))
    defocus = at(((3, 0.1), (4, 0.5), (6, 0.5), (8, 0.5), (10, 0.5)))
    motion = at((7, 11, 17, 25, 31))  # kernel ~ 2 sigma + 1 of ImageNet-C's sigmas 3..15
    zoom = at(((1.11, 0.01), (1.16, 0.01), (1.21, 0.02), (1.26, 0.02), (1.31, 0.03)))
    sigma = at((1.0, 2.0, 3.0, 4.0, 6.0))
    fog = at((0.2, 0.35, 0.5, 0.65, 0.8))
    snow = at((0.1, 0.2, 0.3, 0.4, 0.5))
    bright = at((0.1, 0.2, 0.3, 0.4, 0.5))
    contrast = at((0.4, 0.3, 0.2, 0.1, 0.05))
    quality = at((25, 18, 15, 10, 7))
    pixelate = at((0.6, 0.5, 0.4, 0.3, 0.25))
    return {
        "gaussian_noise": lambda s: A.GaussNoise(std_range=(noise(s), noise(s)), p=1.0),
        "shot_noise": lambda s: A.ShotNoise(scale_range=(1 / photons(s), 1 / photons(s)), p=1.0),
        "impulse_noise": lambda s: A.SaltAndPepper(amount=(amount(s), amount(s)),
                                                   salt_vs_pepper=(0.5, 0.5), p=1.0),
        "defocus_blur": lambda s: A.Defocus(radius=(defocus(s)[0], defocus(s)[0]),
                                            alias_blur=(defocus(s)[1], defocus(s)[1]), p=1.0),
        "motion_blur": lambda s: A.MotionBlur(blur_limit=(motion(s), motion(s)),
                                              allow_shifted=False, p=1.0),
        "zoom_blur": lambda s: A.ZoomBlur(max_factor=(zoom(s)[0], zoom(s)[0]),
                                          step_factor=(zoom(s)[1], zoom(s)[1]), p=1.0),
        "gaussian_blur": lambda s: A.GaussianBlur(blur_limit=0, sigma_limit=(sigma(s), sigma(s)),
                                                  p=1.0),
        "fog": lambda s: A.RandomFog(fog_coef_range=(fog(s), fog(s)), p=1.0),
        "snow": lambda s: A.RandomSnow(snow_point_range=(snow(s), snow(s)), method="texture",
                                       p=1.0),
        "brightness": lambda s: A.RandomBrightnessContrast(
            brightness_limit=(bright(s), bright(s)), contrast_limit=(0.0, 0.0), p=1.0),
        # (x - mean) * c + mean, as ImageNet-C: alpha = c, beta = (1 - c) * mean
        "contrast": lambda s: A.RandomBrightnessContrast(
            brightness_limit=(1 - contrast(s), 1 - contrast(s)),
            contrast_limit=(contrast(s) - 1, contrast(s) - 1), brightness_by_max=False, p=1.0),
        "jpeg": lambda s: A.ImageCompression(quality_range=(quality(s), quality(s)), p=1.0),
        "pixelate": lambda s: A.Downscale(
            scale_range=(pixelate(s), pixelate(s)),
            interpolation_pair={"downscale": cv2.INTER_AREA, "upscale": cv2.INTER_NEAREST},
            p=1.0),
    }


CORRUPTIONS = ("gaussian_noise", "shot_noise", "impulse_noise", "defocus_blur", "motion_blur",
               "zoom_blur", "gaussian_blur", "fog", "snow", "brightness", "contrast", "jpeg",
               "pixelate")


def corruption_names(text: str) -> list[str]:
    """'fog;jpeg' -> ['fog', 'jpeg']; 'all' -> every corruption."""
    if text.strip().lower() == "all":
        return list(CORRUPTIONS)
    return [part.strip().lower() for part in text.split(";") if part.strip()]


class Hendrycks(Augmenter):
    """One common corruption per image (Hendrycks & Dietterich 2019); labels unchanged.

    severity: 1-5 as ImageNet-C's levels; 0 draws one per image.
    corruptions: the corruptions drawn from, ';'-separated, or all.
    p: probability that an image is corrupted.
    """

    name = "hendrycks"
    description = "Hendrycks & Dietterich's common corruptions (photometric; albumentations); label unchanged"
    requires: ClassVar[tuple[str, ...]] = ("albumentations",)
    install: ClassVar[str] = "pip install -e plugins/augmenters/hendrycks"
    # p = 0.5: neither paper nor reference code gives one; half the samples stay clean, as in
    # Gen4Seg's own 50/50 mix of generated and real samples (see the README)
    defaults: ClassVar[dict[str, Any]] = {"severity": 3, "corruptions": "all", "p": 0.5}

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        p = self.params
        self.corruptions = corruption_names(p["corruptions"])
        unknown = [c for c in self.corruptions if c not in CORRUPTIONS]
        if unknown or not self.corruptions:
            raise PluginError(f"hendrycks: unknown corruption {unknown[0]!r}" if unknown
                              else "hendrycks: corruptions names none",
                              hint="corruptions are " + ";".join(CORRUPTIONS))
        if not 0 <= p["severity"] <= SEVERITIES or not 0 <= p["p"] <= 1:
            raise PluginError("hendrycks: needs severity 0-5 (0 = drawn per image) and "
                              "0 <= p <= 1", hint="e.g. hendrycks:severity=3,corruptions=fog;jpeg")
        levels = [int(p["severity"])] if p["severity"] else list(range(1, SEVERITIES + 1))
        tables = _tables()
        self._ops = {(name, s): tables[name](s) for name in self.corruptions
                     for s in levels}

    def corrupt(self, image: np.ndarray, name: str, severity: int, seed: int) -> np.ndarray:
        """One corruption of a uint8 HWC image (the same seed, the same result)."""
        import albumentations as A

        return A.Compose([self._ops[(name, severity)]], seed=seed)(image=image)["image"]

    def apply(self, images: torch.Tensor, labels: torch.Tensor,
              generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        out = images.clone()
        names = self.corruptions
        for i, seed in enumerate(seeds(generator, images.shape[0])):
            rng = np.random.default_rng(seed)
            if rng.random() >= self.params["p"]:
                continue
            name = names[int(rng.integers(len(names)))]
            severity = int(self.params["severity"]) or int(rng.integers(1, SEVERITIES + 1))
            image = (images[i].permute(1, 2, 0).cpu().numpy() * 255).round().clip(0, 255)
            corrupted = self.corrupt(image.astype(np.uint8), name, severity,
                                     int(rng.integers(2**31 - 1)))
            out[i] = torch.from_numpy(corrupted.astype(np.float32) / 255.0).permute(2, 0, 1) \
                .to(out.dtype)
        return out, labels.clone()


@hookimpl
def register_augmenters(register) -> None:
    register(Hendrycks)
