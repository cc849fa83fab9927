"""The `size` editor plugin: its values and prompts; each side shrunk by a drawn share, the
uncovered area labelled and repainted. The editor contract, its registration and its README are
checked by segtk.testing.EditorSuite (test_size_contract.py)."""

from __future__ import annotations

import numpy as np
import pytest

from segtk.core import PluginError
from segtk.testing import CAR_CLASSES, car_sample, check_geometry
from segtk_editor_size import SizeEditor
from segtk_editor_size.editor import draw_scales

ROAD = CAR_CLASSES.index("road")
sample = car_sample


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def test_values_and_prompts() -> None:
    assert SizeEditor.values == ("0.2", "0.4") and SizeEditor.kind == "geometry"
    assert SizeEditor().prompt(sample(), "0.4") == "a photo of a smaller car"
    assert SizeEditor().check_value("0.40") == "0.4"
    with pytest.raises(PluginError, match="not a number"):
        SizeEditor().edit(sample(), "big", rng())


def test_size_shrinks_each_side_by_a_share_drawn_from_half_to_the_level() -> None:
    s = sample()
    ox0, oy0, ox1, oy1 = SizeEditor().edit(s, "0.2", rng()).metadata["box"]
    for value in ("0.2", "0.4"):
        v = float(value)
        for seed in range(6):
            out = SizeEditor().edit(s, value, rng(seed))
            check_geometry(s, out, fill=255)
            ex, ey = out.metadata["scale"]
            assert 1 - v <= ex <= 1 - v / 2 and 1 - v <= ey <= 1 - v / 2, (value, ex, ey)
            x0, y0, x1, y1 = out.metadata["new_box"]
            assert x1 - x0 == max(1, round((ox1 - ox0) * ex))
            assert y1 - y0 == max(1, round((oy1 - oy0) * ey))
            assert abs((x0 + x1) - (ox0 + ox1)) <= 1 and abs((y0 + y1) - (oy0 + oy1)) <= 1
            assert 0 < out.mask.sum() < s.mask.sum()


def test_e_x_and_e_y_are_drawn_separately_from_the_samples_stream() -> None:
    s = sample()
    draws = [tuple(SizeEditor().edit(s, "0.4", rng(seed)).metadata["scale"]) for seed in range(8)]
    assert any(ex != ey for ex, ey in draws)  # Eq. 8: two random factors, not one
    assert len(set(draws)) == len(draws)  # the seed moves them
    assert draw_scales(0.4, rng(3)) == tuple(SizeEditor().edit(s, "0.4", rng(3)).metadata["scale"])


def test_size_levels_are_their_own_subsets_and_bounded() -> None:
    assert SizeEditor.levels
    assert SizeEditor().check_value("0.95") == "0.95"
    with pytest.raises(PluginError, match="not a number in"):
        SizeEditor().check_value("1")


def test_size_anchor_bottom_keeps_the_ground_line() -> None:
    s = sample()
    out = SizeEditor(anchor="bottom").edit(s, "0.4", rng())
    assert out.metadata["new_box"][3] == out.metadata["box"][3]
    check_geometry(s, out, fill=255)
    with pytest.raises(PluginError, match="anchor"):
        SizeEditor(anchor="top")


def test_objects_cut_by_the_border_stay_cut_by_it() -> None:
    s = sample(car=(24, 58, 9, 12))  # runs off the right edge
    w = s.mask.shape[1]
    out = SizeEditor().edit(s, "0.4", rng())
    x0, y0, x1, y1 = out.metadata["new_box"]
    assert x1 == w and out.mask[:, -1].any()  # shrunk towards the right border
    check_geometry(s, out, fill=255)
    centred = SizeEditor(border="ignore").edit(s, "0.4", rng())
    assert centred.metadata["new_box"][2] < w


def test_repaint_methods_and_fill() -> None:
    s = sample()
    for method in ("rows", "telea", "ns"):
        check_geometry(s, SizeEditor(method=method).edit(s, "0.4", rng()), fill=255)
    background = sample(classes=["background", "road", "car", "tree"])
    check_geometry(background, SizeEditor().edit(background, "0.4", rng()), fill=0)
    check_geometry(background, SizeEditor(fill="road").edit(background, "0.4", rng()), fill=ROAD)
