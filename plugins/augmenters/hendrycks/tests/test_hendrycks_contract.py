"""The `hendrycks` augmenter meets the augmenter contract (segtk.testing.AugmenterSuite), at a
fixed severity and with the severity drawn per image."""

from __future__ import annotations

from segtk.testing import AugmenterSuite
from segtk_augment_hendrycks import Hendrycks


class TestHendrycksContract(AugmenterSuite):
    augmenter_cls = Hendrycks


class TestHendrycksDrawnSeverityContract(AugmenterSuite):
    augmenter_cls = Hendrycks
    params = {"severity": 0}
