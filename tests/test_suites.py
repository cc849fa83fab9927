"""The contract suites of segtk.testing fail on plugins that break their contract, naming what
broke, and pass on well-behaved ones; the pytest plugin gives its fixtures and markers once."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest
import torch

import segtk.testing
from segtk.core.editing import EditedSample, Editor, Sample, SkipSample
from segtk.core.editkit import transform_object
from segtk.core.filtering import Filter, FilterResult
from segtk.core.segmenter import Segmenter
from segtk.testing import (
    TOY_CLASSES,
    EditorSuite,
    FilterSuite,
    SegmenterSuite,
    TinySegmenter,
    pytest_plugin,
)

# --- segmenters -------------------------------------------------------------------------------


def segmenter_suite(model: Callable[[], Segmenter]) -> SegmenterSuite:
    suite = type("Suite", (SegmenterSuite,), {"make": lambda self: model()})
    return suite()


class TestTinySegmenterContract(SegmenterSuite):
    def make(self) -> Segmenter:
        return TinySegmenter()


class LabelsOnly(TinySegmenter):
    """A well-behaved segmenter without logits."""

    def predict(self, images: torch.Tensor) -> torch.Tensor:
        return super().logits(images).argmax(1)

    logits = Segmenter.logits  # back to "no logits"


class TestLabelsOnlyContract(SegmenterSuite):
    def make(self) -> Segmenter:
        return LabelsOnly()


class Cropped(TinySegmenter):
    def predict(self, images):
        return super().predict(images)[:, :-1]


class FloatLabels(TinySegmenter):
    def predict(self, images):
        return super().predict(images).float()


class IdsTooHigh(LabelsOnly):
    def predict(self, images):
        return super().predict(images) + 4


class Mutating(TinySegmenter):
    def predict(self, images):
        images.mul_(0.5)  # normalises in place
        return super().predict(images)


class Noisy(TinySegmenter):
    def logits(self, images):
        return super().logits(images) + torch.rand(images.shape[0], 4, *images.shape[2:]) * 5


class BatchNormalised(TinySegmenter):
    def logits(self, images):
        return super().logits(images / images.mean().clamp(min=0.1) * 0.5)


class Shifted(TinySegmenter):
    def predict(self, images):
        return (super().predict(images) + 1) % 4  # not the argmax of its logits


class IgnoreIsAClass(TinySegmenter):
    ignore_index = 0


class NoClasses(TinySegmenter):
    def __init__(self) -> None:
        super().__init__()
        self.classes = []


@pytest.mark.parametrize(("model", "check", "message"), [
    (Cropped, "test_predict_gives_int64_ids_at_the_input_size", "returned shape"),
    (FloatLabels, "test_predict_gives_int64_ids_at_the_input_size", "not torch.int64"),
    (IdsTooHigh, "test_predict_gives_int64_ids_at_the_input_size", "outside 0..3"),
    (Mutating, "test_predict_gives_int64_ids_at_the_input_size", "modified its input"),
    (Noisy, "test_same_images_same_labels", "different labels"),
    (BatchNormalised, "test_batched_equals_one_at_a_time", "depend on the other images"),
    (Shifted, "test_logits_agree_with_predict", "not the argmax"),
    (IgnoreIsAClass, "test_declares_name_classes_and_ignore_index", "is the id of class"),
    (NoClasses, "test_declares_name_classes_and_ignore_index", "non-empty list"),
])
def test_segmenter_suite_catches(model: type[Segmenter], check: str, message: str) -> None:
    suite = segmenter_suite(model)
    with pytest.raises(AssertionError, match=message):
        getattr(suite, check)()


def test_segmenter_suite_skips_logits_checks_for_labels_only_models() -> None:
    with pytest.raises(pytest.skip.Exception, match="labels only"):
        segmenter_suite(LabelsOnly).test_logits_agree_with_predict()


# --- editors ----------------------------------------------------------------------------------


class Invert(Editor):
    """A minimal, well-behaved appearance editor (no kit): inverts the object's colours."""

    name = "invert"
    values = ("full", "half")

    def edit(self, sample: Sample, value: str, rng: np.random.Generator) -> EditedSample:
        value = self.check_value(value)
        image = sample.image.copy()
        amount = (1.0 if value == "full" else 0.5) * rng.uniform(0.9, 1.0)
        inverted = 255 - image[sample.mask].astype(np.float64)
        image[sample.mask] = np.round(amount * inverted + (1 - amount) * image[sample.mask])
        return EditedSample(image, sample.label.copy(), sample.mask.copy(), value,
                            self.prompt(sample, value), {"amount": round(float(amount), 4)})


