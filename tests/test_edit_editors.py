"""The editing kit (segtk.core: AttributeEditor, GeometryEditor) with toy editors defined here, no editor plugin: the
appearance guarantee, geometry moving image, mask and label together, repainting, checked
values and parameters, and backends and prompt writers found through their hooks (fakes
registered in-process). The bundled editors' own behaviour is tested in their plugins."""

from __future__ import annotations

import types
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pytest

from segtk.benchmarks.edits import reference_editor
from segtk.core import (
    EditBackend,
    EditedSample,
    PluginError,
    PromptWriter,
    Sample,
    SkipSample,
    hookimpl,
    registry,
)
from segtk.core._plugins import get_plugin_manager, reset_plugin_manager
from segtk.editkit import AttributeEditor, GeometryEditor, transform_object
from segtk.editkit._backends import backend_names
from segtk.editkit._inpaint import fill_rows
from segtk.jobs.edit import build_editor
from segtk.testing import CAR_CLASSES, car_sample

CLASSES = CAR_CLASSES
SKY, ROAD, CAR, TREE = range(4)


def sample(level: str = "object", classes=CLASSES, **kw) -> Sample:
    return car_sample(level, classes, red=False, **kw)


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


class Tint(AttributeEditor):
    """A toy appearance editor whose classical code misbehaves on purpose: it changes every
    pixel and scribbles on the label; the kit must confine and restore."""

    name = attribute = "tint"
    values = ("dark", "light")
    aliases: ClassVar[dict[str, str]] = {"dim": "dark"}
    prompt_templates: ClassVar[dict[str, str]] = {"*": "a photo of {a_value} {cls}"}
    requires: ClassVar[tuple[str, ...]] = ()
    defaults: ClassVar[dict[str, Any]] = {"amount": 0.5, "noisy": False}

    def classical(self, sample: Sample, value: str, rng: np.random.Generator) -> EditedSample:
        factor = 1 - self.params["amount"] if value == "dark" else 1 + self.params["amount"]
        image = sample.image * factor + rng.normal(0, 1, sample.image.shape)
        return EditedSample(image, np.zeros_like(sample.label), ~sample.mask, value,
                            metadata={"factor": factor})


class WholeTint(Tint):
    name = attribute = "whole-tint"
    level = "image"


class Shrink(GeometryEditor):
    """A toy geometry editor: halves the object about its box centre."""

    name = attribute = "shrink"
    values: ClassVar[tuple[str, ...]] = ("0.5",)
    prompt_templates: ClassVar[dict[str, str]] = {"*": "a photo of a smaller {cls}"}

    def placement(self, sample: Sample, value: float,
                  rng: np.random.Generator) -> tuple[float, tuple[int, int]]:
        return value, (0, 0)


# --- appearance -------------------------------------------------------------------------------


def test_appearance_keeps_label_and_mask_and_edits_only_inside() -> None:
    s = sample()
    out = Tint().edit(s, "Dim", rng())
    assert out.value == "dark" and out.prompt == "a photo of a dark car"
    assert np.array_equal(out.label, s.label) and np.array_equal(out.mask, s.mask)
    changed = (out.image != s.image).any(axis=2)
    assert changed[s.mask].mean() > 0.9 and not changed[~s.mask].any()
    assert out.metadata == {"backend": "classical", "amount": 0.5, "noisy": False, "factor": 0.5}
    assert out.prompt_writer == ""
    whole = WholeTint().edit(sample(level="image"), "light", rng())
    assert (whole.image != sample(level="image").image).any(axis=2).mean() > 0.9


def test_values_and_parameters_are_checked_and_read() -> None:
    with pytest.raises(PluginError, match="no value 'plaid'") as info:
        Tint().check_value("plaid")
    assert "dark, light" in str(info.value.hint)
    with pytest.raises(PluginError, match="unknown parameter 'bogus'") as info:
        Tint(bogus=1)
    assert "amount=0.5" in str(info.value.hint)
    editor = Tint(amount="0.25", noisy="yes")  # CLI strings read as the defaults' types
    assert editor.params == {"amount": 0.25, "noisy": True}
    with pytest.raises(PluginError, match="cannot read amount='lots': expected a number") as info:
        Tint(amount="lots")
    assert "amount=0.5" in str(info.value.hint)
    with pytest.raises(PluginError, match="cannot read noisy='maybe': expected true or false"):
        Tint(noisy="maybe")  # never read as False
    with pytest.raises(PluginError, match="not a number"):
        Shrink().check_value("big")
    assert Shrink().check_value("0.50") == "0.5"


