"""The per-image fast paths of `segtk attack` give exactly what the plain formulas give."""

from __future__ import annotations

import math

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from segtk.jobs.attack import quantise


def plain_quantise(adv: torch.Tensor, clean_u8: np.ndarray, eps: float) -> np.ndarray:
    """The specification: round(255·adv) in int64, clipped to clean ± ⌊ε⌋ and [0,255]."""
    q = np.asarray((adv.permute(0, 2, 3, 1) * 255.0).round(), dtype=np.float64)
    q = np.where(np.isnan(q), -1, q).astype(np.int64)
    step = math.floor(eps + 1e-9)
    lo = np.clip(clean_u8.astype(np.int64) - step, 0, 255)
    hi = np.clip(clean_u8.astype(np.int64) + step, 0, 255)
    return np.clip(q, lo, hi).astype(np.uint8)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**31), eps=st.sampled_from([0.5, 1.0, 2.5, 8.0, 16.0, 255.0]),
       spread=st.sampled_from([0.0, 4.0, 40.0]), h=st.integers(1, 7), w=st.integers(1, 7))
def test_quantise_is_the_plain_int64_formula(seed: int, eps: float, spread: float, h: int, w: int) -> None:
    g = torch.Generator().manual_seed(seed)
    clean_u8 = torch.randint(0, 256, (2, h, w, 3), generator=g, dtype=torch.uint8).numpy()
    clean_u8[0, 0] = 0
    clean_u8[1, -1] = 255
    clean = torch.from_numpy(clean_u8).permute(0, 3, 1, 2).float() / 255
    adv = clean + (torch.rand(clean.shape, generator=g) * 2 - 1) * spread / 255
    adv[1, 0, -1, 0] = float("nan")  # never from the oracle, but still kept in the ball (255 - ε)
    adv[1, 2, -1, -1] = 0.5 / 255  # a tie: rounds half to even, like the formula
    got = quantise(adv, clean_u8, eps)
    assert got.dtype == np.uint8 and got.flags.c_contiguous and got.shape == clean_u8.shape
    assert np.array_equal(got, plain_quantise(adv, clean_u8, eps))
    assert np.abs(got.astype(int) - clean_u8).max() <= eps
