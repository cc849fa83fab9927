"""The demo segmenter and the demo dataset reader meet their contracts (segtk.testing's
SegmenterSuite and DatasetSuite)."""

from __future__ import annotations

from pathlib import Path

from segtk.core import DatasetPlugin, Segmenter, registry
from segtk.testing import DatasetSuite, SegmenterSuite


class TestDemoContract(SegmenterSuite):
    def make(self) -> Segmenter:
        return registry.segmenter_plugin("demo").load("")


class TestDemoDataContract(DatasetSuite):
    """The shipped scenes."""

    def make(self) -> DatasetPlugin:
        return registry.dataset_plugin("demo")


class TestDemoFreshDataContract(TestDemoDataContract):
    """Scenes generated on demand (`--data demo:fresh=N,seed=S`)."""

    def arg(self, root: Path) -> str:
        return "fresh=3,seed=7"
