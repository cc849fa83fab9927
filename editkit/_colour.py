"""sRGB <-> OKLab (Björn Ottosson 2020): a perceptual colour space where Euclidean distance
roughly tracks visible colour difference, used by the colour editor and the visibility metrics."""

from __future__ import annotations

import numpy as np

_M1 = np.array([[0.4122214708, 0.5363325363, 0.0514459929],
                [0.2119034982, 0.6806995451, 0.1073969566],
                [0.0883024619, 0.2817188376, 0.6299787005]])
_M2 = np.array([[0.2104542553, 0.7936177850, -0.0040720468],
                [1.9779984951, -2.4285922050, 0.4505937099],
                [0.0259040371, 0.7827717662, -0.8086757660]])
_M1_INV, _M2_INV = np.linalg.inv(_M1), np.linalg.inv(_M2)


def srgb_to_linear(c: np.ndarray) -> np.ndarray:
    return np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)


def linear_to_srgb(c: np.ndarray) -> np.ndarray:
    c = np.clip(c, 0.0, 1.0)
    return np.where(c <= 0.0031308, c * 12.92, 1.055 * np.power(c, 1 / 2.4) - 0.055)


def rgb_to_oklab(rgb: np.ndarray) -> np.ndarray:
    """uint8 or [0,1] float sRGB [...,3] -> OKLab [...,3] (L in [0,1])."""
    x = rgb.astype(np.float64) / (255.0 if rgb.dtype == np.uint8 else 1.0)
    lms = srgb_to_linear(x) @ _M1.T
    return np.cbrt(lms) @ _M2.T


def oklab_to_linear(lab: np.ndarray) -> np.ndarray:
    return (lab @ _M2_INV.T) ** 3 @ _M1_INV.T


def oklab_to_rgb(lab: np.ndarray) -> np.ndarray:
    """OKLab -> uint8 sRGB (out-of-gamut values clipped)."""
    return np.clip(np.round(linear_to_srgb(oklab_to_linear(lab)) * 255.0), 0, 255).astype(np.uint8)