# --- geometry ---------------------------------------------------------------------------------


def check_geometry(s: Sample, out: EditedSample, fill: int) -> None:
    new, old = out.mask, s.mask
    assert new.any() and new.shape == old.shape
    assert (out.label[new] == CAR).all()  # the object's label moved with it
    uncovered = old & ~new
    assert uncovered.any() and (out.label[uncovered] == fill).all()
    rest = ~(old | new)
    assert np.array_equal(out.label[rest], s.label[rest])  # nothing else relabelled
    assert out.repaint is not None and np.array_equal(out.repaint, uncovered)


def test_geometry_moves_image_mask_and_label_together() -> None:
    s = sample()
    out = Shrink().edit(s, "0.5", rng())
    check_geometry(s, out, fill=255)
    assert out.prompt == "a photo of a smaller car" and out.metadata["backend"] == "classical"
    x0, y0, x1, y1 = out.metadata["new_box"]
    ox0, oy0, ox1, oy1 = out.metadata["box"]
    assert x1 - x0 == round((ox1 - ox0) * 0.5) and abs((x0 + x1) - (ox0 + ox1)) <= 1
    assert out.metadata["background_prompt"].startswith("a photo of road")
    assert not np.array_equal(out.image[out.repaint], s.image[out.repaint])  # repainted
    again = Shrink().edit(s, "0.5", rng())
    assert np.array_equal(out.image, again.image)  # the same stream, the same edit


def test_transform_object_resamples_labels_nearest_and_refuses_to_leave_the_image() -> None:
    s = sample()
    s.label[s.mask & (np.arange(s.mask.shape[1])[None, :] < 30)] = TREE  # a two-class object
    out = transform_object(s, 0.5, (0, 0), 255)
    assert set(np.unique(out.label[out.mask]).tolist()) <= {CAR, TREE}  # no blended ids
    with pytest.raises(SkipSample) as info:
        transform_object(s, 1.0, (60, 0), 255)
    assert info.value.reason == "no-room"
    empty = sample()
    empty.mask[:] = False
    with pytest.raises(SkipSample, match="bad-mask"):
        Shrink().edit(empty, "0.5", rng())


def test_repaint_methods_and_their_checks() -> None:
    image = np.repeat(np.arange(0, 240, 5, dtype=np.uint8)[:, None, None], 64, 1).repeat(3, 2)
    hole = np.zeros((48, 64), bool)
    hole[10:30, 20:40] = True
    assert np.array_equal(fill_rows(image, hole, rng(), grain=0.0), image)  # rows continue
    noisy = np.clip(image + rng(1).normal(0, 6, image.shape), 0, 255).astype(np.uint8)
    grainy = fill_rows(noisy, hole, rng(), grain=1.0)
    assert np.array_equal(grainy[~hole], noisy[~hole])  # only the hole is filled ...
    flat = fill_rows(noisy, hole, rng(), grain=0.0)
    assert (grainy[hole].astype(int) - flat[hole]).std() > 2  # ... with the image's grain
    s = sample()
    for method in ("rows", "telea", "ns"):
        check_geometry(s, Shrink(method=method).edit(s, "0.5", rng()), fill=255)
    with pytest.raises(PluginError, match="method"):
        Shrink(method="magic")
    with pytest.raises(PluginError, match="border"):
        Shrink(border="maybe")


def test_uncovered_area_gets_background_class_when_there_is_one() -> None:
    classes = ["background", "road", "car", "tree"]  # id 0 is a background class here
    s = sample(classes=classes)
    check_geometry(s, Shrink().edit(s, "0.5", rng()), fill=0)
    check_geometry(s, Shrink(fill="ignore").edit(s, "0.5", rng()), fill=255)
    check_geometry(s, Shrink(fill="road").edit(s, "0.5", rng()), fill=ROAD)
    with pytest.raises(PluginError, match="not a class"):
        Shrink(fill="lava").edit(s, "0.5", rng())


# --- backends and prompt writers through their hooks -----------------------------------------


@dataclass
class FakeOptions:
    steps: int = 1


