"""The editor contract suite: what `segtk.core.Editor` promises, checked on a small
toy scene (a car on a road, see `toy_sample`).

    from segtk.testing import EditorSuite

    class TestMyEditor(EditorSuite):
        editor_cls = MyEditor          # an Editor subclass (what the plugin registers)
        params = {"strength": 0.5}     # optional constructor arguments

Checks: `name`, `kind`, `level`, `values` and `prompt_templates` declared; each value is its
own canonical spelling and has a prompt, an unknown value is refused; for each value, the edited image is uint8 at the
source's size, the label holds only class ids or ignore and the mask is bool, both at that size;
an appearance edit keeps the label and mask and changes pixels inside the mask only; a geometry
edit changes labels only where the object was or went, and only to the object's classes there;
the same rng gives the same edit; the sample is left untouched; metadata is JSON; the editor
is what the registry finds under its name (`registered = False` for one no plugin registers).
An editor may raise SkipSample for a sample it cannot edit, but not for every value on the toy
scene (override `sample()` then).

Optional, for what a plugin promises beyond the contract: `readme` (a Path: every value and
every `defaults` key is documented there, in backticks) and `min_changed` (every value must
change more than this share of the mask's pixels; None, the default: some value must change
the image).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

from segtk.core import EDIT_KINDS, EditedSample, Editor, Sample, SegtkError, SkipSample, registry
from segtk.testing.fakes import toy_sample

LEVELS = ("object", "image")


class EditorSuite:
    """Subclass as `TestSomething` with `editor_cls` set; pytest collects the checks."""

    editor_cls: ClassVar[type[Editor]]
    params: ClassVar[dict[str, Any]] = {}
    # The values to try (default: every declared value).
    tried: ClassVar[tuple[str, ...] | None] = None
    # Whether some value must change the image (False for an editor that may be a no-op).
    expect_change: ClassVar[bool] = True
    # The share of the mask's pixels every value must change more than (None: see above).
    min_changed: ClassVar[float | None] = None
    # The plugin's README, which must document every value and `defaults` key.
    readme: ClassVar[Path | None] = None
    # Whether a plugin registers the editor (under its name).
    registered: ClassVar[bool] = True

    def make(self) -> Editor:
        return self.editor_cls(**self.params)

    def sample(self, seed: int = 0) -> Sample:
        """The toy scene, at the editor's level ("object": the car; "image": everything)."""
        return toy_sample(seed=seed, level=self.editor_cls.level)

    def values(self) -> tuple[str, ...]:
        return self.tried if self.tried is not None else tuple(self.editor_cls.values)

    def edits(self, seed: int = 0) -> list[tuple[str, Sample, EditedSample]]:
        """(value, sample, edit) for each value the editor does not skip; fails if it skips
        all of them."""
        editor = self.make()
        done, skipped = [], []
        for value in self.values():
            sample = self.sample()
            try:
                done.append((value, sample, editor.edit(sample, value, np.random.default_rng(seed))))
            except SkipSample as skip:
                assert isinstance(skip.reason, str) and skip.reason, "SkipSample needs a reason"
                skipped.append(f"{value}: {skip}")
        assert done, f"the editor skipped the toy sample for every value ({'; '.join(skipped)}); " \
                     "override sample() with one it can edit"
        return done

    def test_declares_name_kind_level_values_and_templates(self) -> None:
        cls = self.editor_cls
        assert isinstance(cls.name, str) and cls.name, "name must be a non-empty string"
        assert cls.kind in EDIT_KINDS, f"kind must be one of {EDIT_KINDS}, got {cls.kind!r}"
        assert cls.level in LEVELS, f"level must be one of {LEVELS}, got {cls.level!r}"
        values = cls.values
        assert isinstance(values, tuple) and values, "values must be a non-empty tuple of strings"
        assert all(isinstance(v, str) and v for v in values), f"values must be strings: {values}"
        assert len(set(values)) == len(values), f"duplicate values: {values}"
        templates = cls.prompt_templates
        assert isinstance(templates, dict) and all(
            isinstance(k, str) and isinstance(t, str) for k, t in templates.items()), \
            "prompt_templates must map values (or '*') to template strings"
        unknown = set(templates) - set(values) - {"*"}
        assert not unknown, f"prompt_templates name values the editor lacks: {sorted(unknown)}"

    def test_values_are_canonical_and_unknown_ones_refused(self) -> None:
        editor = self.make()
        for value in self.editor_cls.values:
            try:
                canonical = editor.check_value(value)
            except SegtkError as exc:
                raise AssertionError(f"check_value refuses the declared value {value!r} ({exc}): "
                                     "declare canonical values") from exc
            assert canonical == value, \
                f"check_value({value!r}) gives {canonical!r}: declare canonical values"
        with pytest.raises(SegtkError):
            editor.check_value("no-such-value")

    def test_every_value_has_a_prompt(self) -> None:
        editor, sample = self.make(), self.sample()
        for value in self.editor_cls.values:
            try:
                text = editor.prompt(sample, value)
            except (KeyError, IndexError, ValueError) as exc:
                raise AssertionError(f"{value}: the prompt template names an unknown field "
                                     f"({exc!r}); see Editor.prompt_templates") from exc
            assert isinstance(text, str) and text.strip(), f"{value}: empty edit prompt"

    def test_edit_gives_uint8_image_and_valid_label_at_the_source_size(self) -> None:
        for _, sample, out in self.edits():
            assert isinstance(out, EditedSample), f"edit returned {type(out).__name__}"
            shape = sample.image.shape
            image = np.asarray(out.image)
            assert image.shape == shape, f"{out.value}: image {image.shape}, expected {shape}"
            assert image.dtype == np.uint8, f"{out.value}: image dtype {image.dtype}, not uint8"
            label, mask = np.asarray(out.label), np.asarray(out.mask)
            assert label.shape == shape[:2], f"{out.value}: label {label.shape}, expected {shape[:2]}"
            assert np.issubdtype(label.dtype, np.integer), f"{out.value}: label dtype {label.dtype}"
            valid = (label == sample.ignore_index) | ((label >= 0) & (label < len(sample.classes)))
            assert valid.all(), f"{out.value}: label ids {sorted(set(label[~valid].tolist()))} " \
                                f"are neither classes nor ignore ({sample.ignore_index})"
            assert mask.shape == shape[:2] and mask.dtype == bool, \
                f"{out.value}: mask must be bool {shape[:2]}, got {mask.dtype} {mask.shape}"
            assert out.repaint is None or (np.asarray(out.repaint).shape == shape[:2]
                                           and np.asarray(out.repaint).dtype == bool), \
                f"{out.value}: repaint must be None or bool {shape[:2]}"

    def test_edit_records_the_value(self) -> None:
        for value, _, out in self.edits():
            assert out.value == value, f"edit({value!r}) recorded value {out.value!r}"

    def test_label_and_mask_follow_the_kind(self) -> None:
        for _, sample, out in self.edits():
            if self.editor_cls.kind == "appearance":
                assert np.array_equal(out.label, sample.label), \
                    f"{out.value}: an appearance edit changed the label"
                assert np.asarray(out.label).dtype == sample.label.dtype, \
                    f"{out.value}: an appearance edit changed the label's dtype"
                assert np.array_equal(out.mask, sample.mask), \
                    f"{out.value}: an appearance edit changed the mask"
                changed = (np.asarray(out.image) != sample.image).any(-1)
                assert not (changed & ~sample.mask).any(), \
                    f"{out.value}: {int((changed & ~sample.mask).sum())} pixels outside the mask changed"
            else:
                moved = out.mask | sample.mask
                assert np.array_equal(out.label[~moved], sample.label[~moved]), \
                    f"{out.value}: a geometry edit changed labels away from the object"
                inside = set(np.unique(out.label[out.mask]).tolist())
                source = set(np.unique(sample.label[sample.mask]).tolist())
                assert inside <= source, f"{out.value}: the moved object carries classes " \
                                         f"{sorted(inside - source)} it did not have"

    def test_same_rng_same_edit(self) -> None:
        for (_, _, a), (_, _, b) in zip(self.edits(seed=7), self.edits(seed=7), strict=True):
            assert np.array_equal(a.image, b.image), f"{a.value}: same rng, different images"
            assert np.array_equal(a.label, b.label) and np.array_equal(a.mask, b.mask), \
                f"{a.value}: same rng, different labels or masks"
            assert a.metadata == b.metadata, f"{a.value}: same rng, different metadata"

    def test_leaves_the_sample_untouched(self) -> None:
        editor = self.make()
        for value in self.values():
            sample, pristine = self.sample(), self.sample()
            try:
                editor.edit(sample, value, np.random.default_rng(0))
            except SkipSample:
                pass
            for part in ("image", "label", "mask"):
                assert np.array_equal(getattr(sample, part), getattr(pristine, part)), \
                    f"{value}: edit modified the sample's {part}"

    def test_metadata_is_json(self) -> None:
        for _, _, out in self.edits():
            try:
                json.dumps(out.metadata, allow_nan=False)
            except (TypeError, ValueError) as exc:
                pytest.fail(f"{out.value}: metadata is not JSON ({exc}): {out.metadata!r}")

    def test_changes_the_image(self) -> None:
        if not self.expect_change:
            pytest.skip("expect_change = False")
        done = self.edits()
        changed = [value for value, sample, out in done if not np.array_equal(out.image, sample.image)]
        assert changed, "no value changed the toy sample's image"
        if self.min_changed is None:
            return
        for value, sample, out in done:
            share = float((np.asarray(out.image) != sample.image).any(-1)[sample.mask].mean())
            assert share > self.min_changed, f"{value}: changed {share:.0%} of the mask's " \
                                             f"pixels, not more than {self.min_changed:.0%}"

    def test_registered_under_its_name(self) -> None:
        if not self.registered:
            pytest.skip("registered = False")
        name = self.editor_cls.name
        try:
            found = registry.editor(name)
        except SegtkError as exc:
            raise AssertionError(f"no usable editor is registered as {name!r}: {exc}") from exc
        assert found is self.editor_cls, \
            f"the editor registered as {name!r} is {found.__name__}, not {self.editor_cls.__name__}"

    def test_readme_documents_every_value_and_parameter(self) -> None:
        if self.readme is None:
            pytest.skip("no readme given")
        text = Path(self.readme).read_text()
        defaults = getattr(self.editor_cls, "defaults", {})
        missing = [f"`{k}`" for k in (*self.editor_cls.values, *defaults) if f"`{k}`" not in text]
        assert not missing, f"{self.readme} does not document {', '.join(missing)}"
