"""The classical `size` editor meets the editor contract (segtk.testing.EditorSuite)."""

from __future__ import annotations

from segtk.testing import EditorSuite
from segtk_editor_size import SizeEditor


class TestSizeContract(EditorSuite):
    editor_cls = SizeEditor