class FakeBackend(EditBackend):
    name = "fake"
    reference = "tint"
    Params = FakeOptions
    made: ClassVar[list[FakeBackend]] = []

    def __init__(self, options: dict[str, Any]) -> None:
        super().__init__(options)
        self.calls: list[tuple] = []
        FakeBackend.made.append(self)

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


class NeedsModule(FakeBackend):
    name = "needy"
    requires = ("segtk_no_such_module_xyz",)
    install = "pip install xyz"


class ImportsLate(FakeBackend):
    name = "late"
    install = "pip install segtk-late"

    def __init__(self, options: dict[str, Any]) -> None:
        raise ModuleNotFoundError("No module named 'diffusers'", name="diffusers")


class Upper(PromptWriter):
    name = "upper"

    def __init__(self, model: str) -> None:
        self.model = model

    def rewrite(self, sample, attribute, value, template):
        return f"{template.upper()} ({attribute})", f"upper:{self.model}"


@pytest.fixture
def hooks():
    """The real plugins plus one in-process fake plugin answering the editing hooks."""
    def backends(register) -> None:
        for cls in (FakeBackend, NeedsModule, ImportsLate, Probe, NamelessImport, DottedImport):
            register(cls)

    reset_plugin_manager()
    pm = get_plugin_manager()
    pm.register(types.SimpleNamespace(register_edit_backends=hookimpl(backends),
                                      register_prompt_writers=hookimpl(lambda register: register(Upper)),
                                      register_editors=hookimpl(lambda register: register(Tint))),
                name="segtk_fake_editing")
    FakeBackend.made.clear()
    Probe.made.clear()
    yield
    reset_plugin_manager()


def test_a_backend_plugin_gets_the_unknown_parameters_and_the_edit(hooks) -> None:
    s = sample()
    out = Tint(backend="fake", amount="0.2", steps="3").edit(s, "dark", rng())
    backend = FakeBackend.made[0]
    assert backend.options == {"steps": 3}  # read as its Params declare it
    kind, got, value, src, dst = backend.calls[0]
    assert (kind, value, src, dst) == ("appearance", "dark", "a photo of a car",
                                       "a photo of a dark car")
    assert np.array_equal(got.mask, s.mask)
    assert np.array_equal(out.label, s.label)  # restored
    # the backend's image whole: no source pixels pasted back outside the mask (the diffusion
    # backend blends latents there, Gen4Seg Eq. 7, as its Recon reference does)
    assert np.array_equal(out.image, 255 - s.image)
    assert out.metadata == {"backend": "fake", "amount": 0.2, "noisy": False, "steps": 3}
    WholeTint(backend="fake").edit(sample(level="image"), "light", rng())
    assert FakeBackend.made[1].calls[0][1].mask.all()  # image-level edits: the whole image


def test_a_backend_plugin_repaints_the_rigid_transform(hooks) -> None:
    s = sample()
    out = Shrink(backend="fake").edit(s, "0.5", rng())
    kind, got, moved = FakeBackend.made[0].calls[0]
    reference = Shrink().edit(s, "0.5", rng())
    assert kind == "geometry" and got is s
    assert np.array_equal(moved.mask, reference.mask) and np.array_equal(moved.label, reference.label)
    assert np.array_equal(out.label, reference.label)
    assert (out.image[reference.repaint] == 7).all()
    assert out.metadata["backend"] == "fake" and out.metadata["steps"] == 5
    assert reference_editor("fake") == "tint" and reference_editor("classical") == ""


def test_backends_are_listed_checked_and_missing_dependencies_named(hooks) -> None:
    assert {"classical", "fake", "needy", "late"} <= set(backend_names())
    with pytest.raises(PluginError, match="unknown backend 'gan' for editor 'tint'") as info:
        Tint(backend="gan")
    assert "classical" in str(info.value.hint) and "fake" in str(info.value.hint)
    with pytest.raises(PluginError, match="needs segtk_no_such_module_xyz") as info:
        Tint(backend="needy")
    assert info.value.hint == "pip install xyz"
    with pytest.raises(PluginError, match="--backend late needs diffusers") as info:
        Shrink(backend="late")
    assert "pip install diffusers" in str(info.value.hint) and "segtk-late" in str(info.value.hint)
    assert registry.edit_backend("fake") is FakeBackend


