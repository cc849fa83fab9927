"""Visibility metrics against known values."""

from __future__ import annotations

import math

import numpy as np
import pytest

from segtk.benchmarks.visibility import changed_fraction, psnr, ssim


def test_identical_images() -> None:
    img = np.random.default_rng(0).integers(0, 256, (20, 30, 3), dtype=np.uint8)
    assert psnr(img, img) == math.inf and ssim(img, img) == pytest.approx(1.0)
    assert changed_fraction(img, img) == 0.0


def test_uniform_shift_of_8_grey_levels() -> None:
    img = np.full((16, 16, 3), 100, dtype=np.uint8)
    adv = img + 8
    assert psnr(img, adv) == pytest.approx(10 * math.log10(255**2 / 64))  # 30.07 dB
    assert changed_fraction(img, adv) == 1.0
    # constant images: SSIM reduces to the luminance term (2·100·108 + c1) / (100² + 108² + c1)
    c1 = (0.01 * 255) ** 2
    assert ssim(img, adv) == pytest.approx((2 * 100 * 108 + c1) / (100**2 + 108**2 + c1))


def test_changed_fraction_counts_pixels_not_channels() -> None:
    img = np.zeros((2, 2, 3), dtype=np.uint8)
    adv = img.copy()
    adv[0, 0, 1] = 1
    assert changed_fraction(img, adv) == 0.25
    noisy = np.clip(img.astype(int) + 60, 0, 255).astype(np.uint8)
    assert ssim(np.pad(img, ((5, 5), (5, 5), (0, 0))), np.pad(noisy, ((5, 5), (5, 5), (0, 0)))) < 1


def test_colour_difference_separates_lightness_from_chroma() -> None:
    from segtk.benchmarks.visibility import colour_difference, visibility

    img = np.full((8, 8, 3), 120, dtype=np.uint8)
    assert colour_difference(img, img) == (0.0, 0.0)
    grey = img + 8  # the same ±ε in every channel: lighter, no hue
    delta_e, chroma = colour_difference(img, grey)
    assert delta_e > 2 and chroma < 1e-3 * delta_e
    coloured = img.copy()
    coloured[..., 0] += 8  # +ε red, −ε green and blue: the same PSNR as `grey`
    coloured[..., 1:] -= 8
    assert psnr(img, coloured) == pytest.approx(psnr(img, grey))
    delta_e_c, chroma_c = colour_difference(img, coloured)
    assert chroma_c > 1.5 and delta_e_c > 1.5  # as visible overall, but as a change of hue
    assert set(visibility(img, coloured)) == {"psnr", "ssim", "changed", "delta_e", "delta_chroma"}
