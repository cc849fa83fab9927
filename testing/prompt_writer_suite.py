"""The prompt writer contract suite: what `segtk.core.PromptWriter` promises the editors that
ask it for their edit prompts (`segtk edit --prompt-writer NAME --prompt-model MODEL`).

    from segtk.testing import PromptWriterSuite

    class TestMyWriter(PromptWriterSuite):
        writer_cls = MyWriter          # a PromptWriter subclass (what the plugin registers)
        model = "path/to/model"        # what --prompt-model names

Checks: `name` declared; it is built as `cls(model=MODEL)`, as segtk builds it; `rewrite(sample,
attribute, value, template)` returns (prompt, source), both non-empty text, the prompt one line
(it goes to the manifest and to the edit backend), for an object's and an image's sample and
several values; the same question gets the same answer, also from a second writer built alike
(resumed runs and `bench edits` variants rely on it); the sample is left untouched; and an
editor that has the writer records its prompt and source in the edit.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from segtk.core import EditedSample, Editor, PromptWriter, Sample
from segtk.testing.fakes import toy_sample

# (attribute, value, the editor's template prompt) asked of the writer
QUESTIONS = (("color", "red", "a photo of a red car"),
             ("weather", "snow", "a photo of a scene with road and car in snow"),
             ("material", "wood", "a photo of a car made of wood"))


class _Recolour(Editor):
    """An editor that asks its prompt writer (`Editor.write_prompt`), as the bundled ones do."""

    name = attribute = "suite-colour"
    values = ("red",)
    prompt_templates: ClassVar[dict[str, str]] = {"*": "a photo of {a_value} {cls}"}

    def edit(self, sample: Sample, value: str, rng: np.random.Generator) -> EditedSample:
        prompt, writer = self.write_prompt(sample, value)
        return EditedSample(sample.image.copy(), sample.label.copy(), sample.mask.copy(), value,
                            prompt, prompt_writer=writer)


class PromptWriterSuite:
    """Subclass as `TestSomething` with `writer_cls` and `model` set; pytest collects the checks."""

    writer_cls: ClassVar[type[PromptWriter]]
    # Not a ClassVar: set on the class, or per test (`self.model = ...` in an autouse fixture)
    # where it names a file only known then.
    model: Any = ""
    params: ClassVar[dict[str, Any]] = {}

    def make(self) -> PromptWriter:
        return self.writer_cls(model=self.model, **self.params)

    def answers(self, writer: PromptWriter) -> list[tuple[str, Any]]:
        out = []
        for level in ("object", "image"):
            for attribute, value, template in QUESTIONS:
                sample = toy_sample(level=level)
                out.append((f"{level} {attribute}={value}",
                            writer.rewrite(sample, attribute, value, template)))
        return out

    def test_declares_its_name(self) -> None:
        cls = self.writer_cls
        assert isinstance(cls.name, str) and cls.name, "name must be a non-empty string"
        assert isinstance(self.make(), PromptWriter)

    def test_rewrite_gives_a_one_line_prompt_and_its_source(self) -> None:
        for what, answer in self.answers(self.make()):
            assert isinstance(answer, tuple) and len(answer) == 2, \
                f"{what}: rewrite must return (prompt, source), got {answer!r}"
            prompt, source = answer
            assert isinstance(prompt, str) and prompt.strip(), f"{what}: empty prompt {prompt!r}"
            assert "\n" not in prompt and "\r" not in prompt, f"{what}: prompt of several lines"
            assert isinstance(source, str) and source.strip(), f"{what}: empty source {source!r}"

    def test_same_question_same_answer(self) -> None:
        first, second = self.make(), self.make()
        once, again, other = self.answers(first), self.answers(first), self.answers(second)
        for (what, a), (_, b), (_, c) in zip(once, again, other, strict=True):
            assert a == b, f"{what}: asked twice, {a!r} then {b!r}"
            assert a == c, f"{what}: a second writer built alike answers {c!r}, not {a!r}"

    def test_leaves_the_sample_untouched(self) -> None:
        writer = self.make()
        for level in ("object", "image"):
            sample, pristine = toy_sample(level=level), toy_sample(level=level)
            writer.rewrite(sample, "color", "red", "a photo of a red car")
            for part in ("image", "label", "mask"):
                assert np.array_equal(getattr(sample, part), getattr(pristine, part)), \
                    f"rewrite modified the sample's {part}"
            assert (sample.prompt, sample.class_name) == (pristine.prompt, pristine.class_name), \
                "rewrite modified the sample's caption or class"

    def test_an_editor_records_its_prompt_and_source(self) -> None:
        editor, writer = _Recolour(), self.make()
        editor.prompt_writer = writer
        sample = toy_sample()
        out = editor.edit(sample, "red", np.random.default_rng(0))
        expected = writer.rewrite(toy_sample(), "suite-colour", "red", editor.prompt(sample, "red"))
        assert (out.prompt, out.prompt_writer) == expected, \
            f"the edit records {(out.prompt, out.prompt_writer)!r}, the writer said {expected!r}"
