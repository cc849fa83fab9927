"""segtk plugin: the `size` editor (classical or diffusion backend)."""

from segtk.core import hookimpl
from segtk_editor_size.editor import SizeEditor

__all__ = ["SizeEditor"]


@hookimpl
def register_editors(register) -> None:
    register(SizeEditor)
