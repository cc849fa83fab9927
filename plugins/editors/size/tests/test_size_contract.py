"""The classical `size` editor meets the editor contract (segtk.testing.EditorSuite): the
contract, its registration under its name, and its README documenting every value and
parameter."""

from __future__ import annotations

from pathlib import Path

from segtk.testing import EditorSuite
from segtk_editor_size import SizeEditor


class TestSizeContract(EditorSuite):
    editor_cls = SizeEditor
    readme = Path(__file__).resolve().parents[1] / "README.md"
