"""cutout: square holes, labels kept or set to ignore exactly under the holes; deterministic."""

from __future__ import annotations

import pytest
import torch

from segtk.core import AugmentContext, PluginError, build_augmenter, registry
from segtk_augment_cutout import CutOut


def batch() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    images = torch.rand(3, 3, 40, 60, generator=g) * 0.4 + 0.55  # never the fill grey 0.5
    labels = torch.randint(0, 5, (3, 40, 60), generator=g)
    return images, labels


def holes(images: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    return (out != images).any(1)


def test_registered() -> None:
    assert registry.augmenter("cutout") is CutOut


def test_keep_label_and_square_grey_holes() -> None:
    images, labels = batch()
    aug = CutOut(size=0.25)
    out, lab = aug(images, labels, torch.Generator().manual_seed(1))
    assert torch.equal(lab, labels)
    for i in range(3):
        hole = holes(images[i:i + 1], out[i:i + 1])[0]
        ys, xs = hole.nonzero(as_tuple=True)
        assert 0 < hole.sum() <= 10 * 10  # one square of 0.25 * 40 = 10 px (clipped at borders)
        assert torch.allclose(out[i][:, hole], torch.tensor(0.5))
        assert hole[ys.min():ys.max() + 1, xs.min():xs.max() + 1].all()  # a filled rectangle


def test_ignore_label_exactly_under_the_holes() -> None:
    images, labels = batch()
    aug = CutOut(label="ignore", holes=2)
    aug.setup(AugmentContext(["a", "b", "c", "d", "e"], ignore_index=255))
    out, lab = aug(images, labels, torch.Generator().manual_seed(1))
    hole = holes(images, out)
    assert hole.any()
    assert (lab[hole] == 255).all()
    assert torch.equal(lab[~hole], labels[~hole])


def test_deterministic_given_the_generator() -> None:
    images, labels = batch()
    a = CutOut()(images, labels, torch.Generator().manual_seed(5))
    b = CutOut()(images, labels, torch.Generator().manual_seed(5))
    c = CutOut()(images, labels, torch.Generator().manual_seed(6))
    assert torch.equal(a[0], b[0]) and not torch.equal(a[0], c[0])


def test_bad_parameters() -> None:
    with pytest.raises(PluginError, match="label=keep"):
        build_augmenter("cutout:label=zero")
    with pytest.raises(PluginError, match="0 < size <= 1"):
        build_augmenter("cutout:size=2")
    with pytest.raises(PluginError, match="cannot read size='x': expected a number"):
        build_augmenter("cutout:size=x")
