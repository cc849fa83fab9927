"""The augmenter contract suite: what `segtk.core.Augmenter` promises `segtk train`, checked on
a small batch whose every pixel shows its class's colour.

    from segtk.testing import AugmenterSuite

    class TestMyAugmenter(AugmenterSuite):
        augmenter_cls = MyAugmenter    # an Augmenter subclass (what the plugin registers)
        params = {"p": 1.0}            # optional constructor arguments

Checks: `name` and `defaults` declared, `parameters()` JSON (run.json records it); `apply`
returns images float [B,3,H,W] and int64 labels [B,H,W] of the batch's shapes, the labels
holding only the batch's classes or ignore; it is deterministic given the generator, whatever
the global random state (two augmenters built alike, fresh generators of one seed, other
global seeds); it leaves its inputs untouched; and it is label-consistent. The batch's image
is its label painted in one colour per class, so a label-consistent augmenter (geometric ops on
both, pasted patches with their labels, photometric ops leaving labels alone) leaves (a) no
label changed where the image did not change (a label moved without its pixels) and (b) no
pixel showing, exactly, another class's colour than its label's (pixels moved without their
labels). Both are counted over the batch with a small tolerance (`tolerance`, a share of the
pixels) for what an augmenter may repaint, e.g. an edit's uncovered area. `setup` is called
first with the batch's classes (override `context()` to give more, e.g. `prepare`).
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

import numpy as np
import torch

from segtk.core import AugmentContext, Augmenter
from segtk.testing.fakes import TOY_CLASSES

IGNORE = 255
# One colour per class of TOY_CLASSES, and the unlabelled pixels' (none of them a grey, a
# multiple of 16 or another's channel: photometric ops rarely land exactly on one by chance).
COLOURS = np.array([[31, 87, 203], [219, 61, 45], [77, 193, 118], [229, 171, 37]], np.uint8)
UNLABELLED = np.array([109, 43, 151], np.uint8)


def class_map(height: int, width: int, seed: int) -> np.ndarray:
    """An int64 label [H,W]: Voronoi cells of a few seeded points, one class each (irregular, so
    any flip, shift, crop or rotation moves many pixels into another class), a few ignored."""
    rng = np.random.default_rng(seed)
    points = rng.uniform(0, 1, (7, 2)) * (height, width)
    ys, xs = np.mgrid[:height, :width]
    nearest = ((ys[..., None] - points[:, 0]) ** 2 + (xs[..., None] - points[:, 1]) ** 2).argmin(-1)
    label = (np.arange(7) % len(TOY_CLASSES))[rng.permutation(7)][nearest].astype(np.int64)
    label[: height // 8, : width // 8] = IGNORE
    return label


def painted_batch(n: int = 4, height: int = 32, width: int = 48,
                  seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """(images float32 [n,3,H,W] in [0,1], labels int64 [n,H,W]): each pixel its class's colour."""
    labels = np.stack([class_map(height, width, seed + i) for i in range(n)])
    palette = np.concatenate([COLOURS, np.zeros((IGNORE - len(COLOURS), 3), np.uint8),
                              UNLABELLED[None]])
    images = palette[labels].astype(np.float32) / 255
    return torch.from_numpy(images).permute(0, 3, 1, 2).contiguous(), torch.from_numpy(labels)