def test_a_prompt_writer_plugin_writes_the_prompts(hooks) -> None:
    writer = registry.prompt_writer("upper")("m1")
    for editor, level, value in ((Tint(), "object", "light"), (Shrink(), "object", "0.5")):
        editor.prompt_writer = writer
        out = editor.edit(sample(level=level), value, rng())
        assert out.prompt == f"{editor.prompt(sample(), value).upper()} ({editor.name})"
        assert out.prompt_writer == "upper:m1"


def test_building_an_editor_by_name_passes_the_backend_and_its_options(hooks) -> None:
    editor = build_editor("tint", "fake", {"amount": "0.2", "steps": "3"})
    assert isinstance(editor, Tint) and editor.backend == "fake"
    assert editor.params["amount"] == 0.2 and FakeBackend.made[0].options == {"steps": 3}
    classical = build_editor("tint", "classical", {})
    assert isinstance(classical, Tint) and classical.engine is None


# --- exact messages, what reaches a backend, what the manifest records -----------------------


@dataclass
class ProbeOptions:
    model: str = "m"
    steps: int = 1
    bad_shape: bool = False


class Probe(EditBackend):
    """Records everything it is handed; `bad_shape=True` answers with a 2x2 image."""

    name = "probe"
    Params = ProbeOptions
    made: ClassVar[list[Probe]] = []

    def __init__(self, options: dict[str, Any]) -> None:
        super().__init__(options)
        self.seen: list[tuple[str, Sample, Any]] = []
        Probe.made.append(self)

    def _image(self, image: np.ndarray) -> np.ndarray:
        return np.zeros((2, 2, 3), np.uint8) if self.options.get("bad_shape") else image

    def appearance(self, sample, value, prompt_src, prompt_edit, rng):
        self.seen.append(("appearance", sample, rng))
        return EditedSample(self._image(sample.image), sample.label, sample.mask, value)

    def geometry(self, sample, moved, rng):
        self.seen.append(("geometry", sample, rng))
        return EditedSample(self._image(moved.image), moved.label, moved.mask, moved.value)


class NamelessImport(FakeBackend):
    name = "nameless"

    def __init__(self, options: dict[str, Any]) -> None:
        raise ImportError("cannot import it")


class DottedImport(FakeBackend):
    name = "dotted"
    install = ""

    def __init__(self, options: dict[str, Any]) -> None:
        raise ModuleNotFoundError("No module named 'diffusers.models'", name="diffusers.models")


def test_a_backend_gets_the_sample_whole_with_an_all_true_mask_for_image_edits_and_the_rng(hooks) -> None:
    base = sample()  # an object-level sample: its mask covers the car only
    s = Sample(base.name, base.image, base.label, base.mask, base.classes, base.class_name,
               "a street", ignore_index=7)
    generator = rng()
    WholeTint(backend="probe").edit(s, "dark", generator)
    Tint(backend="probe").edit(s, "dark", generator)
    (_, whole, rng_a), (_, own, rng_b) = Probe.made[0].seen[0], Probe.made[1].seen[0]
    assert rng_a is generator and rng_b is generator
    assert whole.mask.shape == s.mask.shape and whole.mask.all()
    assert np.array_equal(own.mask, s.mask)
    for got in (whole, own):
        assert (got.name, got.classes, got.class_name, got.prompt, got.ignore_index) == \
               (s.name, s.classes, s.class_name, s.prompt, s.ignore_index)
        assert got.image is s.image and got.label is s.label
    Shrink(backend="probe").edit(s, "0.5", generator)
    assert Probe.made[2].seen[0][0] == "geometry" and Probe.made[2].seen[0][2] is generator


def test_the_manifest_records_backend_options_numbers_as_numbers_and_the_rest_as_text(hooks) -> None:
    from pathlib import Path

    editor = Tint(backend="probe", steps=3, model=Path("weights"), amount=0.25)
    assert editor.parameters() == {"amount": 0.25, "noisy": False, "steps": 3, "model": "weights"}
    assert Tint(amount=0.25).parameters() == {"amount": 0.25, "noisy": False}


def test_an_image_of_the_wrong_shape_names_the_editor_and_its_backend(hooks) -> None:
    s = sample()
    h, w = s.mask.shape
    for editor, value in ((Tint(backend="probe", bad_shape=True), "dark"),
                          (Shrink(backend="probe", bad_shape=True), "0.5")):
        with pytest.raises(PluginError) as info:
            editor.edit(s, value, rng())
        assert str(info.value.args[0]) == (f"editor {editor.name} (probe) returned an image of "
                                           f"shape (2, 2, 3), expected ({h}, {w}, 3)")


