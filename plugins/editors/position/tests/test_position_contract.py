"""The classical `position` editor meets the editor contract (segtk.testing.EditorSuite)."""

from __future__ import annotations

from segtk.testing import EditorSuite
from segtk_editor_position import PositionEditor


class TestPositionContract(EditorSuite):
    editor_cls = PositionEditor
