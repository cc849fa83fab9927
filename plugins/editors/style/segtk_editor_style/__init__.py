"""segtk plugin: the `style` editor (classical or diffusion backend)."""

from segtk.core import hookimpl
from segtk_editor_style.editor import StyleEditor

__all__ = ["StyleEditor"]


@hookimpl
def register_editors(register) -> None:
    register(StyleEditor)
