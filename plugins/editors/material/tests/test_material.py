"""The `material` editor plugin: registered through its entry point, values documented."""

from __future__ import annotations

from pathlib import Path

from segtk.core import registry
from segtk_editor_material import MaterialEditor


def test_registered_under_its_name() -> None:
    assert registry.editor("material") is MaterialEditor
    assert MaterialEditor.name == MaterialEditor.attribute == "material"


def test_readme_documents_every_value_and_parameter() -> None:
    text = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    for value in MaterialEditor.values:
        assert f"`{value}`" in text, value
    for param in MaterialEditor.defaults:
        assert f"`{param}`" in text, param
