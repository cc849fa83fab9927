"""The six classical editors: labels kept or moved exactly, pixels changed only where allowed,
determinism, and delegation to the diffusion backend (a fake one)."""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest

from segtk.core.editing import EditedSample, Sample, SkipSample, transform_object
from segtk.core.errors import PluginError
from segtk.core.samples import prepare_sample
from segtk_editor_color import ColorEditor
from segtk_editor_material import MaterialEditor
from segtk_editor_position import PositionEditor
from segtk_editor_size import SizeEditor
from segtk_editor_style import StyleEditor
from segtk_editor_weather import WeatherEditor

CLASSES = ["sky", "road", "car", "tree"]
SKY, ROAD, CAR, TREE = range(4)
APPEARANCE = [ColorEditor, MaterialEditor, StyleEditor, WeatherEditor]


def scene(h: int = 48, w: int = 64, car=(24, 30, 9, 13), classes=CLASSES) -> tuple[np.ndarray, np.ndarray]:
    """A smooth image; sky, road, a tree and an elliptic car (cy, cx, ry, rx)."""
    rng = np.random.default_rng(1)
    low = rng.integers(0, 256, (h // 8 + 1, w // 8 + 1, 3)).astype(np.float64)
    yy, xx = np.mgrid[0:h, 0:w]
    image = low[yy // 8, xx // 8] * 0.7 + rng.integers(0, 60, (h, w, 3))
    label = np.full((h, w), ROAD, np.int64)
    label[: h // 4] = SKY
    label[h // 4: h // 2, w - 8:] = TREE
    cy, cx, ry, rx = car
    car_px = ((yy - cy) / ry) ** 2 + ((xx - cx) / rx) ** 2 <= 1
    label[car_px] = CAR
    image[car_px] = image[car_px] * 0.5 + np.array([200, 40, 40]) * 0.5
    label[0, :3] = 255
    return image.clip(0, 255).astype(np.uint8), label


def sample(level: str = "object", classes=CLASSES, **kw) -> Sample:
    image, label = scene(**kw)
    s = prepare_sample("toy", image, label, classes, level=level, min_area=0.01)
    assert isinstance(s, Sample), s
    return s


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


@pytest.mark.parametrize("cls", APPEARANCE, ids=lambda c: c.name)
def test_appearance_keeps_label_and_edits_only_the_mask(cls) -> None:
    editor = cls()
    s = sample(level=cls.level)
    for value in cls.values:
        out = editor.edit(s, value, rng())
        assert out.label.dtype == s.label.dtype and np.array_equal(out.label, s.label), value
        assert np.array_equal(out.mask, s.mask) and out.value == value
        assert out.image.shape == s.image.shape and out.image.dtype == np.uint8
        changed = (out.image != s.image).any(axis=2)
        assert changed.any(), f"{cls.name}={value} changed nothing"
        if cls.level == "object":
            assert not changed[~s.mask].any(), f"{cls.name}={value} leaked outside the mask"
            assert changed[s.mask].mean() > 0.5
        assert out.prompt and out.metadata["backend"] == "classical"


@pytest.mark.parametrize("cls", APPEARANCE + [SizeEditor, PositionEditor], ids=lambda c: c.name)
def test_same_seed_same_edit(cls) -> None:
    s = sample(level=cls.level)
    value = cls.values[0]
    a, b = cls().edit(s, value, rng(7)), cls().edit(s, value, rng(7))
    assert np.array_equal(a.image, b.image) and np.array_equal(a.label, b.label)
    assert a.metadata == b.metadata


def test_colour_keeps_shading_order() -> None:
    from segtk_editor_color import rgb_to_oklab

    s = sample()
    out = ColorEditor().edit(s, "blue", rng())
    before, after = rgb_to_oklab(s.image[s.mask])[:, 0], rgb_to_oklab(out.image[s.mask])[:, 0]
    assert np.corrcoef(before, after)[0, 1] > 0.9  # lightness pattern (shading) survives
    hue = np.degrees(np.arctan2(*rgb_to_oklab(out.image[s.mask])[:, [2, 1]].T))
    assert np.median(np.abs(hue - (-90))) < 40  # OKLab blue is around -90..-70 degrees


def test_unknown_values_and_params_are_clear_errors() -> None:
    with pytest.raises(PluginError, match="no value 'plaid'"):
        MaterialEditor().edit(sample(), "plaid", rng())
    with pytest.raises(PluginError, match="unknown parameter 'bogus'"):
        ColorEditor(bogus=1)
    with pytest.raises(PluginError, match="not a number"):
        SizeEditor().edit(sample(), "big", rng())
    assert ColorEditor(strength="0.5").params["strength"] == 0.5  # CLI strings are coerced
    assert ColorEditor().check_value("Gray") == "grey"


# --- geometry ---------------------------------------------------------------------------------


def shifted(a: np.ndarray, dx: int, dy: int) -> np.ndarray:
    out = np.zeros_like(a)
    h, w = a.shape[:2]
    out[max(dy, 0):h + min(dy, 0), max(dx, 0):w + min(dx, 0)] = \
        a[max(-dy, 0):h - max(dy, 0), max(-dx, 0):w - max(dx, 0)]
    return out


def check_geometry(s: Sample, out: EditedSample, fill: int) -> None:
    new, old = out.mask, s.mask
    assert new.any() and new.shape == old.shape
    assert (out.label[new] == CAR).all()  # the object's label moved with it
    uncovered = old & ~new
    assert (out.label[uncovered] == fill).all()  # the uncovered area is ignore / background
    rest = ~(old | new)
    assert np.array_equal(out.label[rest], s.label[rest])  # nothing else relabelled
    assert np.array_equal(out.repaint, uncovered)


def test_position_moves_image_mask_and_label_exactly() -> None:
    s = sample()
    out = PositionEditor().edit(s, "0.2", rng(3))
    dx, dy = out.metadata["shift"]
    assert (dx, dy) != (0, 0) and out.metadata["scale"] == 1.0
    check_geometry(s, out, fill=255)
    assert np.array_equal(out.mask, shifted(s.mask, dx, dy))
    # the object's pixels and label are the source's, shifted by exactly (dx, dy)
    moved_img, moved_lab = shifted(s.image, dx, dy), shifted(s.label, dx, dy)
    assert np.array_equal(out.image[out.mask], moved_img[out.mask])
    assert np.array_equal(out.label[out.mask], moved_lab[out.mask])
    # away from the old and new object (and the inpainting's dilation ring) nothing changed
    import cv2

    ring = cv2.dilate(s.mask.astype(np.uint8), np.ones((7, 7), np.uint8)).astype(bool)
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


def test_size_shrinks_about_the_centre() -> None:
    s = sample()
    for value in ("0.4", "0.2"):
        out = SizeEditor().edit(s, value, rng())
        check_geometry(s, out, fill=255)
        x0, y0, x1, y1 = out.metadata["new_box"]
        ox0, oy0, ox1, oy1 = out.metadata["box"]
        assert x1 - x0 == round((ox1 - ox0) * float(value))
        assert abs((x0 + x1) - (ox0 + ox1)) <= 1 and abs((y0 + y1) - (oy0 + oy1)) <= 1
        assert 0 < out.mask.sum() < s.mask.sum() * float(value) ** 2 * 1.5


def test_size_anchor_bottom_keeps_the_ground_line() -> None:
    s = sample()
    out = SizeEditor(anchor="bottom").edit(s, "0.4", rng())
    assert out.metadata["new_box"][3] == out.metadata["box"][3]
    check_geometry(s, out, fill=255)


def test_objects_cut_by_the_border_stay_cut_by_it() -> None:
    s = sample(car=(24, 58, 9, 12))  # runs off the right edge
    w = s.mask.shape[1]
    out = SizeEditor().edit(s, "0.4", rng())
    x0, y0, x1, y1 = out.metadata["new_box"]
    assert x1 == w and out.mask[:, -1].any()  # shrunk towards the right border
    check_geometry(s, out, fill=255)
    centred = SizeEditor(border="ignore").edit(s, "0.4", rng())
    assert centred.metadata["new_box"][2] < w
    for seed in range(5):
        moved = PositionEditor().edit(s, "0.2", rng(seed))
        assert moved.metadata["shift"][0] == 0 and moved.mask[:, -1].any()  # moves along it
    free = {tuple(PositionEditor(border="ignore").edit(s, "0.2", rng(k)).metadata["shift"])
            for k in range(8)}
    assert any(dx != 0 for dx, _ in free)
    with pytest.raises(PluginError, match="border"):
        SizeEditor(border="maybe")


def test_repaint_methods() -> None:
    from segtk.core.editing import fill_rows

    image = np.repeat(np.arange(0, 240, 5, dtype=np.uint8)[:, None, None], 64, 1).repeat(3, 2)
    hole = np.zeros((48, 64), bool)
    hole[10:30, 20:40] = True
    assert np.array_equal(fill_rows(image, hole, rng(), grain=0.0), image)  # rows continue
    grainy = fill_rows(image, hole, rng(), grain=1.0)
    assert np.array_equal(grainy[~hole], image[~hole])
    s = sample()
    for method in ("rows", "telea", "ns"):
        out = SizeEditor(method=method).edit(s, "0.4", rng())
        check_geometry(s, out, fill=255)
    with pytest.raises(PluginError, match="method"):
        SizeEditor(method="magic")


def test_uncovered_area_gets_background_class_when_there_is_one() -> None:
    classes = ["background", "road", "car", "tree"]  # id 0 is a background class here
    s = sample(classes=classes)
    out = SizeEditor().edit(s, "0.4", rng())
    check_geometry(s, out, fill=0)
    out = SizeEditor(fill="ignore").edit(s, "0.4", rng())
    check_geometry(s, out, fill=255)
    out = SizeEditor(fill="road").edit(s, "0.4", rng())
    check_geometry(s, out, fill=ROAD)


def test_transform_object_resamples_labels_nearest() -> None:
    s = sample()
    s.label[s.mask & (np.arange(s.mask.shape[1])[None, :] < 30)] = TREE  # a two-class object
    out = transform_object(s, 0.5, (0, 0), 255)
    assert set(np.unique(out.label[out.mask]).tolist()) <= {CAR, TREE}  # no blended ids


# --- diffusion delegation ---------------------------------------------------------------------


class FakeBackend:
    def __init__(self, options):
        self.options, self.calls = options, []

    def appearance(self, sample, value, prompt_src, prompt_edit, rng):
        self.calls.append(("appearance", sample, value, prompt_src, prompt_edit))
        label = sample.label.copy()
        label[:] = 1  # a misbehaving backend: the editor must restore the label
        return EditedSample(255 - sample.image, label, sample.mask, value, metadata={"steps": 3})

    def geometry(self, sample, moved, rng):
        self.calls.append(("geometry", sample, moved))
        image = moved.image.copy()
        image[moved.repaint] = 7
        return EditedSample(image, moved.label, moved.mask, moved.value, metadata={"steps": 5})


@pytest.fixture
def fake_diffusion(monkeypatch):
    backends = []

    def get_backend(options):
        backends.append(FakeBackend(options))
        return backends[-1]

    monkeypatch.setitem(sys.modules, "segtk_diffusion", types.SimpleNamespace(get_backend=get_backend))
    return backends


def test_diffusion_appearance_delegates_with_prompts_and_mask(fake_diffusion) -> None:
    s = sample()
    editor = ColorEditor(backend="diffusion", model="sd15", steps="3")
    out = editor.edit(s, "red", rng())
    backend = fake_diffusion[0]
    assert backend.options == {"model": "sd15", "steps": "3"}
    kind, got, value, src, dst = backend.calls[0]
    assert (kind, value, src, dst) == ("appearance", "red", "a photo of a car", "a photo of a red car")
    assert np.array_equal(got.mask, s.mask)
    assert np.array_equal(out.label, s.label)  # restored
    assert np.array_equal(out.image[~s.mask], s.image[~s.mask])  # confined to the mask
    assert np.array_equal(out.image[s.mask], 255 - s.image[s.mask])
    assert out.metadata["backend"] == "diffusion" and out.metadata["steps"] == 3

    image_level = StyleEditor(backend="diffusion").edit(sample(level="image"), "sketch", rng())
    kind, got, *_ = fake_diffusion[1].calls[0]
    assert got.mask.all() and image_level.mask.all()


def test_diffusion_geometry_gets_the_rigid_transform(fake_diffusion) -> None:
    s = sample()
    out = SizeEditor(backend="diffusion").edit(s, "0.4", rng())
    kind, got, moved = fake_diffusion[0].calls[0]
    assert kind == "geometry" and got is s
    reference = SizeEditor().edit(s, "0.4", rng())
    assert np.array_equal(moved.mask, reference.mask) and np.array_equal(moved.label, reference.label)
    assert np.array_equal(out.label, reference.label)
    assert (out.image[reference.repaint] == 7).all()
    assert out.metadata["backend"] == "diffusion" and out.metadata["steps"] == 5


def test_diffusion_missing_says_what_to_install(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "segtk_diffusion", None)  # import fails
    with pytest.raises(PluginError, match="segtk-diffusion") as info:
        ColorEditor(backend="diffusion")
    assert "pip install" in info.value.hint

    def needs_diffusers(options):
        raise ModuleNotFoundError("No module named 'diffusers'", name="diffusers")

    monkeypatch.setitem(sys.modules, "segtk_diffusion", types.SimpleNamespace(get_backend=needs_diffusers))
    with pytest.raises(PluginError, match="diffusers") as info:
        SizeEditor(backend="diffusion")
    assert "pip install diffusers" in info.value.hint
    with pytest.raises(PluginError, match="unknown backend"):
        ColorEditor(backend="gan")
