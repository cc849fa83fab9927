"""segtk plugin: the `weather` editor (classical or diffusion backend)."""

from segtk.core import hookimpl
from segtk_editor_weather.editor import WeatherEditor

__all__ = ["WeatherEditor"]


@hookimpl
def register_editors(register) -> None:
    register(WeatherEditor)
