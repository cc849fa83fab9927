"""The classical `material` editor meets the editor contract (segtk.testing.EditorSuite)."""

from __future__ import annotations

from segtk.testing import EditorSuite
from segtk_editor_material import MaterialEditor


class TestMaterialContract(EditorSuite):
    editor_cls = MaterialEditor
