"""cutmix: pasted boxes bring their labels; deterministic; registered; bad params refused."""

from __future__ import annotations

import pytest
import torch

from segtk.core import PluginError, build_augmenter, registry
from segtk_augment_cutmix import CutMix


def batch(b: int = 6, h: int = 40, w: int = 56) -> tuple[torch.Tensor, torch.Tensor]:
    """Image k is the constant grey k/10, its label the constant class k: any pixel whose grey
    and class disagree was moved without its label (or the reverse)."""
    images = torch.arange(b, dtype=torch.float32).view(b, 1, 1, 1).expand(b, 3, h, w) / 10
    labels = torch.arange(b).view(b, 1, 1).expand(b, h, w).clone()
    return images.contiguous(), labels


def test_registered() -> None:
    assert registry.augmenter("cutmix") is CutMix


def test_labels_travel_with_their_pixels() -> None:
    images, labels = batch()
    out, lab = CutMix(p=1.0)(images, labels, torch.Generator().manual_seed(0))
    assert torch.equal((out[:, 0] * 10).round().long(), lab)  # every pixel: grey == class
    changed = (lab != labels).flatten(1).any(1)
    assert changed.sum() >= 4  # p=1: nearly every image got a box (a tiny box may be empty)
    for i in range(len(lab)):
        assert set(lab[i].unique().tolist()) <= {i, (i + 1) % 6, (i + 2) % 6, (i + 3) % 6,
                                                  (i + 4) % 6, (i + 5) % 6}
        assert lab[i].unique().numel() <= 2  # one partner per image


def test_deterministic_given_the_generator() -> None:
    images, labels = batch()
    a = CutMix()(images, labels, torch.Generator().manual_seed(3))
    b = CutMix()(images, labels, torch.Generator().manual_seed(3))
    c = CutMix()(images, labels, torch.Generator().manual_seed(4))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert not torch.equal(a[1], c[1])


def test_p_zero_and_single_image_leave_the_batch() -> None:
    images, labels = batch()
    out, lab = CutMix(p=0)(images, labels, torch.Generator().manual_seed(0))
    assert torch.equal(out, images) and torch.equal(lab, labels)
    out, lab = CutMix(p=1)(images[:1], labels[:1], torch.Generator().manual_seed(0))
    assert torch.equal(out, images[:1]) and torch.equal(lab, labels[:1])


def test_bad_parameters() -> None:
    with pytest.raises(PluginError, match="alpha > 0"):
        build_augmenter("cutmix:alpha=0")
    with pytest.raises(PluginError, match="unknown parameter 'beta'"):
        build_augmenter("cutmix:beta=1")
    with pytest.raises(PluginError, match="cannot read"):
        build_augmenter("cutmix:alpha")
