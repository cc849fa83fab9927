"""The `weather` editor plugin: registered through its entry point, values documented."""

from __future__ import annotations

from pathlib import Path

from segtk.core import registry
from segtk_editor_weather import WeatherEditor


def test_registered_under_its_name() -> None:
    assert registry.editor("weather") is WeatherEditor
    assert WeatherEditor.name == WeatherEditor.attribute == "weather"


def test_readme_documents_every_value_and_parameter() -> None:
    text = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    for value in WeatherEditor.values:
        assert f"`{value}`" in text, value
    for param in WeatherEditor.defaults:
        assert f"`{param}`" in text, param
