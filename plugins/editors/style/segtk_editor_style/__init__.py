"""segtk plugin: the `style` editor (classical or diffusion backend)."""

from segtk.core.hookspecs import hookimpl
from segtk_editor_style.editor import StyleEditor

__all__ = ["StyleEditor"]


@hookimpl
def register_editors(register) -> None:
    register(StyleEditor)
