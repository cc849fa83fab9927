"""The contract suites of the kinds added last (datasets, augmenters, edit backends, prompt
writers) pass on well-behaved plugins and fail, naming what broke, on plugins that break
their contract (as tests/test_suites.py shows for attacks, segmenters, editors, filters)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest
import torch

from segtk.core import (
    Augmenter,
    Dataset,
    DatasetPlugin,
    EditBackend,
    EditedSample,
    Item,
    PromptWriter,
    Sample,
    check_flat_split,
)
from segtk.testing import (
    TOY_CLASSES,
    AugmenterSuite,
    DatasetSuite,
    EditBackendSuite,
    PromptWriterSuite,
    toy_scene,
)

# --- datasets ---------------------------------------------------------------------------------


def read_toy(seed: int) -> Item:
    image, label = toy_scene(24, 32, seed)
    return Item(f"toy{seed}", image, label)


def toy_loader(arg: str, split: str | None, reader=read_toy, names=None, classes=None) -> Dataset:
    """A well-behaved reader of three toy scenes, without splits (it refuses any)."""
    check_flat_split(arg or "toy", split, (), "toy")
    names = [f"toy{s}" for s in range(3)] if names is None else names
    pairs: list[tuple[str, Callable[[], Item]]] = [
        (name, functools.partial(reader, s)) for s, name in enumerate(names)]
    return Dataset("toy", list(classes or TOY_CLASSES), pairs)


def reader_plugin(load=toy_loader, **fields: Any) -> DatasetPlugin:
    return DatasetPlugin(**{"name": "toy", "load": load, "syntax": "toy[:ARG]",
                            "example": "--data toy", **fields})


class TestToyReaderContract(DatasetSuite):
    def make(self) -> DatasetPlugin:
        return reader_plugin()


def read_npz(path: Path) -> Item:
    return Item(path.stem, np.load(path)["image"], np.load(path)["label"])


class TestFolderReaderContract(DatasetSuite):
    """A reader of files: the suite gives each check an empty folder to write them in."""

    def make(self) -> DatasetPlugin:
        def load(arg: str, split: str | None) -> Dataset:
            root = Path(arg)
            check_flat_split(root, split, (), "npz")
            files = sorted(root.glob("*.npz"))
            return Dataset("npz", list(TOY_CLASSES), [
                (f.stem, functools.partial(read_npz, f)) for f in files])
        return reader_plugin(load, name="npz", syntax="npz:DIR", example="--data npz:DIR")

    def arg(self, root: Path) -> str:
        for seed in range(2):
            image, label = toy_scene(20, 28, seed)
            np.savez(root / f"scene{seed}.npz", image=image, label=label)
        return str(root)


def with_reader(reader) -> DatasetPlugin:
    return reader_plugin(lambda arg, split: toy_loader(arg, split, reader=reader))


def cropped_label(seed: int) -> Item:
    item = read_toy(seed)
    return Item(item.name, item.image, item.label[1:])


def ids_too_high(seed: int) -> Item:
    item = read_toy(seed)
    return Item(item.name, item.image, np.where(item.label == 255, 255, item.label + 4))


def float_image(seed: int) -> Item:
    item = read_toy(seed)
    return Item(item.name, item.image.astype(np.float32) / 255, item.label)


def grey_image(seed: int) -> Item:
    item = read_toy(seed)
    return Item(item.name, item.image[..., 0], item.label)


def misnamed(seed: int) -> Item:
    item = read_toy(seed)
    return Item(f"scene-{seed}", item.image, item.label)


def noisy(seed: int) -> Item:
    item = read_toy(seed)
    noise = np.random.default_rng().integers(0, 2, item.image.shape, dtype=np.uint8)
    return Item(item.name, item.image ^ noise, item.label)


def ignores_split(arg: str, split: str | None) -> Dataset:
    return toy_loader(arg, None)


def dataset_suite(plugin: DatasetPlugin) -> DatasetSuite:
    return type("Suite", (DatasetSuite,), {"make": lambda self: plugin})()


@pytest.mark.parametrize(("plugin", "check", "message"), [
    (with_reader(cropped_label), "test_items_are_images_with_labels_of_their_size",
     r"label \(23, 32\) is not the image's size \(24, 32\)"),
    (with_reader(ids_too_high), "test_items_are_images_with_labels_of_their_size",
     r"label ids \[4, 5, 6, 7\] are neither classes \(0-3\) nor ignore"),
    (with_reader(float_image), "test_items_are_images_with_labels_of_their_size",
     "image must be uint8"),
    (with_reader(grey_image), "test_items_are_images_with_labels_of_their_size",
     r"image must be uint8 \[H,W,3\], got uint8 \(24, 32\)"),
    (with_reader(misnamed), "test_items_are_images_with_labels_of_their_size",
     "the item calls itself 'scene-0'"),
    (with_reader(noisy), "test_same_item_twice", "read twice, it differs"),
    (reader_plugin(lambda arg, split: toy_loader(arg, split, names=["a", "a", "b"])),
     "test_a_dataset_with_classes_and_named_items", "duplicate item names"),
    (reader_plugin(lambda arg, split: toy_loader(arg, split, classes=["road", "road", "car", "x"])),
     "test_a_dataset_with_classes_and_named_items", "duplicate class names"),
    (reader_plugin(lambda arg, split: toy_loader(arg, split, names=[])),
     "test_a_dataset_with_classes_and_named_items", "no items"),
    (reader_plugin(example="--model toy"), "test_declares_name_syntax_and_example",
     "must be `--data toy...`"),
    (reader_plugin(ignores_split), "test_refuses_a_split_it_has_no_use_for",
     "must refuse a split it has no use for"),
])
def test_dataset_suite_catches(plugin: DatasetPlugin, check: str, message: str,
                               tmp_path: Path) -> None:
    method = getattr(dataset_suite(plugin), check)
    with pytest.raises((AssertionError, pytest.fail.Exception), match=message):
        method() if check == "test_declares_name_syntax_and_example" else method(tmp_path)


# --- augmenters -------------------------------------------------------------------------------


class Flip(Augmenter):
    """A well-behaved geometric augmenter: flips image and label left-right (probability p)."""

    name = "flip"
    defaults: ClassVar[dict[str, Any]] = {"p": 0.5}

    def flips(self, images: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        return torch.rand(images.shape[0], generator=generator) < self.params["p"]

    def apply(self, images, labels, generator):
        flip = self.flips(images, generator)
        out_images, out_labels = images.clone(), labels.clone()
        out_images[flip] = images[flip].flip(-1)
        out_labels[flip] = labels[flip].flip(-1)
        return out_images, out_labels


class Darken(Augmenter):
    """A well-behaved photometric augmenter: scales the brightness; labels unchanged."""

    name = "darken"
    defaults: ClassVar[dict[str, Any]] = {"amount": 0.3}

    def apply(self, images, labels, generator):
        gain = 1 - self.params["amount"] * torch.rand(images.shape[0], 1, 1, 1, generator=generator)
        return images * gain, labels.clone()


class TestFlipContract(AugmenterSuite):
    augmenter_cls = Flip
    params = {"p": 0.7}


class TestDarkenContract(AugmenterSuite):
    augmenter_cls = Darken


class FlipsImageOnly(Flip):
    def apply(self, images, labels, generator):
        return super().apply(images, labels, generator)[0], labels.clone()


class FlipsLabelOnly(Flip):
    def apply(self, images, labels, generator):
        return images.clone(), super().apply(images, labels, generator)[1]


class FlipsOthers(Flip):
    """Draws image and label flips separately: they disagree on some images."""

    def apply(self, images, labels, generator):
        out_images = super().apply(images, labels, generator)[0]
        return out_images, super().apply(images, labels, generator)[1]


class GlobalRandom(Flip):
    def flips(self, images, generator):
        return torch.rand(images.shape[0]) < self.params["p"]  # the global stream


class FlipsInPlace(Flip):
    def apply(self, images, labels, generator):
        out_images, out_labels = super().apply(images, labels, generator)
        images.copy_(out_images)
        return out_images, out_labels


class Crops(Flip):
    def apply(self, images, labels, generator):
        out_images, out_labels = super().apply(images, labels, generator)
        return out_images[..., 1:, :], out_labels[..., 1:, :]


class IntLabels(Flip):
    def apply(self, images, labels, generator):
        out_images, out_labels = super().apply(images, labels, generator)
        return out_images, out_labels.int()


class SmoothsLabels(Flip):
    """Resamples labels bilinearly: ids between two classes appear at their borders."""

    def apply(self, images, labels, generator):
        out_images, out_labels = super().apply(images, labels, generator)
        blurred = torch.nn.functional.avg_pool2d(out_labels[:, None].double(), 3, 1, 1)[:, 0]
        return out_images, blurred.round().long()


class NaNs(Darken):
    def apply(self, images, labels, generator):
        out_images, out_labels = super().apply(images, labels, generator)
        out_images[:, :, 0, 0] = float("nan")
        return out_images, out_labels


class NumpyParameters(Darken):
    def parameters(self):
        return {"amount": np.float32(0.3)}


class Idle(Darken):
    def apply(self, images, labels, generator):
        return images.clone(), labels.clone()


def augmenter_suite(cls: type[Augmenter]) -> AugmenterSuite:
    return type("Suite", (AugmenterSuite,), {"augmenter_cls": cls, "params": {}})()


@pytest.mark.parametrize(("augmenter", "check", "message"), [
    (FlipsImageOnly, "test_labels_travel_with_their_pixels", "moved without their labels"),
    (FlipsLabelOnly, "test_labels_travel_with_their_pixels", "labels moved without their pixels"),
    (FlipsOthers, "test_labels_travel_with_their_pixels", "moved without their"),
    (GlobalRandom, "test_same_generator_same_batch", "draw randomness only from the generator"),
    (FlipsInPlace, "test_leaves_its_inputs_untouched", "modified the batch"),
    (Crops, "test_keeps_shapes_and_types", r"images \(4, 3, 32, 48\) came back as \(4, 3, 31, 48\)"),
    (IntLabels, "test_keeps_shapes_and_types", "torch.int32, not int64"),
    (SmoothsLabels, "test_labels_are_classes_or_ignore", "neither the batch's classes nor ignore"),
    (NaNs, "test_keeps_shapes_and_types", "NaN or inf"),
    (NumpyParameters, "test_declares_name_defaults_and_json_parameters", "not JSON"),
    (Idle, "test_changes_the_batch", "no seed changed the batch"),
])
def test_augmenter_suite_catches(augmenter: type[Augmenter], check: str, message: str) -> None:
    with pytest.raises(AssertionError, match=message):
        getattr(augmenter_suite(augmenter), check)()


def test_the_augmenter_suite_leaves_the_global_random_state_as_it_was() -> None:
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    augmenter_suite(Flip).test_same_generator_same_batch()
    assert torch.equal(torch.rand(3), expected)


# --- edit backends ----------------------------------------------------------------------------


@dataclass
class InvertOptions:
    strength: float = 1.0


class Invert(EditBackend):
    """A well-behaved backend: inverts the colours inside the mask (by `strength`, ±10 % drawn
    from the rng); repaints an uncovered area with the mean colour of the rest."""

    name = "invert"
    Params = InvertOptions

    def appearance(self, sample, value, prompt_src, prompt_edit, rng):
        amount = self.options.get("strength", 1.0) * float(rng.uniform(0.9, 1.0))
        image = sample.image.astype(np.float64)
        image[sample.mask] = amount * (255 - image[sample.mask]) + (1 - amount) * image[sample.mask]
        return EditedSample(np.round(image).astype(np.uint8), sample.label.copy(),
                            sample.mask.copy(), value, prompt_edit, {"amount": round(amount, 4)})

    def geometry(self, sample, moved, rng):
        image = moved.image.copy()
        image[moved.repaint] = moved.image[~moved.repaint].mean(0).astype(np.uint8)
        return EditedSample(image, moved.label.copy(), moved.mask.copy(), moved.value,
                            metadata={"repainted": int(moved.repaint.sum())})


class TestInvertBackendContract(EditBackendSuite):
    backend_cls = Invert
    options = {"strength": "0.8"}


class TakesAnything(Invert):
    """Keeps whatever options it gets: a typo would silently run with the defaults."""

    def __init__(self, options):
        self.options = dict(options)


class Undeclared(Invert):
    @dataclass
    class Params:
        strength: float  # no default


class RelabelsAppearance(Invert):
    def appearance(self, sample, value, prompt_src, prompt_edit, rng):
        out = super().appearance(sample, value, prompt_src, prompt_edit, rng)
        out.label = np.where(sample.mask, 0, sample.label)
        return out


class MovesBack(Invert):
    def geometry(self, sample, moved, rng):
        out = super().geometry(sample, moved, rng)
        out.label, out.mask = sample.label.copy(), sample.mask.copy()
        return out


class FloatOut(Invert):
    def appearance(self, sample, value, prompt_src, prompt_edit, rng):
        out = super().appearance(sample, value, prompt_src, prompt_edit, rng)
        out.image = out.image / 255.0
        return out


class HalfSize(Invert):
    def geometry(self, sample, moved, rng):
        out = super().geometry(sample, moved, rng)
        out.image = out.image[::2, ::2]
        return out


class UnseededBackend(Invert):
    def appearance(self, sample, value, prompt_src, prompt_edit, rng):
        return super().appearance(sample, value, prompt_src, prompt_edit, np.random.default_rng())


class PaintsTheSample(Invert):
    def appearance(self, sample, value, prompt_src, prompt_edit, rng):
        out = super().appearance(sample, value, prompt_src, prompt_edit, rng)
        sample.image[...] = out.image
        return out


class NumpyMeta(Invert):
    def geometry(self, sample, moved, rng):
        out = super().geometry(sample, moved, rng)
        out.metadata = {"repainted": np.int64(3)}
        return out


class NoEdit(Invert):
    def appearance(self, sample, value, prompt_src, prompt_edit, rng):
        return EditedSample(sample.image.copy(), sample.label.copy(), sample.mask.copy(), value)

    def geometry(self, sample, moved, rng):
        return EditedSample(moved.image.copy(), moved.label.copy(), moved.mask.copy(), moved.value)


def backend_suite(cls: type[EditBackend]) -> EditBackendSuite:
    return type("Suite", (EditBackendSuite,), {"backend_cls": cls})()


@pytest.mark.parametrize(("backend", "check", "message"), [
    (TakesAnything, "test_refuses_an_option_it_does_not_declare", "took the option"),
    (Undeclared, "test_declares_name_reference_and_options", r"without a default: \['strength'\]"),
    (RelabelsAppearance, "test_appearance_keeps_label_and_mask_aligned", "the label changed"),
    (MovesBack, "test_geometry_keeps_the_moved_label_and_mask", "not the moved one"),
    (FloatOut, "test_appearance_keeps_label_and_mask_aligned", "image must be uint8"),
    (HalfSize, "test_geometry_keeps_the_moved_label_and_mask", r"got uint8 \(24, 32, 3\)"),
    (UnseededBackend, "test_same_rng_same_edit", "same rng, different edits"),
    (PaintsTheSample, "test_leaves_its_inputs_untouched", "modified the sample's image"),
    (NoEdit, "test_changes_the_image", "no edit changed the image"),
])
def test_edit_backend_suite_catches(backend: type[EditBackend], check: str, message: str) -> None:
    with pytest.raises((AssertionError, pytest.fail.Exception), match=message):
        getattr(backend_suite(backend), check)()


def test_edit_backend_suite_catches_metadata_that_is_not_json() -> None:
    with pytest.raises(pytest.fail.Exception, match="not JSON"):
        backend_suite(NumpyMeta).test_metadata_is_json()


# --- prompt writers ---------------------------------------------------------------------------


class Polite(PromptWriter):
    """A well-behaved writer: the template, with a word of the model's."""

    name = "polite"

    def __init__(self, model: str, word: str = "please") -> None:
        self.model, self.word = model, word

    def rewrite(self, sample, attribute, value, template):
        return f"{template}, {self.word}", f"polite:{self.model}"


