"""CLIP sample filter (Gen4Seg Eq. 9): the arithmetic on hand-made embeddings, and the full
path with a tiny random CLIP saved offline and loaded through the real loader."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from segtk.core import EditedSample, Filter, PluginError, Sample
from segtk.testing import FilterSuite, tiny_clip
from segtk_filter_clip import ClipFilter, clip_scores, passes


def test_scores_on_hand_made_embeddings() -> None:
    i0, i1 = np.array([1.0, 0.0, 0.0]), np.array([3.0, 3.0, 0.0])  # 45 degrees apart
    t0, t1 = np.array([0.0, 0.0, 2.0]), np.array([0.0, 1.0, 1.0])
    s = clip_scores(i0, i1, t0, t1)
    assert s["image_image"] == pytest.approx(math.sqrt(0.5))
    assert s["image_text"] == pytest.approx(0.5)  # (1,1,0)/√2 · (0,1,1)/√2
    # Δimage = (1/√2 - 1, 1/√2, 0), Δtext = (0, 1/√2, 1/√2 - 1)
    di = np.array([math.sqrt(0.5) - 1, math.sqrt(0.5), 0])
    dt = np.array([0, math.sqrt(0.5), math.sqrt(0.5) - 1])
    assert s["direction"] == pytest.approx(di @ dt / np.linalg.norm(di) / np.linalg.norm(dt))
    assert passes(s)  # 0.707 ≥ 0.7, 0.5 ≥ 0.15, direction ≈ 0.5 ≥ 0.07
    assert not passes(s, min_image=0.75)
    assert not passes({**s, "direction": 0.05})
    same = clip_scores(i0, i0, t0, t1)
    assert same["image_image"] == pytest.approx(1.0) and same["direction"] == 0.0


def test_missing_model_names_the_option(tmp_path) -> None:
    with pytest.raises(PluginError) as err:
        ClipFilter()
    assert "clip.model" in str(err.value.hint)
    with pytest.raises(PluginError) as err:
        ClipFilter(model=str(tmp_path / "nope")).load()
    assert "clip.model" in err.value.message


def test_tiny_clip_through_the_real_loader(tmp_path) -> None:
    folder = tiny_clip(tmp_path)
    rng = np.random.default_rng(0)
    image = rng.integers(0, 256, (40, 48, 3), dtype=np.uint8)
    label = np.zeros((40, 48), np.int64)
    sample = Sample("a", image, label, np.ones_like(label, bool), ["car"], "car",
                    "a photo of a car")
    edited = EditedSample(255 - image, label, sample.mask, "red", "a photo of a red car")
    flt = ClipFilter(model=str(folder))
    flt.prepare()
    res = flt.apply(sample, edited)
    assert set(res.scores) == {"image_image", "image_text", "direction"}
    img, txt = flt.embed([image, 255 - image], ["a photo of a car", "a photo of a red car"])
    expected = clip_scores(img[0], img[1], txt[0], txt[1])
    assert res.scores == {k: round(v, 6) for k, v in expected.items()}
    assert res.keep == passes(expected)
    # thresholds decide: everything passes at -1, nothing at 1.01
    assert ClipFilter(str(folder), -1, -1, -1).apply(sample, edited).keep
    assert not ClipFilter(str(folder), min_image=1.01).apply(sample, edited).keep


def test_segtk_edit_with_clip_filter(tmp_path) -> None:
    from click.testing import CliRunner

    from segtk.cli import cli

    folder = tiny_clip(tmp_path)
    args = ["edit", "--plugin", "material", "--values", "wood", "--limit", "2", "--sheet-rows",
            "0", "--filter", "clip", "--filter-param", f"clip.model={folder}"]
    ok = CliRunner().invoke(cli, [*args, "--out", str(tmp_path / "a"),
                                  "--filter-param", "clip.min_image=-1",
                                  "--filter-param", "clip.min_text=-1",
                                  "--filter-param", "clip.min_direction=-1"])
    assert ok.exit_code == 0, ok.output
    rows = [json.loads(x) for x in (tmp_path / "a" / "manifest.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and set(rows[0]["filters"]["clip"]) == {"image_image", "image_text",
                                                                  "direction"}
    dropped = CliRunner().invoke(cli, [*args, "--out", str(tmp_path / "b"),
                                       "--filter-param", "clip.min_image=1.01"])
    assert dropped.exit_code == 1, dropped.output  # no edit left: an error, not an empty dataset
    assert "all 2 planned edits of 2 images were skipped (2 filtered:clip)" in dropped.output
    skipped = [json.loads(x) for x in (tmp_path / "b" / "skipped.jsonl").read_text().splitlines()]
    assert [r["reason"] for r in skipped] == ["filtered:clip"] * 2


@pytest.fixture(scope="module")
def clip_dir(tmp_path_factory) -> Path:
    return tiny_clip(tmp_path_factory.mktemp("clip"))


class TestClipContract(FilterSuite):
    """The filter contract (segtk.testing), with the tiny random CLIP: a bool keep and finite
    scores, the same decision twice and from a second filter, the inputs untouched, and the
    scrambled edit refused."""

    filter_cls = ClipFilter

    @pytest.fixture(autouse=True)
    def _model(self, clip_dir: Path) -> None:
        self.folder = clip_dir

    def make(self, cache_dir: Path) -> Filter:
        flt = ClipFilter(model=str(self.folder))
        flt.prepare(cache_dir=cache_dir)
        return flt
