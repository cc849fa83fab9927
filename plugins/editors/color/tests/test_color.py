"""The `color` editor plugin: its values, prompts and the shading it keeps. The editor contract,
its registration and its README are checked by segtk.testing.EditorSuite
(test_color_contract.py)."""

from __future__ import annotations

import numpy as np

from segtk.testing import car_sample
from segtk_editor_color import ColorEditor, rgb_to_oklab

sample = car_sample


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def test_values_and_prompts() -> None:
    assert {"red", "green", "blue", "yellow", "white", "black", "orange", "purple"} <= set(
        ColorEditor.values)
    assert ColorEditor.kind == "appearance"
    assert ColorEditor().prompt(sample(), "orange") == "a photo of an orange car"
    assert ColorEditor().edit(sample(), "red", rng()).prompt == "a photo of a red car"
    assert ColorEditor().check_value("Gray") == "grey"
    assert ColorEditor(strength="0.5").params["strength"] == 0.5  # CLI strings are read


def test_colour_keeps_shading_order() -> None:
    s = sample()
    out = ColorEditor().edit(s, "blue", rng())
    before, after = rgb_to_oklab(s.image[s.mask])[:, 0], rgb_to_oklab(out.image[s.mask])[:, 0]
    assert np.corrcoef(before, after)[0, 1] > 0.9  # lightness pattern (shading) survives
    hue = np.degrees(np.arctan2(*rgb_to_oklab(out.image[s.mask])[:, [2, 1]].T))
    assert np.median(np.abs(hue - (-90))) < 40  # OKLab blue is around -90..-70 degrees
