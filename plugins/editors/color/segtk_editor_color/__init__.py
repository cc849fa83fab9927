"""segtk plugin: the `color` editor (object colour in OKLab, classical or diffusion backend)."""

from segtk.core import hookimpl
from segtk_editor_color.editor import ColorEditor, oklab_to_rgb, rgb_to_oklab

__all__ = ["ColorEditor", "oklab_to_rgb", "rgb_to_oklab"]


@hookimpl
def register_editors(register) -> None:
    register(ColorEditor)
