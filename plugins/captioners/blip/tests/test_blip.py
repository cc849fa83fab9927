"""The BLIP captioner on a tiny random BLIP built offline: a string from the model's greedy
answer, the same under a seed and without one, the object's box, the contract suite."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from segtk.cli import cli
from segtk.core import PluginError, build, read_image
from segtk.testing import BLIP_WORDS, CaptionerSuite, tiny_blip, toy_sample
from segtk_captioner_blip import BlipCaptioner, object_box


@pytest.fixture(scope="module")
def blip_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_blip(tmp_path_factory.mktemp("blip"))


def test_object_box() -> None:
    mask = np.zeros((20, 30), bool)
    mask[5:10, 10:20] = True
    assert object_box(mask, 0.0) == (5, 10, 10, 20)
    assert object_box(mask, 0.2) == (4, 11, 8, 22)
    assert object_box(mask, 5.0) == (0, 20, 0, 30)  # within the image
    assert object_box(np.zeros((4, 4), bool), 0.1) == (0, 4, 0, 4)


def test_the_caption_is_the_models_greedy_answer(blip_dir: Path) -> None:
    captioner = build("captioner", "blip", {"model": str(blip_dir), "max_new_tokens": "6"})
    sample = toy_sample()
    text = captioner.caption(sample.image, sample.mask, sample.class_name)
    inputs = captioner.processor(images=sample.image, text="a photo of", return_tensors="pt")
    with torch.no_grad():
        tokens = captioner.model.generate(**inputs, max_new_tokens=6, do_sample=False)
    answer = " ".join(captioner.processor.decode(tokens[0], skip_special_tokens=True).split())
    assert text == answer or (answer == "a photo of" and text == "a photo of a car")
    assert set(text.split()) <= set(BLIP_WORDS)  # words of the tiny vocabulary, one line
    torch.manual_seed(123)
    again = captioner.caption(sample.image, sample.mask, sample.class_name)
    torch.manual_seed(7)
    assert again == text == captioner.caption(sample.image, sample.mask, sample.class_name)


def test_the_object_region_captions_the_box(blip_dir: Path) -> None:
    whole = BlipCaptioner({"model": str(blip_dir), "prompt": ""})
    boxed = BlipCaptioner({"model": str(blip_dir), "prompt": "", "region": "object",
                           "margin": "0"})
    seen: list[np.ndarray] = []

    class Recording:  # the processor, noting the image BLIP is shown
        def __init__(self, inner) -> None:
            self.inner = inner

        def __call__(self, *args, **kwargs):
            seen.append(kwargs["images"])
            return self.inner(*args, **kwargs)

        def __getattr__(self, name: str):
            return getattr(self.inner, name)

    boxed.processor = Recording(boxed.processor)
    sample = toy_sample()
    top, bottom, left, right = object_box(sample.mask, 0.0)
    crop = sample.image[top:bottom, left:right]
    full_mask = np.ones(crop.shape[:2], bool)
    assert boxed.caption(sample.image, sample.mask, "car") == whole.caption(crop, full_mask, "car")
    assert len(seen) == 1 and np.array_equal(seen[0], crop)


def test_a_missing_model_is_refused(tmp_path: Path) -> None:
    with pytest.raises(PluginError, match="needs a BLIP captioning model"):
        BlipCaptioner()
    with pytest.raises(PluginError, match="cannot load a BLIP"):
        BlipCaptioner({"model": str(tmp_path)})


class TestBlipContract(CaptionerSuite):
    captioner_cls = BlipCaptioner

    @pytest.fixture(autouse=True)
    def _model(self, blip_dir: Path) -> None:
        self.params = {"model": str(blip_dir)}


def test_segtk_edit_captions_with_blip_only_when_asked(blip_dir: Path, tmp_path: Path) -> None:
    """`segtk edit --captioner blip`: the caption P in the manifest is BLIP's, and the weather
    editor's prompt "{caption} in the snow" is written from it; without --captioner the class
    template stays; --resume keeps the captioner the run recorded."""
    def manifest(out: Path) -> list[dict]:
        return [json.loads(x) for x in (out / "manifest.jsonl").read_text().splitlines()]

    base = ["edit", "--plugin", "weather", "--values", "snow", "--limit", "2", "--sheet-rows", "0"]
    run = CliRunner().invoke(cli, [*base, "--out", str(tmp_path / "b"), "--captioner", "blip",
                                   "--captioner-param", f"model={blip_dir}",
                                   "--captioner-param", "max_new_tokens=5"])
    assert run.exit_code == 0, run.output
    captioner = BlipCaptioner({"model": str(blip_dir), "max_new_tokens": 5})
    rows = manifest(tmp_path / "b")
    assert len(rows) == 2
    for row in rows:
        source = tmp_path / "b" / "source" / "images" / f"{row['source']}.png"
        image = read_image(source)
        expected = captioner.caption(image, np.ones(image.shape[:2], bool), "")
        assert row["captioner"] == "blip" and row["prompt_source"] == expected
        assert row["prompt"] == f"{expected} in the snow"
    plain = CliRunner().invoke(cli, [*base, "--out", str(tmp_path / "t")])
    assert plain.exit_code == 0, plain.output
    assert all("captioner" not in r and r["prompt_source"].startswith("a photo of a scene")
               for r in manifest(tmp_path / "t"))
    config = json.loads((tmp_path / "b" / "run.json").read_text())["config"]
    assert config["captioner"] == "blip" and config["captioner_params"]["max_new_tokens"] == "5"
    again = CliRunner().invoke(cli, ["edit", "--out", str(tmp_path / "b"), "--resume"])
    assert again.exit_code == 0, again.output
    assert manifest(tmp_path / "b") == rows
    lonely = CliRunner().invoke(cli, [*base, "--out", str(tmp_path / "x"),
                                      "--captioner-param", "model=DIR"])
    assert lonely.exit_code != 0 and "--captioner-param needs --captioner NAME" in lonely.output
