"""The `edits` augmenter meets the augmenter contract (segtk.testing.AugmenterSuite), editing
the batch on the fly with an appearance and a geometry editor."""

from __future__ import annotations

from segtk.testing import AugmenterSuite
from segtk_augment_edits import Edits


class TestEditsContract(AugmenterSuite):
    augmenter_cls = Edits
    params = {"editor": "color;size", "p": 1.0, "min_area": 0.05}
    # `size` labels the area the shrunk object uncovered as background and repaints it from
    # its surroundings (the editor contract): those pixels may show a neighbour's colour.
    tolerance = 0.05


class TestEditsAppearanceContract(AugmenterSuite):
    augmenter_cls = Edits
    params = {"editor": "color", "p": 1.0, "min_area": 0.05}
    tolerance = 0.0
