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
from segtk.core import (
    Attack,
    EditedSample,
    Editor,
    Filter,
    FilterResult,
    Oracle,
    Sample,
    Segmenter,
    SegtkError,
    SkipSample,
    project,
)
from segtk.core._oracle_run import OracleRun
from segtk.editkit import transform_object
from segtk.testing import (
    TOY_CLASSES,
    AttackSuite,
    EditorSuite,
    FilterSuite,
    SegmenterSuite,
    TinySegmenter,
    pytest_plugin,
    toy_sample,
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
    registered = False  # a toy: no plugin registers it
    min_changed = 0.5


class TestShiftContract(EditorSuite):
    editor_cls = Shift
    registered = False


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


def editor_suite(cls: type[Editor], **settings: Any) -> EditorSuite:
    return type("Suite", (EditorSuite,), {"editor_cls": cls, "registered": False, **settings})()


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


class IntLabel(Invert):
    def edit(self, sample, value, rng):
        out = super().edit(sample, value, rng)
        out.label = out.label.astype(np.int32)
        return out


class Speck(Invert):
    """Inverts one pixel of the object only."""

    def edit(self, sample, value, rng):
        out = super().edit(sample, value, rng)
        out.image = sample.image.copy()
        y, x = np.argwhere(sample.mask)[0]
        out.image[y, x] = 255 - out.image[y, x]
        return out


def test_editor_suite_catches_a_changed_label_dtype() -> None:
    with pytest.raises(AssertionError, match="changed the label's dtype"):
        editor_suite(IntLabel).test_label_and_mask_follow_the_kind()


def test_editor_suite_catches_a_value_that_changes_too_little() -> None:
    editor_suite(Speck).test_changes_the_image()  # some change: enough by default
    with pytest.raises(AssertionError, match=r"full: changed 0% of the mask's pixels, not more than 50%"):
        editor_suite(Speck, min_changed=0.5).test_changes_the_image()


def test_editor_suite_catches_an_editor_no_plugin_registers() -> None:
    with pytest.raises(AssertionError, match="no usable editor is registered as 'invert'"):
        editor_suite(Invert, registered=True).test_registered_under_its_name()


def test_editor_suite_catches_a_readme_that_misses_a_value_or_parameter(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text("Values: `full`, `half`.\n")
    editor_suite(Invert, readme=readme).test_readme_documents_every_value_and_parameter()
    readme.write_text("Values: `full`.\n")
    with pytest.raises(AssertionError, match="does not document `half`"):
        editor_suite(Invert, readme=readme).test_readme_documents_every_value_and_parameter()


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


def darkened() -> tuple[Sample, EditedSample]:
    """The toy scene with its object painted near black: what Bright is meant to refuse."""
    sample = toy_sample()
    image = sample.image.copy()
    image[sample.mask] = 10
    return sample, EditedSample(image, sample.label.copy(), sample.mask.copy(), "dark")


class TestBrightContract(FilterSuite):
    filter_cls = Bright

    def bad_edit(self) -> tuple[Sample, EditedSample]:
        return darkened()


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


class KeepsAll(Bright):
    def apply(self, original, edited):
        return FilterResult(keep=True, scores=super().apply(original, edited).scores)


class DropsNoPixel(Border):
    def apply(self, original, edited):
        return replace_label(super().apply(original, edited), edited.label.copy())


def replace_label(result: FilterResult, label: np.ndarray | None) -> FilterResult:
    return FilterResult(result.keep, result.scores, label)


def filter_suite(cls: type[Filter]) -> FilterSuite:
    bad = {"bad_edit": lambda self: darkened()} if issubclass(cls, Bright) else {}
    return type("Suite", (FilterSuite,), {"filter_cls": cls, **bad})()


@pytest.mark.parametrize(("flt", "check", "message"), [
    (BothStages, "test_declares_name_and_stage", "stage must be one of"),
    (NumpyKeep, "test_result_keep_scores_and_label", "keep must be a bool"),
    (NanScore, "test_result_keep_scores_and_label", "not a finite number"),
    (NoLabel, "test_result_keep_scores_and_label", "must return the label"),
    (Relabelling, "test_result_keep_scores_and_label", "to another class"),
    (Smaller, "test_result_keep_scores_and_label", r"label \(47, 64\)"),
    (InPlaceLabel, "test_leaves_its_inputs_untouched", "modified the source or the edit"),
    (KeepsAll, "test_rejects_something_of_a_bad_edit", "bright rejected nothing of the bad edit"),
    (DropsNoPixel, "test_rejects_something_of_a_bad_edit", "border rejected nothing"),
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
    assert isinstance(flt, Border) and flt.prepared == [tmp_path / "cache"]


# --- attacks ----------------------------------------------------------------------------------


class SignNoise(Attack):
    """A minimal, well-behaved attack: each query is clean ± ε per value, with fresh signs from
    the image's own stream; the oracle keeps the best."""

    name = "sign-noise"
    reach = 1.0  # the step, in ε

    def attack(self, oracle: Oracle) -> None:
        while active := self.active(oracle):
            owners = torch.tensor(active)
            steps = torch.stack([self.step(oracle, i) for i in active])
            oracle.query(self.bound(oracle, oracle.clean[owners] + steps, owners), owners)

    def active(self, oracle: Oracle) -> list[int]:
        return oracle.active().tolist()

    def signs(self, oracle: Oracle, i: int) -> torch.Tensor:
        return torch.randint(0, 2, tuple(oracle.clean[i].shape), generator=oracle.rngs[i]) * 2 - 1

    def step(self, oracle: Oracle, i: int) -> torch.Tensor:
        return self.signs(oracle, i) * self.reach * oracle.eps_unit

    def bound(self, oracle: Oracle, x: torch.Tensor, owners: torch.Tensor) -> torch.Tensor:
        return project(x, oracle.clean[owners], oracle.eps_unit)


class TestSignNoiseContract(AttackSuite):
    attack_cls = SignNoise


class StopsShort(SignNoise):
    def active(self, oracle):
        return oracle.active(cost=2).tolist()  # leaves each image's last query unused


class Overspends(SignNoise):
    def active(self, oracle):
        return list(range(oracle.batch_size))  # never looks at the budget


class PastEps(SignNoise):
    reach = 1.2

    def bound(self, oracle, x, owners):
        return x.clamp(0, 1)  # the box, not the ball


class OutOfBox(SignNoise):
    def bound(self, oracle, x, owners):
        clean, eps = oracle.clean[owners], oracle.eps_unit
        return torch.minimum(torch.maximum(x, clean - eps), clean + eps)  # the ball, not the box


class Peeks(SignNoise):
    """Asks once about clean + 1.01·ε at one value before its well-behaved queries. The model's
    labels do not change, so that candidate never becomes the result: only a check of every
    query (not of the result) sees it."""

    def attack(self, oracle):
        oracle.query(oracle.clean)
        peek = oracle.clean.clone()
        peek[:, 0, -1, -1] += 1.01 * oracle.eps_unit
        oracle.query(peek.clamp(0, 1))
        super().attack(oracle)


class UnseededSigns(SignNoise):
    def signs(self, oracle, i):
        return torch.randint(0, 2, tuple(oracle.clean[i].shape)) * 2 - 1  # the global stream


class SharedStream(SignNoise):
    def signs(self, oracle, i):
        return torch.randint(0, 2, tuple(oracle.clean[i].shape), generator=oracle.rngs[0]) * 2 - 1


class BudgetSchedule(SignNoise):
    """Claims to be anytime, but its step shrinks with the total budget."""

    def step(self, oracle, i):
        return super().step(oracle, i) * min(1.0, 10 / self.params.budget)


class Idle(SignNoise):
    def bound(self, oracle, x, owners):
        return oracle.clean[owners]  # asks about the clean image again and again


def attack_suite(cls: type[Attack]) -> AttackSuite:
    return type("Suite", (AttackSuite,), {"attack_cls": cls})()


@pytest.mark.parametrize(("attack", "check", "message"), [
    (StopsShort, "test_budget_is_exact", r"budget 1: used \[0, 0\]"),
    (UnseededSigns, "test_same_seed_same_result", "same seed, different"),
    (SharedStream, "test_batched_equals_one_at_a_time", "image 0: its history in a batch"),
    (BudgetSchedule, "test_anytime_runs_are_prefixes_of_longer_runs", "sets anytime = False"),
    (Idle, "test_lowers_the_proxy", "never lowered the proxy"),
])
def test_attack_suite_catches(attack: type[Attack], check: str, message: str) -> None:
    with pytest.raises(AssertionError, match=message):
        getattr(attack_suite(attack), check)()


def test_attack_suite_catches_an_attack_that_overspends() -> None:
    with pytest.raises(SegtkError, match="would use 2 queries, budget is 1"):
        attack_suite(Overspends).test_budget_is_exact()


def any_size_check(attack: type[Attack]) -> None:
    """The suite's ε/[0,1] check on one example (budget 3, 6x7 images, ε = 8), without
    hypothesis's search and shrinking: the broken attacks here fail on any example."""
    suite = attack_suite(attack)
    # hypothesis gives the tests it wraps `.hypothesis`; their type does not say so
    check = suite.test_budget_and_eps_any_size.hypothesis  # type: ignore[attr-defined]
    check.inner_test(suite, budget=3, height=6, width=7, eps=8.0)


@pytest.mark.parametrize(("attack", "message"), [
    (PastEps, r"image 0 reached the model with L∞ = 9\.600/255 \(ε = 8\)"),
    (OutOfBox, r"image 0 reached the model .* values in \[-0\.0"),
    (Peeks, r"image 0 reached the model with L∞ = 8\.080/255"),
])
def test_attack_suite_checks_every_query_even_when_the_oracle_is_wrong(
        attack: type[Attack], message: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """An oracle that checks nothing lets these candidates through to the model: the suite
    still fails, since it checks every query at the counter, on its own."""
    monkeypatch.setattr(OracleRun, "_check_bounds", lambda self, images, owners: None)
    with pytest.raises(AssertionError, match=message):
        any_size_check(attack)


@pytest.mark.parametrize("attack", [PastEps, OutOfBox, Peeks])
def test_a_correct_oracle_refuses_those_attacks_anyway(attack: type[Attack]) -> None:
    with pytest.raises(SegtkError, match="outside the ε-ball"):
        any_size_check(attack)
    any_size_check(SignNoise)  # and the example passes for a well-behaved attack


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
