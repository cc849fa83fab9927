"""The demo segmenter meets the segmenter contract (segtk.testing.SegmenterSuite)."""

from __future__ import annotations

from segtk.core import Segmenter, registry
from segtk.testing import SegmenterSuite


class TestDemoContract(SegmenterSuite):
    def make(self) -> Segmenter:
        return registry.segmenter_plugin("demo").load("")
