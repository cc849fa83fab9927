"""The classical `weather` editor meets the editor contract (segtk.testing.EditorSuite)."""

from __future__ import annotations

from segtk.testing import EditorSuite
from segtk_editor_weather import WeatherEditor


class TestWeatherContract(EditorSuite):
    editor_cls = WeatherEditor