class AugmenterSuite:
    """Subclass as `TestSomething` with `augmenter_cls` set; pytest collects the checks."""

    augmenter_cls: ClassVar[type[Augmenter]]
    params: ClassVar[dict[str, Any]] = {}
    # The share of a batch's pixels an augmenter may repaint without moving labels exactly.
    tolerance: ClassVar[float] = 0.02
    # Whether some seed must change the batch (False for an augmenter that may be a no-op).
    expect_change: ClassVar[bool] = True

    def context(self) -> AugmentContext:
        return AugmentContext(list(TOY_CLASSES), IGNORE)

    def make(self) -> Augmenter:
        augmenter = self.augmenter_cls(**self.params)
        augmenter.setup(self.context())
        return augmenter

    def batch(self, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
        return painted_batch(seed=seed)

    def augment(self, seed: int, augmenter: Augmenter | None = None,
                batch_seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """(images, labels, augmented images, augmented labels) for generator seed `seed`."""
        images, labels = self.batch(batch_seed)
        out_images, out_labels = (augmenter or self.make()).apply(
            images.clone(), labels.clone(), torch.Generator().manual_seed(seed))
        return images, labels, out_images, out_labels

    def test_declares_name_defaults_and_json_parameters(self) -> None:
        cls = self.augmenter_cls
        assert isinstance(cls.name, str) and cls.name, "name must be a non-empty string"
        assert isinstance(cls.defaults, dict) and all(isinstance(k, str) for k in cls.defaults), \
            "defaults must map parameter names to their defaults"
        try:
            json.dumps(self.make().parameters(), allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise AssertionError(f"parameters() is not JSON ({exc}): run.json records it") from exc

    def test_keeps_shapes_and_types(self) -> None:
        images, labels, out_images, out_labels = self.augment(0)
        assert isinstance(out_images, torch.Tensor) and out_images.shape == images.shape, \
            f"images {tuple(images.shape)} came back as {tuple(getattr(out_images, 'shape', ()))}"
        assert out_images.is_floating_point(), f"images came back as {out_images.dtype}"
        assert isinstance(out_labels, torch.Tensor) and out_labels.shape == labels.shape, \
            f"labels {tuple(labels.shape)} came back as {tuple(getattr(out_labels, 'shape', ()))}"
        assert out_labels.dtype == torch.int64, f"labels came back as {out_labels.dtype}, not int64"
        assert bool(torch.isfinite(out_images).all()), "the images hold NaN or inf"

    def test_labels_are_classes_or_ignore(self) -> None:
        for seed in range(3):
            _, labels, _, out_labels = self.augment(seed)
            allowed = set(labels.unique().tolist()) | {IGNORE}
            found = set(out_labels.unique().tolist())
            assert found <= allowed, f"seed {seed}: label ids {sorted(found - allowed)} are " \
                                     f"neither the batch's classes nor ignore ({IGNORE})"

    def test_same_generator_same_batch(self) -> None:
        results = []
        saved = torch.get_rng_state(), np.random.get_state()
        try:
            for global_seed in (1, 2):  # randomness drawn elsewhere than the generator shows
                torch.manual_seed(global_seed)
                np.random.seed(global_seed)
                results.append(self.augment(5)[2:])
        finally:
            torch.set_rng_state(saved[0])
            np.random.set_state(saved[1])
        (a_images, a_labels), (b_images, b_labels) = results
        assert torch.equal(a_images, b_images) and torch.equal(a_labels, b_labels), \
            "one generator seed, two different batches: draw randomness only from the generator"

    def test_leaves_its_inputs_untouched(self) -> None:
        images, labels = self.batch()
        before = (images.clone(), labels.clone())
        self.make().apply(images, labels, torch.Generator().manual_seed(0))
        assert torch.equal(images, before[0]) and torch.equal(labels, before[1]), \
            "apply modified the batch it was given"

    def test_changes_the_batch(self) -> None:
        if not self.expect_change:
            return
        changed = []
        for seed in range(3):
            images, labels, out_images, out_labels = self.augment(seed)
            changed.append(not (torch.equal(images, out_images) and torch.equal(labels, out_labels)))
        assert any(changed), "no seed changed the batch (set expect_change = False if that is right)"

    def test_labels_travel_with_their_pixels(self) -> None:
        palette = torch.from_numpy(COLOURS.astype(np.float32) / 255)
        for seed in range(3):
            images, labels, out_images, out_labels = self.augment(seed)
            total = labels.numel()
            image_changed = (out_images - images).abs().amax(1) > 0.5 / 255
            label_changed = out_labels != labels
            stranded = int((label_changed & ~image_changed).sum())
            assert stranded <= self.tolerance * total, \
                f"seed {seed}: {stranded} of {total} labels changed where the image did not: " \
                "labels moved without their pixels"
            pixels = out_images.permute(0, 2, 3, 1)  # [B,H,W,3]
            shows = ((pixels[..., None, :] - palette).abs().amax(-1) < 0.5 / 255)  # [B,H,W,K]
            labelled = (out_labels != IGNORE) & (out_labels >= 0) & (out_labels < len(COLOURS))
            own = shows.gather(-1, out_labels.clamp(0, len(COLOURS) - 1)[..., None])[..., 0]
            foreign = int((labelled & shows.any(-1) & ~own).sum())
            assert foreign <= self.tolerance * total, \
                f"seed {seed}: {foreign} of {total} pixels show another class's colour than " \
                "their label's: pixels moved without their labels"
