"""The `weather` editor plugin: its values and prompts. The editor contract, its registration and
its README are checked by segtk.testing.EditorSuite (test_weather_contract.py)."""

from __future__ import annotations

from segtk.testing import car_sample
from segtk_editor_weather import WeatherEditor

sample = car_sample


def test_values_and_prompts() -> None:
    assert set(WeatherEditor.values) == {"snow", "rain", "fog", "night"}
    assert (WeatherEditor.kind, WeatherEditor.level) == ("appearance", "image")
    scene_sample = sample(level="image")
    assert WeatherEditor().prompt(scene_sample, "night") == \
        "a photo of a scene with road, sky and car at night"
    assert WeatherEditor().prompt(scene_sample, "fog").endswith("in thick fog")
