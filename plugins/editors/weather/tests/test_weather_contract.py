"""The classical `weather` editor meets the editor contract (segtk.testing.EditorSuite): the
contract, its registration under its name, and its README documenting every value and
parameter."""

from __future__ import annotations

from pathlib import Path

from segtk.testing import EditorSuite
from segtk_editor_weather import WeatherEditor


class TestWeatherContract(EditorSuite):
    editor_cls = WeatherEditor
    readme = Path(__file__).resolve().parents[1] / "README.md"
    min_changed = 0.0  # every value changes some of the scene's pixels
