"""The `style` editor plugin: registered through its entry point, values documented, every
value edited within the appearance guarantee, its prompts."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from segtk.core import registry
from segtk.testing import CAR_CLASSES, car_sample, car_scene
from segtk_editor_style import StyleEditor

CLASSES = CAR_CLASSES
SKY, ROAD, CAR, TREE = range(4)
scene, sample = car_scene, car_sample


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def test_registered_under_its_name() -> None:
    assert registry.editor("style") is StyleEditor
    assert StyleEditor.name == StyleEditor.attribute == "style"


def test_readme_documents_every_value_and_parameter() -> None:
    text = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    for value in StyleEditor.values:
        assert f"`{value}`" in text, value
    for param in StyleEditor.defaults:
        assert f"`{param}`" in text, param


def test_every_value_keeps_the_label_and_edits_only_what_it_may() -> None:
    editor = StyleEditor()
    s = sample(level=StyleEditor.level)
    for value in StyleEditor.values:
        out = editor.edit(s, value, rng())
        assert out.label.dtype == s.label.dtype and np.array_equal(out.label, s.label), value
        assert np.array_equal(out.mask, s.mask) and out.value == value
        assert out.image.shape == s.image.shape and out.image.dtype == np.uint8
        changed = (out.image != s.image).any(axis=2)
        assert changed.any(), f"{value} changed nothing"
        if StyleEditor.level == "object":
            assert not changed[~s.mask].any(), f"{value} leaked outside the mask"
            assert changed[s.mask].mean() > 0.5
        assert out.prompt and out.metadata["backend"] == "classical"



def test_values_and_prompts() -> None:
    assert {"painting", "sketch", "cartoon", "watercolour"} <= set(StyleEditor.values)
    assert (StyleEditor.kind, StyleEditor.level) == ("appearance", "image")
    scene_sample = sample(level="image")
    assert scene_sample.prompt == "a photo of a scene with road, sky and car"
    assert StyleEditor().prompt(scene_sample, "watercolour") == \
        "a watercolour painting of a scene with road, sky and car"
    assert StyleEditor().prompt(scene_sample, "oil").startswith("an oil painting of a scene")
    assert StyleEditor().check_value("watercolor") == "watercolour"