class Shift(Editor):
    """A minimal, well-behaved geometry editor: moves the object 4 or 8 px to the right."""

    name = "shift"
    kind = "geometry"
    values = ("4", "8")

    def edit(self, sample: Sample, value: str, rng: np.random.Generator) -> EditedSample:
        value = self.check_value(value)
        moved = transform_object(sample, 1.0, (int(value), 0), sample.ignore_index)
        moved.value = value
        return moved


class TestInvertContract(EditorSuite):
    editor_cls = Invert


class TestShiftContract(EditorSuite):
    editor_cls = Shift


class FloatImage(Invert):
    def edit(self, sample, value, rng):
        out = super().edit(sample, value, rng)
        out.image = out.image.astype(np.float64)
        return out


class Relabels(Invert):
    def edit(self, sample, value, rng):
        out = super().edit(sample, value, rng)
        out.label = np.where(sample.mask, 1, sample.label)
        return out


class PaintsEverything(Invert):
    def edit(self, sample, value, rng):
        out = super().edit(sample, value, rng)
        out.image = 255 - sample.image
        return out


class BadIds(Invert):
    def edit(self, sample, value, rng):
        out = super().edit(sample, value, rng)
        out.label = out.label.copy()
        out.label[0, -1] = 9
        return out


class IntMask(Invert):
    def edit(self, sample, value, rng):
        out = super().edit(sample, value, rng)
        out.mask = out.mask.astype(np.uint8)
        return out


class Unseeded(Invert):
    def edit(self, sample, value, rng):
        return super().edit(sample, value, np.random.default_rng())


class InPlace(Invert):
    def edit(self, sample, value, rng):
        out = super().edit(sample, value, rng)
        sample.image[sample.mask] = out.image[sample.mask]
        return out


class NumpyMetadata(Invert):
    def edit(self, sample, value, rng):
        out = super().edit(sample, value, rng)
        out.metadata = {"amount": np.float32(0.5)}
        return out


class WrongValue(Invert):
    def edit(self, sample, value, rng):
        out = super().edit(sample, value, rng)
        out.value = "inverted"
        return out


class NoOp(Invert):
    def edit(self, sample, value, rng):
        return EditedSample(sample.image.copy(), sample.label.copy(), sample.mask.copy(), value)


class SkipsAll(Invert):
    def edit(self, sample, value, rng):
        raise SkipSample("no-room", "never fits")


class BadKind(Invert):
    kind = "colour"  # type: ignore[assignment]


class ListValues(Invert):
    values = ["full", "half"]  # type: ignore[assignment]


class Uppercase(Invert):
    values = ("Full", "half")


class BadTemplate(Invert):
    prompt_templates: ClassVar[dict[str, str]] = {"*": "a photo of {colour} {cls}"}


class StrayTemplate(Invert):
    prompt_templates: ClassVar[dict[str, str]] = {"quarter": "a photo of a {cls}"}


class MovesImageOnly(Shift):
    """Moves the pixels and the mask but leaves the label behind."""

    def edit(self, sample, value, rng):
        out = super().edit(sample, value, rng)
        out.label = sample.label.copy()
        return out


def editor_suite(cls: type[Editor]) -> EditorSuite:
    return type("Suite", (EditorSuite,), {"editor_cls": cls})()


