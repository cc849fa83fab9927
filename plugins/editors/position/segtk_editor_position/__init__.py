"""segtk plugin: the `position` editor (classical or diffusion backend)."""

from segtk.core import hookimpl
from segtk_editor_position.editor import PositionEditor

__all__ = ["PositionEditor"]


@hookimpl
def register_editors(register) -> None:
    register(PositionEditor)
