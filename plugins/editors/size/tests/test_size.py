"""The `size` editor plugin: registered through its entry point, values documented."""

from __future__ import annotations

from pathlib import Path

from segtk.core import registry
from segtk_editor_size import SizeEditor


def test_registered_under_its_name() -> None:
    assert registry.editor("size") is SizeEditor
    assert SizeEditor.name == SizeEditor.attribute == "size"


def test_readme_documents_every_value_and_parameter() -> None:
    text = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    for value in SizeEditor.values:
        assert f"`{value}`" in text, value
    for param in SizeEditor.defaults:
        assert f"`{param}`" in text, param
