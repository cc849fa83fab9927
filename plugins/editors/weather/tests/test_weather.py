"""The `weather` editor plugin: registered through its entry point, values documented, every
value edited within the appearance guarantee, its prompts."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from segtk.core import registry
from segtk.testing import CAR_CLASSES, car_sample, car_scene
from segtk_editor_weather import WeatherEditor

CLASSES = CAR_CLASSES
SKY, ROAD, CAR, TREE = range(4)
scene, sample = car_scene, car_sample


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def test_registered_under_its_name() -> None:
    assert registry.editor("weather") is WeatherEditor
    assert WeatherEditor.name == WeatherEditor.attribute == "weather"


def test_readme_documents_every_value_and_parameter() -> None:
    text = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    for value in WeatherEditor.values:
        assert f"`{value}`" in text, value
    for param in WeatherEditor.defaults:
        assert f"`{param}`" in text, param


def test_every_value_keeps_the_label_and_edits_only_what_it_may() -> None:
    editor = WeatherEditor()
    s = sample(level=WeatherEditor.level)
    for value in WeatherEditor.values:
        out = editor.edit(s, value, rng())
        assert out.label.dtype == s.label.dtype and np.array_equal(out.label, s.label), value
        assert np.array_equal(out.mask, s.mask) and out.value == value
        assert out.image.shape == s.image.shape and out.image.dtype == np.uint8
        changed = (out.image != s.image).any(axis=2)
        assert changed.any(), f"{value} changed nothing"
        if WeatherEditor.level == "object":
            assert not changed[~s.mask].any(), f"{value} leaked outside the mask"
            assert changed[s.mask].mean() > 0.5
        assert out.prompt and out.metadata["backend"] == "classical"



def test_values_and_prompts() -> None:
    assert set(WeatherEditor.values) == {"snow", "rain", "fog", "night"}
    assert (WeatherEditor.kind, WeatherEditor.level) == ("appearance", "image")
    scene_sample = sample(level="image")
    assert WeatherEditor().prompt(scene_sample, "night") == \
        "a photo of a scene with road, sky and car at night"
    assert WeatherEditor().prompt(scene_sample, "fog").endswith("in thick fog")
