"""The classical `color` editor meets the editor contract (segtk.testing.EditorSuite): the
contract, its registration under its name, and its README documenting every value and
parameter."""

from __future__ import annotations

from pathlib import Path

from segtk.testing import EditorSuite
from segtk_editor_color import ColorEditor


class TestColorContract(EditorSuite):
    editor_cls = ColorEditor
    readme = Path(__file__).resolve().parents[1] / "README.md"
    min_changed = 0.5  # every value changes more than half of the object's pixels
