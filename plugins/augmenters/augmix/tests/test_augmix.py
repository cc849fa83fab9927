"""augmix: photometric only, so labels are untouched; changes images; deterministic."""

from __future__ import annotations

import pytest
import torch

from segtk.core import PluginError, build_augmenter, registry
from segtk_augment_augmix import OPS, AugMix


def batch() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    images = (torch.rand(4, 3, 36, 48, generator=g) * 255).round() / 255
    return images, torch.randint(0, 7, (4, 36, 48), generator=g)


def test_registered_with_photometric_ops_only() -> None:
    assert registry.augmenter("augmix") is AugMix
    assert not {"rotate", "shear_x", "shear_y", "translate_x", "translate_y"} & set(OPS)
    assert len(AugMix()._ops) == len(OPS)


def test_labels_unchanged_images_changed_in_range() -> None:
    images, labels = batch()
    out, lab = AugMix(severity=5)(images, labels, torch.Generator().manual_seed(0))
    assert torch.equal(lab, labels) and lab is not labels
    assert out.shape == images.shape and out.dtype == torch.float32
    assert 0 <= float(out.min()) and float(out.max()) <= 1
    assert (out - images).abs().flatten(1).amax(1).gt(1 / 255).all()  # every image changed


def test_deterministic_given_the_generator() -> None:
    images, labels = batch()
    a, _ = AugMix()(images, labels, torch.Generator().manual_seed(2))
    b, _ = AugMix()(images, labels, torch.Generator().manual_seed(2))
    c, _ = AugMix()(images, labels, torch.Generator().manual_seed(3))
    assert torch.equal(a, b) and not torch.equal(a, c)


def test_p_zero_is_identity() -> None:
    images, labels = batch()
    out, _ = AugMix(p=0)(images, labels, torch.Generator().manual_seed(0))
    assert torch.equal(out, images)


def test_bad_parameters() -> None:
    with pytest.raises(PluginError, match="severity 1-10"):
        build_augmenter("augmix:severity=11")
    with pytest.raises(PluginError, match="depth -1"):
        build_augmenter("augmix:depth=0")


def test_jsd_is_the_consistency_weight_and_off_by_default() -> None:
    default, weighted = build_augmenter("augmix"), build_augmenter("augmix:jsd=12")
    assert default is not None and weighted is not None
    assert default.consistency() == 0.0 and weighted.consistency() == 12.0
    for bad in ("-1", "inf", "nan"):
        with pytest.raises(PluginError, match="jsd >= 0"):
            build_augmenter(f"augmix:jsd={bad}")