@pytest.mark.parametrize(("editor", "check", "message"), [
    (FloatImage, "test_edit_gives_uint8_image_and_valid_label_at_the_source_size", "not uint8"),
    (BadIds, "test_edit_gives_uint8_image_and_valid_label_at_the_source_size", r"ids \[9\]"),
    (IntMask, "test_edit_gives_uint8_image_and_valid_label_at_the_source_size", "mask must be bool"),
    (Relabels, "test_label_and_mask_follow_the_kind", "changed the label"),
    (PaintsEverything, "test_label_and_mask_follow_the_kind", "outside the mask changed"),
    (MovesImageOnly, "test_label_and_mask_follow_the_kind", "carries classes"),
    (Unseeded, "test_same_rng_same_edit", "same rng, different images"),
    (InPlace, "test_leaves_the_sample_untouched", "modified the sample's image"),
    (WrongValue, "test_edit_records_the_value", "recorded value 'inverted'"),
    (NoOp, "test_changes_the_image", "no value changed"),
    (SkipsAll, "test_edit_gives_uint8_image_and_valid_label_at_the_source_size",
     "skipped the toy sample for every value"),
    (BadKind, "test_declares_name_kind_level_values_and_templates", "kind must be one of"),
    (ListValues, "test_declares_name_kind_level_values_and_templates", "non-empty tuple"),
    (StrayTemplate, "test_declares_name_kind_level_values_and_templates", r"\['quarter'\]"),
    (Uppercase, "test_values_are_canonical_and_unknown_ones_refused", "declare canonical"),
])
def test_editor_suite_catches(editor: type[Editor], check: str, message: str) -> None:
    with pytest.raises(AssertionError, match=message):
        getattr(editor_suite(editor), check)()


def test_editor_suite_catches_metadata_that_is_not_json() -> None:
    with pytest.raises(pytest.fail.Exception, match="not JSON"):
        editor_suite(NumpyMetadata).test_metadata_is_json()


def test_editor_suite_catches_a_template_with_an_unknown_field() -> None:
    with pytest.raises(AssertionError, match="unknown field .*colour"):
        editor_suite(BadTemplate).test_every_value_has_a_prompt()


# --- filters ----------------------------------------------------------------------------------


class Bright(Filter):
    """A well-behaved sample filter: keeps edits whose object is not too dark."""

    name = "bright"

    def apply(self, original: Sample, edited: EditedSample) -> FilterResult:
        level = float(edited.image[edited.mask].mean()) / 255
        return FilterResult(keep=level > 0.2, scores={"level": round(level, 6)})


class Border(Filter):
    """A well-behaved pixel filter: the object's outermost pixels become ignore. It counts
    `prepare` calls, as a filter with source statistics would compute them."""

    name = "border"
    stage = "pixel"

    def __init__(self) -> None:
        self.prepared: list[Path] = []

    def prepare(self, dataset: Any, cache_dir: Path) -> None:
        assert len(dataset) == 3 and dataset.classes == TOY_CLASSES
        self.prepared.append(Path(cache_dir))

    def apply(self, original: Sample, edited: EditedSample) -> FilterResult:
        assert self.prepared, "prepare() was not called"
        inner = edited.mask.copy()
        inner[1:-1, 1:-1] &= edited.mask[:-2, 1:-1] & edited.mask[2:, 1:-1]
        label = edited.label.copy()
        label[edited.mask & ~inner] = original.ignore_index
        return FilterResult(keep=True, scores={"border_px": int((edited.mask & ~inner).sum())},
                            label=label)


class TestBrightContract(FilterSuite):
    filter_cls = Bright


class TestBorderContract(FilterSuite):
    filter_cls = Border


class BothStages(Bright):
    stage = "both"  # type: ignore[assignment]


class NumpyKeep(Bright):
    def apply(self, original, edited):
        return FilterResult(keep=np.bool_(True), scores={})


class NanScore(Bright):
    def apply(self, original, edited):
        return FilterResult(keep=True, scores={"level": float("nan")})


