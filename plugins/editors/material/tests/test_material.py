"""The `material` editor plugin: its values and prompts. The editor contract, its registration and
its README are checked by segtk.testing.EditorSuite (test_material_contract.py)."""

from __future__ import annotations

import numpy as np
import pytest

from segtk.core import PluginError
from segtk.testing import car_sample
from segtk_editor_material import MaterialEditor

sample = car_sample


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def test_values_and_prompts() -> None:
    assert {"wood", "metal", "stone", "marble", "glass", "fabric"} <= set(MaterialEditor.values)
    assert MaterialEditor.kind == "appearance"
    assert MaterialEditor().prompt(sample(), "wood") == "a photo of a car made of wood"
    assert MaterialEditor().check_value("steel") == "metal"
    with pytest.raises(PluginError, match="no value 'plaid'"):
        MaterialEditor().edit(sample(), "plaid", rng())
