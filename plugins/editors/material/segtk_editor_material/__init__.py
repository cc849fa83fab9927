"""segtk plugin: the `material` editor (procedural textures, classical or diffusion backend)."""

from segtk.core import hookimpl
from segtk_editor_material.editor import MaterialEditor

__all__ = ["MaterialEditor"]


@hookimpl
def register_editors(register) -> None:
    register(MaterialEditor)
