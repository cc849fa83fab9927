"""The segmenter contract suite: what `segtk.core.Segmenter` promises, checked on a
few small images.

    from segtk.testing import SegmenterSuite

    class TestMyModel(SegmenterSuite):
        def make(self) -> Segmenter:
            return MySegmenter(...)

Checks: declared classes and ignore index; `predict` gives int64 [B,H,W] at the input size with
ids in range, leaves its input alone, answers the same twice and the same for an image alone
as inside a batch; where the model has `logits`, they are finite [B,C,H,W] whose argmax is
`predict`; where it gives gradients (`differentiable_logits`, for white-box attacks), they are
those logits with a graph back to the images. `make()` runs once per check: cache a heavy model yourself (e.g. functools.cache).
"""

from __future__ import annotations

from typing import ClassVar

import pytest
import torch

from segtk.core import Segmenter, labels_from_logits
from segtk.testing.fakes import smooth_images


class SegmenterSuite:
    """Subclass as `TestSomething` and implement `make()`; pytest collects the checks."""

    # (height, width) of the test images: one even, one odd size by default.
    sizes: ClassVar[tuple[tuple[int, int], ...]] = ((24, 32), (17, 23))
    # Highest predicted id + 1 allowed; default: the logits' channels, else the model's
    # `num_outputs` (its classes unless it says otherwise).
    num_outputs: ClassVar[int | None] = None

    def make(self) -> Segmenter:
        raise NotImplementedError(f"{type(self).__name__} must implement make() -> Segmenter")

    def images(self, height: int, width: int, seed: int = 0) -> torch.Tensor:
        """Float32 [3,3,H,W] in [0,1]: a smooth random image, an all-black and an all-white one."""
        smooth = smooth_images(1, height, width, seed)
        return torch.cat([smooth, torch.zeros_like(smooth), torch.ones_like(smooth)])

    def id_bound(self, model: Segmenter, images: torch.Tensor) -> int:
        if self.num_outputs is not None:
            return self.num_outputs
        if model.has_logits:
            return int(model.logits(images[:1]).shape[1])
        return model.num_outputs

    def test_declares_name_classes_and_ignore_index(self) -> None:
        model = self.make()
        assert isinstance(model, Segmenter), f"make() returned {type(model).__name__}"
        assert isinstance(model.name, str) and model.name, "name must be a non-empty string"
        classes = model.classes
        assert isinstance(classes, list) and classes, "classes must be a non-empty list of names"
        assert all(isinstance(c, str) and c for c in classes), f"class names must be strings: {classes}"
        assert len(set(classes)) == len(classes), f"duplicate class names: {classes}"
        assert model.num_classes == len(classes)
        ignore = model.ignore_index
        assert isinstance(ignore, int) and not isinstance(ignore, bool), \
            f"ignore_index must be an int, got {ignore!r}"
        # (the message is only built on failure, where classes[ignore] exists)
        assert not 0 <= ignore < len(classes), \
            f"ignore_index {ignore} is the id of class {classes[ignore]!r}"

    def test_predict_gives_int64_ids_at_the_input_size(self) -> None:
        model = self.make()
        for height, width in self.sizes:
            images = self.images(height, width)
            before = images.clone()
            labels = model.predict(images)
            assert isinstance(labels, torch.Tensor), f"predict returned {type(labels).__name__}"
            assert tuple(labels.shape) == (3, height, width), \
                f"predict on [3,3,{height},{width}] returned shape {tuple(labels.shape)}"
            assert labels.dtype == torch.int64, f"predict returned {labels.dtype}, not torch.int64"
            bound = self.id_bound(model, images)
            low, high = int(labels.min()), int(labels.max())
            assert 0 <= low and high < bound, f"predicted ids {low}..{high} outside 0..{bound - 1}"
            assert torch.equal(images, before), "predict modified its input images"

    def test_same_images_same_labels(self) -> None:
        model = self.make()
        height, width = self.sizes[0]
        images = self.images(height, width, seed=1)
        assert torch.equal(model.predict(images), model.predict(images)), \
            "predict gave different labels for the same images"

    def test_batched_equals_one_at_a_time(self) -> None:
        model = self.make()
        height, width = self.sizes[0]
        images = self.images(height, width, seed=2)
        batched = model.predict(images)
        for i in range(images.shape[0]):
            alone = model.predict(images[i : i + 1])
            assert torch.equal(batched[i], alone[0]), \
                f"image {i}: its labels depend on the other images of the batch"

    def test_logits_agree_with_predict(self) -> None:
        model = self.make()
        if not model.has_logits:
            pytest.skip(f"{model.name} gives labels only (no logits)")
        for height, width in self.sizes:
            images = self.images(height, width, seed=3)
            scores = model.logits(images)
            assert isinstance(scores, torch.Tensor) and scores.is_floating_point(), \
                "logits must be a float tensor"
            assert scores.dim() == 4 and scores.shape[0] == 3 and \
                tuple(scores.shape[2:]) == (height, width), \
                f"logits on [3,3,{height},{width}] have shape {tuple(scores.shape)}, expected [3,C,H,W]"
            assert scores.shape[1] >= model.num_classes, \
                f"logits have {scores.shape[1]} channels for {model.num_classes} classes"
            assert bool(torch.isfinite(scores).all()), "logits contain NaN or inf"
            assert torch.equal(labels_from_logits(scores).cpu(), model.predict(images).cpu()), \
                "predict is not the argmax of logits"

    def test_differentiable_logits_are_the_logits_with_a_graph(self) -> None:
        model = self.make()
        if not model.has_gradients:
            pytest.skip(f"{model.name} gives no gradients (no differentiable_logits)")
        for height, width in self.sizes:
            images = self.images(height, width, seed=4).requires_grad_(True)
            scores = model.differentiable_logits(images)
            assert scores.requires_grad, "differentiable_logits gave scores without a graph"
            assert torch.allclose(scores.detach().cpu(), model.logits(images.detach()).cpu(),
                                  rtol=1e-4, atol=1e-4), "differentiable_logits differ from logits"
            (grad,) = torch.autograd.grad(scores[:, 0].sum(), images)
            assert bool(torch.isfinite(grad).all()) and bool(grad.abs().sum() > 0), \
                "the scores' gradient w.r.t. the images is zero or not finite"
