"""The `cutmix` augmenter meets the augmenter contract (segtk.testing.AugmenterSuite)."""

from __future__ import annotations

from segtk.testing import AugmenterSuite
from segtk_augment_cutmix import CutMix


class TestCutMixContract(AugmenterSuite):
    augmenter_cls = CutMix


class TestCutMixEveryImageContract(AugmenterSuite):
    augmenter_cls = CutMix
    params = {"p": 1.0}
