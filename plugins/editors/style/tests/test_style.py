"""The `style` editor plugin: its values and prompts. The editor contract, its registration and its
README are checked by segtk.testing.EditorSuite (test_style_contract.py)."""

from __future__ import annotations

from segtk.testing import car_sample
from segtk_editor_style import StyleEditor

sample = car_sample


def test_values_and_prompts() -> None:
    assert {"painting", "sketch", "cartoon", "watercolour"} <= set(StyleEditor.values)
    assert (StyleEditor.kind, StyleEditor.level) == ("appearance", "image")
    scene_sample = sample(level="image")
    assert scene_sample.prompt == "a photo of a scene with road, sky and car"
    assert StyleEditor().prompt(scene_sample, "watercolour") == \
        "a watercolour painting of a scene with road, sky and car"
    assert StyleEditor().prompt(scene_sample, "oil").startswith("an oil painting of a scene")
    assert StyleEditor().check_value("watercolor") == "watercolour"
