"""The captioner contract suite: what `segtk.core.Captioner` promises the edit job, which asks
it for the source caption P of each image (`segtk edit --captioner NAME`).

    from segtk.testing import CaptionerSuite

    class TestMyCaptioner(CaptionerSuite):
        captioner_cls = MyCaptioner    # a Captioner subclass (what the plugin registers)
        params = {"model": "path"}     # optional options (as --captioner-param KEY=VALUE)

Checks: `name` declared; `caption(image, mask, class_name)` returns one non-empty line of text
for an object's and an image's toy sample; the same image gets the same caption, also from a
second captioner built alike (resumed runs rely on it); the inputs are left untouched; a key the
captioner does not declare is refused.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import pytest

from segtk.core import Captioner, PluginError
from segtk.testing.fakes import toy_sample

LEVELS = ("object", "image")


class CaptionerSuite:
    """Subclass as `TestSomething` with `captioner_cls` set; pytest collects the checks."""

    captioner_cls: ClassVar[type[Captioner]]
    # Not a ClassVar: set on the class, or per test (`self.params = ...` in an autouse fixture)
    # where it names a file only known then.
    params: dict[str, Any] = {}

    def make(self) -> Captioner:
        return self.captioner_cls(dict(self.params))

    def captions(self, captioner: Captioner) -> dict[str, str]:
        out = {}
        for level in LEVELS:
            for seed in (0, 1):
                s = toy_sample(seed=seed, level=level)
                out[f"{level} {seed}"] = captioner.caption(s.image, s.mask, s.class_name)
        return out

    def test_declares_its_name(self) -> None:
        cls = self.captioner_cls
        assert isinstance(cls.name, str) and cls.name, "name must be a non-empty string"
        assert isinstance(self.make(), Captioner)

    def test_caption_is_one_line_of_text(self) -> None:
        for what, text in self.captions(self.make()).items():
            assert isinstance(text, str) and text.strip(), f"{what}: empty caption {text!r}"
            assert "\n" not in text and "\r" not in text, f"{what}: caption of several lines"

    def test_same_image_same_caption(self) -> None:
        first, second = self.make(), self.make()
        once, again, other = self.captions(first), self.captions(first), self.captions(second)
        assert once == again, "asked twice, two captions"
        assert once == other, "a second captioner built alike answers otherwise"

    def test_leaves_its_inputs_untouched(self) -> None:
        captioner = self.make()
        for level in LEVELS:
            sample, pristine = toy_sample(level=level), toy_sample(level=level)
            captioner.caption(sample.image, sample.mask, sample.class_name)
            assert np.array_equal(sample.image, pristine.image), "caption modified the image"
            assert np.array_equal(sample.mask, pristine.mask), "caption modified the mask"

    def test_refuses_an_unknown_parameter(self) -> None:
        with pytest.raises(PluginError, match="unknown parameter 'no_such_key'"):
            self.captioner_cls({**self.params, "no_such_key": "1"})
