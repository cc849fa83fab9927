"""The metric contract suite: what `segtk.core.Metric` promises, checked on edits of toy
scenes (unchanged, the object recoloured, the image scrambled by noise).

    from segtk.testing import MetricSuite

    class TestMyMetric(MetricSuite):
        metric_cls = MyMetric          # a Metric subclass (what the plugin registers)
        params = {"model": "path"}     # optional options (as --metric-param NAME.KEY=VALUE)

Checks: `name`, `better` ("lower" or "higher") and a column heading declared; `measure` returns
a MetricResult with a finite `value` and, for a per-image metric, one finite number per pair
whose mean is the value (a set metric, `per_image` False, has none); the same pairs give the
same numbers, also from a second metric built alike; the inputs are left untouched; a key the
metric does not declare is refused; and for a distance (`better` "lower"), unchanged images
score no worse than any edit of them, and strictly better than noise.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np
import pytest

from segtk.core import Metric, MetricResult, PluginError, QualityPair
from segtk.testing.fakes import toy_sample

BETTER = ("lower", "higher")


def toy_pairs(edit: str, n: int = 3) -> list[QualityPair]:
    """`n` toy scenes (seeds 0..n-1) and their `edit`: "unchanged", "recoloured" (the car's
    RGB reversed) or "noise" (the image replaced by uniform noise)."""
    pairs = []
    for seed in range(n):
        sample = toy_sample(seed=seed)
        edited = sample.image.copy()
        if edit == "recoloured":
            edited[sample.mask] = edited[sample.mask][:, ::-1]
        elif edit == "noise":
            edited = np.random.default_rng(seed).integers(0, 256, edited.shape, dtype=np.uint8)
        elif edit != "unchanged":
            raise ValueError(edit)
        pairs.append(QualityPair(sample.image, edited, sample.mask, sample.prompt,
                                 "a photo of a red car"))
    return pairs


EDITS = ("unchanged", "recoloured", "noise")


class MetricSuite:
    """Subclass as `TestSomething` with `metric_cls` set; pytest collects the checks."""

    metric_cls: ClassVar[type[Metric]]
    # Not a ClassVar: set on the class, or per test (`self.params = ...` in an autouse fixture)
    # where it names a file only known then.
    params: dict[str, Any] = {}

    def make(self) -> Metric:
        return self.metric_cls(dict(self.params))

    def results(self, metric: Metric) -> dict[str, MetricResult]:
        return {edit: metric.measure(toy_pairs(edit)) for edit in EDITS}

    def test_declares_name_direction_and_column(self) -> None:
        cls = self.metric_cls
        assert isinstance(cls.name, str) and cls.name, "name must be a non-empty string"
        assert cls.better in BETTER, f"better must be one of {BETTER}, got {cls.better!r}"
        column = self.make().column()
        assert isinstance(column, str) and column.strip(), f"empty column heading {column!r}"

    def test_measure_gives_finite_numbers(self) -> None:
        metric = self.make()
        for edit, result in self.results(metric).items():
            assert isinstance(result, MetricResult), f"{edit}: measure gave {type(result).__name__}"
            assert math.isfinite(result.value), f"{edit}: value {result.value!r}"
            if not metric.per_image:
                assert result.per_image is None, f"{edit}: a set metric has no per-image numbers"
                continue
            assert result.per_image is not None and len(result.per_image) == 3, \
                f"{edit}: expected 3 per-image numbers, got {result.per_image!r}"
            assert all(math.isfinite(x) for x in result.per_image), f"{edit}: {result.per_image}"
            assert result.value == pytest.approx(float(np.mean(result.per_image))), \
                f"{edit}: a per-image metric's value is the mean of its numbers"

    def test_same_pairs_same_numbers(self) -> None:
        first, second = self.make(), self.make()
        once, again, other = self.results(first), self.results(first), self.results(second)
        for edit in EDITS:
            assert once[edit] == again[edit], f"{edit}: measured twice, two answers"
            assert once[edit] == other[edit], f"{edit}: a second metric built alike differs"

    def test_leaves_its_inputs_untouched(self) -> None:
        metric = self.make()
        for edit in EDITS:
            pairs = toy_pairs(edit)
            before = [(p.original.copy(), p.edited.copy(), p.mask.copy()) for p in pairs]
            metric.measure(pairs)
            for (o, e, m), p in zip(before, pairs, strict=True):
                assert np.array_equal(o, p.original) and np.array_equal(e, p.edited) \
                    and np.array_equal(m, p.mask), f"{edit}: measure modified a pair"

    def test_refuses_an_unknown_parameter(self) -> None:
        with pytest.raises(PluginError, match="unknown parameter 'no_such_key'"):
            self.metric_cls({**self.params, "no_such_key": "1"})

    def test_a_distance_is_least_for_unchanged_images(self) -> None:
        metric = self.make()
        if metric.better != "lower":
            pytest.skip("a higher-is-better metric has no identity to check")
        results = self.results(metric)
        same = results["unchanged"].value
        assert same <= results["recoloured"].value, "unchanged images score worse than an edit"
        assert same < results["noise"].value, "unchanged images score no better than noise"
