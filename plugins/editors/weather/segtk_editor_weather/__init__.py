"""segtk plugin: the `weather` editor (classical or diffusion backend)."""

from segtk.core.hookspecs import hookimpl
from segtk_editor_weather.editor import WeatherEditor

__all__ = ["WeatherEditor"]


@hookimpl
def register_editors(register) -> None:
    register(WeatherEditor)
