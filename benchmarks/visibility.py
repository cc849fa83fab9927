"""How visible is a perturbation? PSNR, SSIM, the share of changed pixels and the colour
difference in OKLab (8-bit images).

PSNR and SSIM treat R, G and B alike and SSIM is computed per channel, so they barely see a
change of hue: on the README's images colour-stripes' coloured ±ε stripes score a *higher*
SSIM than DLA's grey ones of the same L∞ size. The OKLab difference splits the change into
lightness and chroma (hue).
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

from segtk.editkit import rgb_to_oklab


def psnr(clean: np.ndarray, adv: np.ndarray) -> float:
    """Peak signal-to-noise ratio in dB over uint8 images; inf for identical images."""
    mse = float(np.mean((clean.astype(np.float64) - adv.astype(np.float64)) ** 2))
    return math.inf if mse == 0 else 10 * math.log10(255.0**2 / mse)


def ssim(clean: np.ndarray, adv: np.ndarray) -> float:
    """Mean SSIM (Wang et al. 2004: 11x11 Gaussian window, σ=1.5) over channels, uint8 [H,W,3]."""
    x = torch.from_numpy(clean).double().permute(2, 0, 1)[:, None]
    y = torch.from_numpy(adv).double().permute(2, 0, 1)[:, None]
    size = min(11, clean.shape[0], clean.shape[1])
    coords = torch.arange(size, dtype=torch.float64) - (size - 1) / 2
    g = torch.exp(-(coords**2) / (2 * 1.5**2))
    g = g / g.sum()
    window = (g[:, None] * g[None, :])[None, None]

    def blur(t: torch.Tensor) -> torch.Tensor:
        return F.conv2d(t, window)

    c1, c2 = (0.01 * 255) ** 2, (0.03 * 255) ** 2
    mx, my = blur(x), blur(y)
    vx, vy, cov = blur(x * x) - mx**2, blur(y * y) - my**2, blur(x * y) - mx * my
    s = ((2 * mx * my + c1) * (2 * cov + c2)) / ((mx**2 + my**2 + c1) * (vx + vy + c2))
    return float(s.mean())


def changed_fraction(clean: np.ndarray, adv: np.ndarray) -> float:
    """Share of pixels where any channel differs."""
    return float(np.any(clean != adv, axis=-1).mean())


def colour_difference(clean: np.ndarray, adv: np.ndarray) -> tuple[float, float]:
    """Mean OKLab distance and mean chroma (a, b) distance per pixel, ×100.

    About 2 on this scale (0.02 in OKLab units) is a just-noticeable difference.
    """
    diff = rgb_to_oklab(adv) - rgb_to_oklab(clean)
    total = np.linalg.norm(diff, axis=-1).mean()
    chroma = np.linalg.norm(diff[..., 1:], axis=-1).mean()
    return 100 * float(total), 100 * float(chroma)


def visibility(clean: np.ndarray, adv: np.ndarray) -> dict[str, float]:
    delta_e, delta_chroma = colour_difference(clean, adv)
    return {"psnr": psnr(clean, adv), "ssim": ssim(clean, adv), "changed": changed_fraction(clean, adv),
            "delta_e": delta_e, "delta_chroma": delta_chroma}
