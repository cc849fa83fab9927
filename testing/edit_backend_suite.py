"""The edit backend contract suite: what `segtk.core.EditBackend` promises the editors that
hand it their edits (`segtk edit --backend NAME`), checked on the toy scene (a car on a road).

    from segtk.testing import EditBackendSuite

    class TestMyBackend(EditBackendSuite):
        backend_cls = MyBackend        # an EditBackend subclass (what the plugin registers)
        options = {"steps": 2}         # optional: what `--param` would give it

Checks: `name`, `reference` and its options declared (`Params`, a dataclass whose every field
has a default); an option it does not declare is refused; `appearance` (the object, and the
whole image as image-level editors ask) returns an EditedSample whose image is uint8 at the
sample's size and whose label and mask are the sample's (aligned: an appearance edit moves
nothing); `geometry` (the object moved right, the area it uncovered to repaint) returns an
image at that size with the moved label and mask; some edit changes the image; the same rng
gives the same edit; the inputs are left untouched; metadata is JSON. Override `make()` for a
backend that needs more than its options (weights, say).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, ClassVar

import numpy as np
import pytest

from segtk.core import EditBackend, EditedSample, Sample, SegtkError, declared
from segtk.editkit import transform_object
from segtk.testing.fakes import toy_sample

UNKNOWN = "no_such_option"


def moved_right(sample: Sample, dx: int = 6) -> EditedSample:
    """The object moved `dx` px right with its label and mask, as a geometry editor hands it to
    a backend (`segtk.editkit.transform_object`): the area it uncovered labelled ignore and
    marked `repaint`."""
    moved = transform_object(sample, 1.0, (dx, 0), sample.ignore_index)
    moved.value = f"right {dx}"
    return moved


class EditBackendSuite:
    """Subclass as `TestSomething` with `backend_cls` set; pytest collects the checks."""

    backend_cls: ClassVar[type[EditBackend]]
    options: ClassVar[dict[str, Any]] = {}
    value: ClassVar[str] = "red"  # the value the appearance edits ask for
    expect_change: ClassVar[bool] = True

    def make(self, **extra: Any) -> EditBackend:
        return self.backend_cls({**self.options, **extra})

    def appearance(self, level: str, seed: int = 0) -> tuple[Sample, EditedSample]:
        sample = toy_sample(level=level)
        out = self.make().appearance(sample, self.value, sample.prompt,
                                     f"{sample.prompt}, {self.value}", np.random.default_rng(seed))
        return sample, out

    def geometry(self, seed: int = 0) -> tuple[Sample, EditedSample, EditedSample]:
        sample = toy_sample()
        moved = moved_right(sample)
        return sample, moved, self.make().geometry(sample, moved, np.random.default_rng(seed))

    def check_image(self, what: str, out: Any, shape: tuple[int, ...]) -> None:
        assert isinstance(out, EditedSample), f"{what} returned {type(out).__name__}"
        image = np.asarray(out.image)
        assert image.shape == shape and image.dtype == np.uint8, \
            f"{what}: image must be uint8 {shape}, got {image.dtype} {image.shape}"

    def test_declares_name_reference_and_options(self) -> None:
        cls = self.backend_cls
        assert isinstance(cls.name, str) and cls.name, "name must be a non-empty string"
        assert isinstance(cls.reference, str), "reference must be an editor's name or ''"
        params = cls.Params
        assert dataclasses.is_dataclass(params) and isinstance(params, type), \
            "Params must be a dataclass of the options the backend takes"
        missing = [f.name for f in dataclasses.fields(params)
                   if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
        assert not missing, f"options without a default: {missing}"
        assert set(declared(cls).params) == {f.name for f in dataclasses.fields(params) if f.init}

    def test_refuses_an_option_it_does_not_declare(self) -> None:
        with pytest.raises(SegtkError, match=UNKNOWN):
            self.make(**{UNKNOWN: "1"})
            pytest.fail(f"{self.backend_cls.name} took the option {UNKNOWN!r}: a backend must "
                        "refuse what it does not declare (a typo would run another method)")

    def test_appearance_keeps_label_and_mask_aligned(self) -> None:
        for level in ("object", "image"):
            sample, out = self.appearance(level)
            what = f"appearance ({level})"
            self.check_image(what, out, sample.image.shape)
            assert np.array_equal(out.label, sample.label), f"{what}: the label changed"
            assert np.array_equal(out.mask, sample.mask), f"{what}: the mask changed"

    def test_geometry_keeps_the_moved_label_and_mask(self) -> None:
        sample, moved, out = self.geometry()
        self.check_image("geometry", out, sample.image.shape)
        assert np.array_equal(out.label, moved.label), "geometry: the label is not the moved one"
        assert np.array_equal(out.mask, moved.mask), "geometry: the mask is not the moved one"

    def test_changes_the_image(self) -> None:
        if not self.expect_change:
            pytest.skip("expect_change = False")
        sample, out = self.appearance("object")
        _, moved, repainted = self.geometry()
        assert not np.array_equal(out.image, sample.image) or \
            not np.array_equal(repainted.image, moved.image), "no edit changed the image"

    def test_same_rng_same_edit(self) -> None:
        (_, a), (_, b) = self.appearance("object", seed=3), self.appearance("object", seed=3)
        assert np.array_equal(a.image, b.image) and a.metadata == b.metadata, \
            "appearance: same rng, different edits"
        (_, _, c), (_, _, d) = self.geometry(seed=3), self.geometry(seed=3)
        assert np.array_equal(c.image, d.image) and c.metadata == d.metadata, \
            "geometry: same rng, different edits"

    def test_leaves_its_inputs_untouched(self) -> None:
        sample, pristine = toy_sample(), toy_sample()
        self.make().appearance(sample, self.value, sample.prompt, sample.prompt,
                               np.random.default_rng(0))
        moved = moved_right(sample)
        before = [x.copy() for x in (moved.image, moved.label, moved.mask)]
        self.make().geometry(sample, moved, np.random.default_rng(0))
        for part in ("image", "label", "mask"):
            assert np.array_equal(getattr(sample, part), getattr(pristine, part)), \
                f"the backend modified the sample's {part}"
        assert all(np.array_equal(b, a) for b, a in zip(
            before, (moved.image, moved.label, moved.mask), strict=True)), \
            "geometry modified the moved sample"

    def test_metadata_is_json(self) -> None:
        for out in (self.appearance("object")[1], self.geometry()[2]):
            try:
                json.dumps(out.metadata, allow_nan=False)
            except (TypeError, ValueError) as exc:
                pytest.fail(f"metadata is not JSON ({exc}): {out.metadata!r}")
