"""The `color` editor plugin: registered through its entry point, values documented, every
value edited within the appearance guarantee, its prompts."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from segtk.core import registry
from segtk.testing import CAR_CLASSES, car_sample, car_scene
from segtk_editor_color import ColorEditor, rgb_to_oklab

CLASSES = CAR_CLASSES
SKY, ROAD, CAR, TREE = range(4)
scene, sample = car_scene, car_sample


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def test_registered_under_its_name() -> None:
    assert registry.editor("color") is ColorEditor
    assert ColorEditor.name == ColorEditor.attribute == "color"


def test_readme_documents_every_value_and_parameter() -> None:
    text = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    for value in ColorEditor.values:
        assert f"`{value}`" in text, value
    for param in ColorEditor.defaults:
        assert f"`{param}`" in text, param


def test_every_value_keeps_the_label_and_edits_only_what_it_may() -> None:
    editor = ColorEditor()
    s = sample(level=ColorEditor.level)
    for value in ColorEditor.values:
        out = editor.edit(s, value, rng())
        assert out.label.dtype == s.label.dtype and np.array_equal(out.label, s.label), value
        assert np.array_equal(out.mask, s.mask) and out.value == value
        assert out.image.shape == s.image.shape and out.image.dtype == np.uint8
        changed = (out.image != s.image).any(axis=2)
        assert changed.any(), f"{value} changed nothing"
        if ColorEditor.level == "object":
            assert not changed[~s.mask].any(), f"{value} leaked outside the mask"
            assert changed[s.mask].mean() > 0.5
        assert out.prompt and out.metadata["backend"] == "classical"



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
