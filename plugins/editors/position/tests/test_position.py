"""The `position` editor plugin: its values and prompts; image, mask and label moved together
exactly, the object kept inside or the sample skipped. The editor contract, its registration and
its README are checked by segtk.testing.EditorSuite (test_position_contract.py)."""

from __future__ import annotations

import numpy as np
import pytest

from segtk.core import PluginError, SkipSample
from segtk.testing import car_sample, check_geometry, shifted
from segtk_editor_position import PositionEditor

sample = car_sample


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def test_values_and_prompts() -> None:
    assert PositionEditor.values == ("0.2", "0.4") and PositionEditor.kind == "geometry"
    assert PositionEditor().prompt(sample(), "0.2") == "a photo of a car in another place"
    with pytest.raises(PluginError, match="not a number"):
        PositionEditor().check_value("1.5")
    with pytest.raises(PluginError, match="direction"):
        PositionEditor(direction="diagonal")


def test_position_moves_image_mask_and_label_exactly() -> None:
    s = sample()
    out = PositionEditor().edit(s, "0.2", rng(3))
    dx, dy = out.metadata["shift"]
    assert (dx, dy) != (0, 0) and out.metadata["scale"] == [1.0, 1.0]
    check_geometry(s, out, fill=255)
    assert np.array_equal(out.mask, shifted(s.mask, dx, dy))
    # the object's pixels and label are the source's, shifted by exactly (dx, dy)
    moved_img, moved_lab = shifted(s.image, dx, dy), shifted(s.label, dx, dy)
    assert np.array_equal(out.image[out.mask], moved_img[out.mask])
    assert np.array_equal(out.label[out.mask], moved_lab[out.mask])
    # away from the old and new object (and the repaint's dilation ring) nothing changed
    ring = np.zeros_like(s.mask)
    for dy_ in range(-3, 4):
        for dx_ in range(-3, 4):
            ring |= shifted(s.mask, dx_, dy_)
    far = ~(ring | out.mask)
    assert np.array_equal(out.image[far], s.image[far])
    assert not np.array_equal(out.image[s.mask & ~out.mask], s.image[s.mask & ~out.mask])


def test_position_keeps_the_object_inside_or_skips() -> None:
    s = sample(car=(24, 32, 6, 8))
    for seed in range(6):
        out = PositionEditor().edit(s, "0.4", rng(seed))
        assert out.mask.sum() == s.mask.sum()  # moved whole: nothing cut by the border
    big = sample(car=(24, 32, 14, 20))  # 41 x 29 px in 64 x 48: 0.4 of the image fits nowhere
    with pytest.raises(SkipSample) as info:
        PositionEditor().edit(big, "0.4", rng())
    assert info.value.reason == "no-room"
    horizontal = PositionEditor(direction="horizontal").edit(s, "0.2", rng(1))
    assert horizontal.metadata["shift"][1] == 0


def test_objects_cut_by_the_border_move_along_it() -> None:
    s = sample(car=(24, 58, 9, 12))  # runs off the right edge
    for seed in range(5):
        moved = PositionEditor().edit(s, "0.2", rng(seed))
        assert moved.metadata["shift"][0] == 0 and moved.mask[:, -1].any()  # moves along it
        check_geometry(s, moved, fill=255)
    free = {tuple(PositionEditor(border="ignore").edit(s, "0.2", rng(k)).metadata["shift"])
            for k in range(8)}
    assert any(dx != 0 for dx, _ in free)
