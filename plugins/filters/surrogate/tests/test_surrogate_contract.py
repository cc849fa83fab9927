"""The surrogate pixel filter meets the filter contract (segtk.testing.FilterSuite), with the
tiny deterministic segmenter as its surrogate model."""

from __future__ import annotations

from segtk.testing import FilterSuite, TinySegmenter
from segtk_filter_surrogate import SurrogateFilter


class TestSurrogateContract(FilterSuite):
    filter_cls = SurrogateFilter
    params = {"model": TinySegmenter()}


class TestSurrogateCodeModeContract(FilterSuite):
    filter_cls = SurrogateFilter
    params = {"model": TinySegmenter(), "mode": "code", "margin": 1.1}