class TestPoliteContract(PromptWriterSuite):
    writer_cls = Polite
    model = "m"
    params = {"word": "kindly"}


class MultiLine(Polite):
    def rewrite(self, sample, attribute, value, template):
        return f"{template}\nsure!", f"polite:{self.model}"


class NoSource(Polite):
    def rewrite(self, sample, attribute, value, template):
        return template, ""


class PromptOnly(Polite):
    def rewrite(self, sample, attribute, value, template):
        return template


class Counting(Polite):
    calls = 0

    def rewrite(self, sample, attribute, value, template):
        self.calls += 1
        return f"{template} #{self.calls}", "counting"


class Drawing(Polite):
    """Samples its answer from a stream of its own, seeded differently per writer."""

    def __init__(self, model: str, word: str = "please") -> None:
        super().__init__(model, word)
        self.rng = np.random.default_rng()

    def rewrite(self, sample, attribute, value, template):
        # From 2**62 values: two draws alike would make the check below fail by another message.
        return f"{template}, {self.rng.integers(1 << 62)}", "drawing"


class EditsCaption(Polite):
    def rewrite(self, sample: Sample, attribute, value, template):
        sample.prompt = template
        return super().rewrite(sample, attribute, value, template)


class PositionalModel(Polite):
    def __init__(self, path: str) -> None:  # not `model`: segtk builds it with model=
        super().__init__(path)


def writer_suite(cls: type[PromptWriter]) -> PromptWriterSuite:
    return type("Suite", (PromptWriterSuite,), {"writer_cls": cls, "model": "m"})()


@pytest.mark.parametrize(("writer", "check", "message"), [
    (MultiLine, "test_rewrite_gives_a_one_line_prompt_and_its_source", "prompt of several lines"),
    (NoSource, "test_rewrite_gives_a_one_line_prompt_and_its_source", "empty source"),
    (PromptOnly, "test_rewrite_gives_a_one_line_prompt_and_its_source", "must return"),
    (Counting, "test_same_question_same_answer", "asked twice"),
    (Drawing, "test_same_question_same_answer", "asked twice"),
    (EditsCaption, "test_leaves_the_sample_untouched", "caption or class"),
])
def test_prompt_writer_suite_catches(writer: type[PromptWriter], check: str, message: str) -> None:
    with pytest.raises(AssertionError, match=message):
        getattr(writer_suite(writer), check)()


def test_prompt_writer_suite_builds_the_writer_as_segtk_does() -> None:
    with pytest.raises(TypeError, match="model"):
        writer_suite(PositionalModel).test_declares_its_name()
