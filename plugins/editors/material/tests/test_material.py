"""The `material` editor plugin: registered through its entry point, values documented, every
value edited within the appearance guarantee, its prompts."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from segtk.core import PluginError, registry
from segtk.testing import CAR_CLASSES, car_sample, car_scene
from segtk_editor_material import MaterialEditor

CLASSES = CAR_CLASSES
SKY, ROAD, CAR, TREE = range(4)
scene, sample = car_scene, car_sample


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def test_registered_under_its_name() -> None:
    assert registry.editor("material") is MaterialEditor
    assert MaterialEditor.name == MaterialEditor.attribute == "material"


def test_readme_documents_every_value_and_parameter() -> None:
    text = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    for value in MaterialEditor.values:
        assert f"`{value}`" in text, value
    for param in MaterialEditor.defaults:
        assert f"`{param}`" in text, param


def test_every_value_keeps_the_label_and_edits_only_what_it_may() -> None:
    editor = MaterialEditor()
    s = sample(level=MaterialEditor.level)
    for value in MaterialEditor.values:
        out = editor.edit(s, value, rng())
        assert out.label.dtype == s.label.dtype and np.array_equal(out.label, s.label), value
        assert np.array_equal(out.mask, s.mask) and out.value == value
        assert out.image.shape == s.image.shape and out.image.dtype == np.uint8
        changed = (out.image != s.image).any(axis=2)
        assert changed.any(), f"{value} changed nothing"
        if MaterialEditor.level == "object":
            assert not changed[~s.mask].any(), f"{value} leaked outside the mask"
            assert changed[s.mask].mean() > 0.5
        assert out.prompt and out.metadata["backend"] == "classical"



def test_values_and_prompts() -> None:
    assert {"wood", "metal", "stone", "marble", "glass", "fabric"} <= set(MaterialEditor.values)
    assert MaterialEditor.kind == "appearance"
    assert MaterialEditor().prompt(sample(), "wood") == "a photo of a car made of wood"
    assert MaterialEditor().check_value("steel") == "metal"
    with pytest.raises(PluginError, match="no value 'plaid'"):
        MaterialEditor().edit(sample(), "plaid", rng())
