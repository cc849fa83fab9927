"""hendrycks: every corruption changes the image and keeps the label, a higher severity
changes it more, the draws come from the batch generator only, bad parameters are refused."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import segtk
from segtk.core import PluginError, build_augmenter, registry
from segtk_augment_hendrycks import CORRUPTIONS, Hendrycks


def batch() -> tuple[torch.Tensor, torch.Tensor]:
    """Two crops of the demo images (smooth regions and edges, as real photographs have)."""
    data = segtk.load_dataset("demo")
    images = torch.stack([torch.from_numpy(data[i].image[:48, :64].copy()) for i in range(2)])
    labels = torch.stack([torch.from_numpy(data[i].label[:48, :64].astype(np.int64))
                          for i in range(2)])
    return images.permute(0, 3, 1, 2).float() / 255, labels


def change(corruption: str, severity: int, seeds: int = 3) -> float:
    """Mean absolute change of the batch's pixels, averaged over a few generator seeds."""
    images, labels = batch()
    augmenter = Hendrycks(corruptions=corruption, severity=severity, p=1)
    return float(np.mean([(augmenter(images, labels, torch.Generator().manual_seed(s))[0]
                           - images).abs().mean() for s in range(seeds)]))


def test_registered_with_photometric_corruptions_only() -> None:
    assert registry.augmenter("hendrycks") is Hendrycks
    assert not {"elastic_transform", "glass_blur", "frost"} & set(CORRUPTIONS)
    assert len(Hendrycks()._ops) == len(CORRUPTIONS)  # one severity: one transform each


@pytest.mark.parametrize("corruption", CORRUPTIONS)
def test_each_corruption_changes_every_image_and_keeps_the_label(corruption) -> None:
    images, labels = batch()
    out, lab = Hendrycks(corruptions=corruption, p=1)(images, labels, torch.Generator().manual_seed(0))
    assert torch.equal(lab, labels) and lab is not labels
    assert out.shape == images.shape and 0 <= float(out.min()) and float(out.max()) <= 1
    assert (out - images).abs().flatten(1).mean(1).gt(1 / 255).all()  # every image changed


@pytest.mark.parametrize("corruption", CORRUPTIONS)
def test_a_higher_severity_changes_the_image_more(corruption) -> None:
    mild, middle, strong = (change(corruption, s) for s in (1, 3, 5))
    assert mild < middle < strong


def test_deterministic_given_the_generator() -> None:
    images, labels = batch()
    a, _ = Hendrycks(severity=0)(images, labels, torch.Generator().manual_seed(2))
    torch.manual_seed(123)
    np.random.seed(123)
    b, _ = Hendrycks(severity=0)(images, labels, torch.Generator().manual_seed(2))
    c, _ = Hendrycks(severity=0)(images, labels, torch.Generator().manual_seed(3))
    assert torch.equal(a, b) and not torch.equal(a, c)


def test_by_default_half_the_samples_are_corrupted_and_the_rest_left_as_they_were() -> None:
    images, labels = batch()
    images, labels = images.repeat(20, 1, 1, 1), labels.repeat(20, 1, 1)  # 40 samples
    out, _ = Hendrycks()(images, labels, torch.Generator().manual_seed(0))
    changed = (out != images).flatten(1).any(1)
    assert 12 <= int(changed.sum()) <= 28  # Binomial(40, 0.5): 20 ± 8 at over 3 std
    assert torch.equal(out[~changed], images[~changed])
    assert Hendrycks().parameters()["p"] == 0.5


def test_p_zero_is_identity() -> None:
    images, labels = batch()
    out, _ = Hendrycks(p=0)(images, labels, torch.Generator().manual_seed(0))
    assert torch.equal(out, images)


def test_a_spec_chooses_corruptions_and_severity() -> None:
    augmenter = build_augmenter("hendrycks:corruptions=fog;jpeg,severity=2")
    assert isinstance(augmenter, Hendrycks)
    assert augmenter.parameters()["corruptions"] == "fog;jpeg"
    assert set(augmenter._ops) == {("fog", 2), ("jpeg", 2)}


def test_bad_parameters() -> None:
    with pytest.raises(PluginError, match="severity 0-5"):
        build_augmenter("hendrycks:severity=6")
    with pytest.raises(PluginError, match="unknown corruption 'frost'"):
        build_augmenter("hendrycks:corruptions=fog;frost")
    with pytest.raises(PluginError, match="names none"):
        build_augmenter("hendrycks:corruptions=;")
