"""The filter contract suite: what `segtk.core.Filter` promises, checked on edits of
the toy scene (unchanged, the object recoloured, the image scrambled by noise).

    from segtk.testing import FilterSuite

    class TestMyFilter(FilterSuite):
        filter_cls = MyFilter          # a Filter subclass (what the plugin registers)
        params = {"threshold": 0.3}    # optional constructor arguments

Checks: `name` and a `stage` ("sample" or "pixel") declared; `apply` returns a FilterResult with
a bool `keep` and finite float scores; a label, where given (pixel filters always give one), has
the edited label's size and differs from it only by pixels set to ignore; the same inputs give
the same keep, scores and label, also from a second filter built alike; the inputs are left
untouched; and it rejects something of a bad edit (keep False, or pixels set to ignore): a
filter that rejects nothing filters nothing. The bad edit is the toy scene scrambled by loud
noise unless the suite overrides `bad_edit` with an edit the filter is meant to refuse. A
filter with `prepare(dataset, cache_dir)` is prepared on `toy_dataset()` first, as `segtk
edit` prepares it on the source dataset.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from segtk.core import EditedSample, Filter, FilterResult, Sample
from segtk.testing.fakes import toy_dataset, toy_sample

STAGES = ("sample", "pixel")


class FilterSuite:
    """Subclass as `TestSomething` with `filter_cls` set; pytest collects the checks."""

    filter_cls: ClassVar[type[Filter]]
    params: ClassVar[dict[str, Any]] = {}

    def make(self, cache_dir: Path) -> Filter:
        """The filter, prepared on the toy dataset if it has `prepare`."""
        flt = self.filter_cls(**self.params)
        if hasattr(flt, "prepare"):
            flt.prepare(toy_dataset(), cache_dir)
        return flt

    def cases(self) -> list[tuple[str, Sample, EditedSample]]:
        """(what, source, edit) pairs: an unchanged copy, a recoloured object, loud noise."""
        sample = toy_sample()
        recoloured = sample.image.copy()
        recoloured[sample.mask] = recoloured[sample.mask][:, ::-1]  # RGB -> BGR
        noise = np.random.default_rng(0).integers(0, 256, sample.image.shape, dtype=np.uint8)
        images = {"unchanged": sample.image, "recoloured": recoloured, "noise": noise}
        return [(what, toy_sample(), EditedSample(image.copy(), sample.label.copy(),
                                                  sample.mask.copy(), what))
                for what, image in images.items()]

    def bad_edit(self) -> tuple[Sample, EditedSample]:
        """(source, edit) this filter must reject, at least in part. Default: the noise case;
        override it with an edit your filter is meant to refuse (e.g. a darkened object)."""
        return next((sample, edited) for what, sample, edited in self.cases() if what == "noise")

    def test_declares_name_and_stage(self) -> None:
        cls = self.filter_cls
        assert isinstance(cls.name, str) and cls.name, "name must be a non-empty string"
        assert cls.stage in STAGES, f"stage must be one of {STAGES}, got {cls.stage!r}"

    def test_result_keep_scores_and_label(self, tmp_path: Path) -> None:
        flt = self.make(tmp_path)
        for what, sample, edited in self.cases():
            result = flt.apply(sample, edited)
            assert isinstance(result, FilterResult), f"{what}: apply returned {type(result).__name__}"
            assert isinstance(result.keep, bool), f"{what}: keep must be a bool, got {result.keep!r}"
            assert isinstance(result.scores, dict), f"{what}: scores must be a dict"
            for key, score in result.scores.items():
                assert isinstance(key, str), f"{what}: score name {key!r} is not a string"
                assert isinstance(score, int | float) and not isinstance(score, bool) \
                    and math.isfinite(score), f"{what}: score {key}={score!r} is not a finite number"
            if flt.stage == "pixel":
                assert result.label is not None, f"{what}: a pixel filter must return the label"
            if result.label is not None:
                self.check_label(what, np.asarray(result.label), sample, edited)

    def check_label(self, what: str, label: np.ndarray, sample: Sample,
                    edited: EditedSample) -> None:
        """Same size as the edited label; only pixels turned to ignore differ."""
        assert label.shape == edited.label.shape, \
            f"{what}: label {label.shape}, expected {edited.label.shape}"
        assert np.issubdtype(label.dtype, np.integer), f"{what}: label dtype {label.dtype}"
        ignore = sample.ignore_index
        valid = (label == ignore) | ((label >= 0) & (label < len(sample.classes)))
        assert valid.all(), f"{what}: label ids {sorted(set(label[~valid].tolist()))} are " \
                            f"neither classes nor ignore ({ignore})"
        changed = label != edited.label
        assert (label[changed] == ignore).all(), \
            f"{what}: the filter relabelled {int((changed & (label != ignore)).sum())} pixels " \
            "to another class (it may only set rejected pixels to ignore)"

    def test_same_inputs_same_decision(self, tmp_path: Path) -> None:
        first, second = self.make(tmp_path / "a"), self.make(tmp_path / "b")
        for what, sample, edited in self.cases():
            results = [first.apply(sample, edited), first.apply(sample, edited),
                       second.apply(sample, edited)]
            for other in results[1:]:
                assert other.keep == results[0].keep, f"{what}: keep changed between calls"
                assert other.scores == results[0].scores, f"{what}: scores changed between calls"
                a, b = results[0].label, other.label
                same = a is None if b is None else a is not None and np.array_equal(a, b)
                assert same, f"{what}: label changed between calls"

    def test_leaves_its_inputs_untouched(self, tmp_path: Path) -> None:
        flt = self.make(tmp_path)
        for what, sample, edited in self.cases():
            before = [x.copy() for x in (sample.image, sample.label, sample.mask,
                                         edited.image, edited.label, edited.mask)]
            flt.apply(sample, edited)
            after = (sample.image, sample.label, sample.mask, edited.image, edited.label, edited.mask)
            assert all(np.array_equal(b, a) for b, a in zip(before, after, strict=True)), \
                f"{what}: apply modified the source or the edit"

    def test_rejects_something_of_a_bad_edit(self, tmp_path: Path) -> None:
        sample, edited = self.bad_edit()
        result = self.make(tmp_path).apply(sample, edited)
        ignore = sample.ignore_index
        dropped = 0 if result.label is None else \
            int(((np.asarray(result.label) == ignore) & (edited.label != ignore)).sum())
        assert not result.keep or dropped > 0, \
            f"{self.filter_cls.name} rejected nothing of the bad edit: it kept the sample and " \
            "every labelled pixel (override bad_edit() with an edit the filter should refuse)"
