"""The classical `style` editor meets the editor contract (segtk.testing.EditorSuite)."""

from __future__ import annotations

from segtk.testing import EditorSuite
from segtk_editor_style import StyleEditor


class TestStyleContract(EditorSuite):
    editor_cls = StyleEditor
