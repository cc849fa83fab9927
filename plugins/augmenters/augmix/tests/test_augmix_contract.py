"""The `augmix` augmenter meets the augmenter contract (segtk.testing.AugmenterSuite)."""

from __future__ import annotations

from segtk.testing import AugmenterSuite
from segtk_augment_augmix import AugMix


class TestAugMixContract(AugmenterSuite):
    augmenter_cls = AugMix
