"""The classical `color` editor meets the editor contract (segtk.testing.EditorSuite)."""

from __future__ import annotations

from segtk.testing import EditorSuite
from segtk_editor_color import ColorEditor


class TestColorContract(EditorSuite):
    editor_cls = ColorEditor
