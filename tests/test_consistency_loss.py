"""The Jensen–Shannon consistency loss (AugMix's JSD) in segtk train: its value against a plain
formula, one step's loss against a recomputation, views that must keep the labels."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
import torch

from segtk.core import Augmenter, PluginError
from segtk.jobs.train import jensen_shannon, segmentation_loss, step_loss


def plain_jsd(*logits: torch.Tensor) -> float:
    """Mean over pixels of (1/n) Σ_i Σ_c p_i,c (log p_i,c - log M_c), M the mean of the p_i
    clamped to [1e-7, 1]: one pixel at a time in numpy."""
    probs = [np.exp(x.double().numpy()) / np.exp(x.double().numpy()).sum(axis=1, keepdims=True)
             for x in logits]
    b, _, h, w = logits[0].shape
    total = 0.0
    for n in range(b):
        for y in range(h):
            for x in range(w):
                ps = [p[n, :, y, x] for p in probs]
                m = np.clip(sum(ps) / len(ps), 1e-7, 1)
                total += sum(float((p * (np.log(p) - np.log(m))).sum()) for p in ps) / len(ps)
    return total / (b * h * w)


def test_jsd_is_zero_for_equal_predictions_and_the_plain_formula_otherwise() -> None:
    g = torch.Generator().manual_seed(0)
    a = torch.randn(2, 4, 3, 5, generator=g)
    assert float(jensen_shannon(a, a, a)) == pytest.approx(0.0, abs=1e-7)
    b, c = torch.randn(2, 4, 3, 5, generator=g) * 3, torch.randn(2, 4, 3, 5, generator=g)
    assert float(jensen_shannon(a, b, c)) == pytest.approx(plain_jsd(a, b, c), rel=1e-5)
    # two classes, one pixel: certain of class 0, certain of class 1, undecided
    sure0, sure1, even = (torch.tensor([[[[v]], [[0.0]]]]) for v in (50.0, -50.0, 0.0))
    m = np.array([0.5, 0.5])  # the mean of (1, 0), (0, 1), (.5, .5)
    expected = (math.log(1 / m[0]) * 2 + 0.0) / 3  # KL of each to M: log 2, log 2, 0
    assert float(jensen_shannon(sure0, sure1, even)) == pytest.approx(expected, rel=1e-4)


class Linear(torch.nn.Module):
    """A 1x1 convolution as a model: logits of the pixels, counted per call."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 1)
        torch.nn.init.normal_(self.conv.weight, generator=torch.Generator().manual_seed(1))
        self.batches: list[int] = []

    def logits(self, images: torch.Tensor) -> torch.Tensor:
        self.batches.append(images.shape[0])
        return self.conv(images)


class Brighter(Augmenter):
    """Adds a random brightness per image; labels kept (or, with `relabel`, changed)."""

    name = "brighter"
    defaults = {"weight": 0.0, "relabel": False}

    def consistency(self) -> float:
        return float(self.params["weight"])

    def apply(self, images: torch.Tensor, labels: torch.Tensor,
              generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        shift = torch.rand(images.shape[0], 1, 1, 1, generator=generator) * 0.3
        return images + shift, (labels.flip(-1) if self.params["relabel"] else labels.clone())


def batch() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(2)
    labels = torch.randint(0, 4, (2, 6, 8), generator=g)
    labels[0, 0] = 255
    return torch.rand(2, 3, 6, 8, generator=g) * 0.7, labels


def loss_of(augmenter: Augmenter | None, model: Linear | None = None) -> torch.Tensor:
    images, labels = batch()
    trainable: Any = model or Linear()  # a module with logits(): all step_loss asks of a model
    return step_loss(trainable, images, labels, augmenter,
                     torch.Generator().manual_seed(3), 255, "step 1")


def test_a_consistency_weight_trains_on_the_clean_batch_plus_the_jsd_of_two_views() -> None:
    model = Linear()
    got = loss_of(Brighter(weight=12.0), model).detach()
    assert model.batches == [6]  # clean and both views in one forward pass, as AugMix trains
    images, labels = batch()
    g = torch.Generator().manual_seed(3)
    views = [Brighter(weight=12.0)(images, labels, g)[0] for _ in range(2)]
    clean, first, second = (model.conv(x) for x in (images, *views))
    expected = segmentation_loss(clean, labels, 255) + 12.0 * plain_jsd(
        clean.detach(), first.detach(), second.detach())
    assert float(got) == pytest.approx(float(expected.detach()), rel=1e-5)
    assert float(got) > float(segmentation_loss(clean, labels, 255).detach()) + 1e-4  # the views count


def test_without_a_weight_the_model_trains_on_the_augmented_batch_alone() -> None:
    model = Linear()
    got = loss_of(Brighter(), model)
    assert model.batches == [2]
    images, labels = batch()
    augmented, _ = Brighter()(images, labels, torch.Generator().manual_seed(3))
    assert torch.equal(got, segmentation_loss(model.conv(augmented), labels, 255))
    assert torch.equal(loss_of(None, model), segmentation_loss(model.conv(batch()[0]), labels, 255))


def test_views_that_change_the_labels_are_refused_with_a_consistency_weight() -> None:
    with pytest.raises(PluginError, match="changed the labels") as info:
        loss_of(Brighter(weight=1.0, relabel=True))
    assert "without its consistency weight" in (info.value.hint or "")
    assert torch.isfinite(loss_of(Brighter(relabel=True)))  # fine without one


def test_the_jsd_gradient_pulls_the_views_together() -> None:
    # one step on the JSD alone brings the three predictions closer
    images, labels = batch()
    labels[:] = 255  # no cross-entropy: the loss is the weighted JSD
    model = Linear()
    g = torch.Generator().manual_seed(3)
    views = [Brighter(weight=1.0)(images, labels, g)[0] for _ in range(2)]

    def spread() -> float:
        with torch.no_grad():
            return float(jensen_shannon(*(model.conv(x) for x in (images, *views))))

    before = spread()
    trainable: Any = model
    loss = step_loss(trainable, images, labels, Brighter(weight=1.0),
                     torch.Generator().manual_seed(3), 255, "step 1")
    loss.backward()
    with torch.no_grad():
        for p in model.parameters():
            assert p.grad is not None
            p.sub_(5.0 * p.grad)
    assert spread() < before