def test_check_image_rounds_and_clips_anything_else_to_uint8() -> None:
    from segtk.editkit._editors import check_image

    raw = np.array([[[-3.4, 0.4, 254.5], [255.6, 300.0, 1.5]]])
    out = check_image(raw, (1, 2, 3), "x")
    assert out.dtype == np.uint8 and out.tolist() == [[[0, 0, 254], [255, 255, 2]]]
    same = np.array([[[0, 255, 7]]], np.uint8)
    assert check_image(same, (1, 1, 3), "x").tolist() == [[[0, 255, 7]]]
    with pytest.raises(PluginError) as info:
        check_image(same, (1, 2, 3), "who (how)")
    assert str(info.value.args[0]) == ("editor who (how) returned an image of shape (1, 1, 3), "
                                       "expected (1, 2, 3)")


class TwoSizes(Shrink):
    name = attribute = "two-sizes"
    values = ("0.5", "0.25")


def test_unknown_parameters_and_values_are_refused_with_exact_messages() -> None:
    with pytest.raises(PluginError) as info:
        Tint(amonut=1)
    assert str(info.value.args[0]) == "unknown parameter 'amonut' for editor 'tint' (did you mean 'amount'?)"
    with pytest.raises(PluginError) as info:
        Shrink(border="wrap")
    assert str(info.value.args[0]) == "shrink: border='wrap' is unknown"
    assert info.value.hint == ("border=keep (objects cut by the image border stay cut by it) or "
                               "border=ignore")
    with pytest.raises(PluginError) as info:
        Shrink(method="blur")
    assert str(info.value.args[0]) == "shrink: method='blur' is unknown"
    assert info.value.hint == "method=rows (row interpolation + grain), telea or ns (OpenCV inpainting)"
    for bad in ("0", "-0.5", "1.5", "nan", "big"):
        with pytest.raises(PluginError) as info:
            Shrink().check_value(bad)
        assert str(info.value.args[0]) == f"editor 'shrink': value {bad!r} is not a number in (0, 1]"
        assert info.value.hint == "e.g. 0.5"
    with pytest.raises(PluginError) as info:
        TwoSizes().check_value("2")
    assert info.value.hint == "e.g. 0.5, 0.25"
    assert Shrink().check_value("1") == "1" and Shrink().check_value("0.50") == "0.5"
    empty = sample()
    empty.mask[:] = False
    with pytest.raises(SkipSample) as skip:
        Shrink().edit(empty, "0.5", rng())
    assert (skip.value.reason, skip.value.detail) == ("bad-mask", "empty object mask")


def test_the_repaint_gets_every_inpainting_setting(monkeypatch) -> None:
    import segtk.editkit._editors as editors

    seen: list[tuple] = []

    def spy(image, hole, generator, method, dilate, radius, grain):
        seen.append((method, dilate, radius, grain, generator))
        return image.copy()

    monkeypatch.setattr(editors, "inpaint", spy)
    generator = rng()
    Shrink(method="telea", dilate=1, radius=2, grain=0.5).edit(sample(), "0.5", generator)
    assert seen == [("telea", 1, 2.0, 0.5, generator)]
    assert isinstance(seen[0][2], float)


def test_backend_errors_name_what_to_install_exactly(hooks) -> None:
    from segtk.editkit._backends import backend_class

    with pytest.raises(PluginError) as info:
        backend_class("gan")
    assert str(info.value.args[0]) == "unknown backend 'gan'"
    names = ", ".join(backend_names())
    assert info.value.hint == (f"backends: {names} (edit-backend plugins add more; see "
                               "`segtk plugins`)")
    assert getattr(info.value, "name", None) == "gan"
    with pytest.raises(PluginError) as info:
        Tint(backend="nameless")
    assert str(info.value.args[0]) == "--backend nameless needs a module, which is not installed"
    assert info.value.hint == "pip install a module"
    with pytest.raises(PluginError) as info:
        Tint(backend="dotted")
    assert str(info.value.args[0]) == "--backend dotted needs diffusers, which is not installed"
    assert info.value.hint == "pip install diffusers"