class Coin(Bright):
    def apply(self, original, edited):
        return FilterResult(keep=bool(torch.rand(()) < 0.5), scores={})


class NoLabel(Border):
    def apply(self, original, edited):
        return replace_label(super().apply(original, edited), None)


class Relabelling(Border):
    def apply(self, original, edited):
        return replace_label(super().apply(original, edited), np.zeros_like(edited.label))


class Smaller(Border):
    def apply(self, original, edited):
        return replace_label(super().apply(original, edited), edited.label[1:])


class InPlaceLabel(Border):
    def apply(self, original, edited):
        result = super().apply(original, edited)
        edited.label[...] = result.label  # rewrites the caller's edit
        return result


def replace_label(result: FilterResult, label: np.ndarray | None) -> FilterResult:
    return FilterResult(result.keep, result.scores, label)


def filter_suite(cls: type[Filter]) -> FilterSuite:
    return type("Suite", (FilterSuite,), {"filter_cls": cls})()


@pytest.mark.parametrize(("flt", "check", "message"), [
    (BothStages, "test_declares_name_and_stage", "stage must be one of"),
    (NumpyKeep, "test_result_keep_scores_and_label", "keep must be a bool"),
    (NanScore, "test_result_keep_scores_and_label", "not a finite number"),
    (NoLabel, "test_result_keep_scores_and_label", "must return the label"),
    (Relabelling, "test_result_keep_scores_and_label", "to another class"),
    (Smaller, "test_result_keep_scores_and_label", r"label \(47, 64\)"),
    (InPlaceLabel, "test_leaves_its_inputs_untouched", "modified the source or the edit"),
])
def test_filter_suite_catches(flt: type[Filter], check: str, message: str, tmp_path: Path) -> None:
    suite = filter_suite(flt)
    with pytest.raises(AssertionError, match=message):
        getattr(suite, check)(*([] if check == "test_declares_name_and_stage" else [tmp_path]))


def test_filter_suite_catches_a_coin_flip(tmp_path: Path) -> None:
    torch.manual_seed(0)
    with pytest.raises(AssertionError, match="keep changed between calls"):
        filter_suite(Coin).test_same_inputs_same_decision(tmp_path)


def test_filter_suite_prepares_filters_that_need_it(tmp_path: Path) -> None:
    flt = filter_suite(Border).make(tmp_path / "cache")
    assert flt.prepared == [tmp_path / "cache"]


# --- the kit as a package and a pytest plugin ---------------------------------------------------


def test_every_name_of_the_old_module_is_still_importable() -> None:
    for name in ("shared", "requires_stack", "SHARED", "TinySegmenter", "RecordingSegmenter",
                 "toy_batch", "AttackSuite"):
        assert hasattr(segtk.testing, name), name
    assert set(segtk.testing.__all__) <= set(dir(segtk.testing))


def test_pytest_plugin_is_registered_once_with_its_markers(request: pytest.FixtureRequest) -> None:
    manager = request.config.pluginmanager
    assert manager.get_plugin("segtk") is pytest_plugin  # loaded through the pytest11 entry point
    assert [p for p in manager.get_plugins() if p is pytest_plugin] == [pytest_plugin]
    markers = [m.split(":")[0] for m in request.config.getini("markers")]
    assert markers.count("shared") == 1 and markers.count("slow") == 1


def test_pytest_plugin_fixtures(tiny_segmenter, toy_batch, toy_sample, toy_dataset,
                                shared_path) -> None:
    images, labels = toy_batch
    assert torch.equal(tiny_segmenter.predict(images), labels)
    assert toy_sample.class_name == "car" and toy_sample.mask.any()
    assert toy_sample.label[toy_sample.mask].tolist() == [TOY_CLASSES.index("car")] * \
        int(toy_sample.mask.sum())
    assert len(toy_dataset) == 3 and toy_dataset[0].image.shape == (48, 64, 3)
    assert shared_path is segtk.testing.shared
