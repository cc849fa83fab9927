"""The `cutout` augmenter meets the augmenter contract (segtk.testing.AugmenterSuite)."""

from __future__ import annotations

from segtk.testing import AugmenterSuite
from segtk_augment_cutout import CutOut


class TestCutOutContract(AugmenterSuite):
    augmenter_cls = CutOut


class TestCutOutIgnoreContract(AugmenterSuite):
    augmenter_cls = CutOut
    params = {"label": "ignore", "holes": 2}
