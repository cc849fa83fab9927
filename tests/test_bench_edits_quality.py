"""`segtk bench edits --quality`: editing-quality metric plugins measured on every edited
subset from the files the edit job saved (source image, edit, mask, caption P, prompt P*),
checked by hand; their options through --metric-param; a bad metric refused before any edit;
the numbers in table.json, quality.csv and the printed table."""

from __future__ import annotations

import csv
import json
import math
import types
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np
import pytest
from click.testing import CliRunner

from segtk import api
from segtk.cli import cli
from segtk.core import Captioner, Metric, QualityPair, hookimpl, read_image, read_label
from segtk.core._plugins import get_plugin_manager, reset_plugin_manager

ARGS = ["bench", "edits", "--models", "demo", "--attributes", "color,size", "--values",
        "color=red,blue", "--values", "size=0.4", "--limit", "3", "--executor", "inline"]


@dataclass
class ChangeParams:
    scale: float = 1.0


class Change(Metric):
    """Mean absolute pixel change inside the mask, times `scale`."""

    name = "toy-change"
    better: ClassVar[Literal["lower", "higher"]] = "lower"
    Params = ChangeParams

    def scores(self, pairs: Sequence[QualityPair]) -> list[float]:
        return [self.params.scale * float(np.abs(p.original.astype(float) - p.edited)[p.mask].mean())
                for p in pairs]


class Count(Metric):
    """A set metric: the number of pairs whose prompt differs from their caption."""

    name = "toy-count"
    label = "prompts"
    better: ClassVar[Literal["lower", "higher"]] = "higher"
    per_image = False

    def reduce(self, pairs: Sequence[QualityPair], scores: Any) -> float:
        return float(sum(p.target_text != p.source_text and bool(p.target_text) for p in pairs))


@dataclass
class SizeParams:
    words: str = "thing"


class Size(Captioner):
    """Names the object's area in pixels (so each image gets its own caption)."""

    name = "toy-size"
    Params = SizeParams

    def caption(self, image, mask, class_name):
        return f"a photo of a {self.params.words} of {int(mask.sum())} pixels"


@pytest.fixture
def toy_metrics():
    reset_plugin_manager()
    get_plugin_manager().register(types.SimpleNamespace(
        register_metrics=hookimpl(lambda register: [register(Change), register(Count)]),
        register_captioners=hookimpl(lambda register: register(Size))),
        name="segtk-toy-metrics")
    yield
    reset_plugin_manager()


def lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def by_hand(folder: Path, scale: float) -> tuple[dict[str, float], float]:
    """Per edit: the mean |source - edit| inside its mask × scale; the count of prompts."""
    values, prompts = {}, 0.0
    for rec in lines(folder / "manifest.jsonl"):
        source = read_image(folder / "source" / "images" / f"{rec['source']}.png").astype(float)
        edited = read_image(folder / "images" / f"{rec['name']}.png").astype(float)
        mask = read_label(folder / "masks" / f"{rec['name']}.png") > 0
        values[rec["name"]] = scale * float(np.abs(source - edited)[mask].mean())
        prompts += rec["prompt"] != rec["prompt_source"] and bool(rec["prompt"])
    return values, prompts


def test_quality_columns_by_hand(toy_metrics, tmp_path: Path) -> None:
    out = tmp_path / "bench"
    run = CliRunner().invoke(cli, [*ARGS, "--out", str(out), "--quality", "toy-change,toy-count",
                                   "--metric-param", "toy-change.scale=2"],
                             catch_exceptions=False)
    assert run.exit_code == 0, run.output
    assert "editing quality" in run.output and "toy-change ↓" in run.output
    quality = json.loads((out / "table.json").read_text())["quality"]
    assert quality["columns"] == ["toy-change", "prompts"]
    assert quality["better"] == {"toy-change": "lower", "prompts": "higher"}
    assert set(quality["values"]) == {"color", "size-0.4"}  # the edited subsets
    for subset in ("color", "size-0.4"):
        per_edit, prompts = by_hand(out / "edits" / subset, 2.0)
        assert quality["per_image"][subset]["toy-change"] == pytest.approx(per_edit)
        assert quality["values"][subset]["toy-change"] == pytest.approx(np.mean(list(per_edit.values())))
        assert quality["values"][subset]["prompts"] == prompts > 0
        assert quality["images"][subset] == len(per_edit)
    rows = list(csv.DictReader((out / "quality.csv").open()))
    assert [r["subset"] for r in rows] == ["color", "size-0.4"]
    assert float(rows[0]["toy-change"]) == pytest.approx(quality["values"]["color"]["toy-change"],
                                                          rel=1e-5)
    config = json.loads((out / "run.json").read_text())["config"]
    assert config["quality"] == ["toy-change", "toy-count"]
    report = CliRunner().invoke(cli, ["report", str(out)], catch_exceptions=False)
    assert report.exit_code == 0, report.output
    page = (out / "report.html").read_text()
    section = page.split('id="quality"', 1)[1].split("</section>", 1)[0]
    assert "toy-change ↓" in section and "prompts ↑" in section
    color = quality["values"]["color"]["toy-change"]
    assert f'data-v="{color}">{color:.4f}<' in section
    # resumed without the options: the recorded metrics are measured again, same numbers
    again = CliRunner().invoke(cli, ["bench", "edits", "--out", str(out), "--resume"],
                               catch_exceptions=False)
    assert again.exit_code == 0, again.output
    assert json.loads((out / "table.json").read_text())["quality"] == quality


def test_python_api_and_a_set_metric_of_one_edit(toy_metrics, tmp_path: Path) -> None:
    with pytest.warns(UserWarning, match="needs at least 2 edits"):
        table = api.bench_edits("demo", "demo", "color", {"color": ["red"]}, tmp_path / "b",
                                limit=1, executor="inline", quality="toy-count,toy-change",
                                metric_params={"toy-change": {"scale": 3}})
    quality = table.details["quality"]
    assert quality["images"] == {"color": 1}
    assert math.isnan(quality["values"]["color"]["prompts"])
    per_edit, _ = by_hand(tmp_path / "b" / "edits" / "color", 3.0)
    assert quality["values"]["color"]["toy-change"] == pytest.approx(next(iter(per_edit.values())))


@pytest.mark.parametrize("extra,message", [
    (["--quality", "no-such-metric"], "no metric plugin named 'no-such-metric'"),
    (["--quality", "toy-change", "--metric-param", "toy-change.scael=2"],
     "unknown parameter 'scael' for metric 'toy-change'"),
    (["--quality", "toy-change", "--metric-param", "toy-count.x=1"],
     "metric 'toy-count' is not among --quality"),
])
def test_a_bad_metric_is_refused_before_any_edit(toy_metrics, tmp_path: Path, extra: list[str],
                                                 message: str) -> None:
    out = tmp_path / "bad"
    run = CliRunner().invoke(cli, [*ARGS, "--out", str(out), *extra])
    assert run.exit_code != 0 and message in run.output, run.output
    assert not (out / "edits").exists()


def test_bench_edits_captions_every_subset_with_the_captioner(toy_metrics, tmp_path: Path) -> None:
    out = tmp_path / "captioned"
    run = CliRunner().invoke(cli, [*ARGS, "--out", str(out), "--captioner", "toy-size",
                                   "--captioner-param", "words=blob"], catch_exceptions=False)
    assert run.exit_code == 0, run.output
    for subset in ("color", "size-0.4"):
        for rec in lines(out / "edits" / subset / "manifest.jsonl"):
            assert rec["captioner"] == "toy-size"
            assert rec["prompt_source"].startswith("a photo of a blob of ")
        if subset == "color":  # appearance: the saved mask is the source object's
            for rec in lines(out / "edits" / subset / "manifest.jsonl"):
                mask = read_label(out / "edits" / subset / "masks" / f"{rec['name']}.png") > 0
                assert rec["prompt_source"] == f"a photo of a blob of {int(mask.sum())} pixels"
    config = json.loads((out / "run.json").read_text())["config"]
    assert config["captioner"] == "toy-size" and config["captioner_params"] == {"words": "blob"}
    sub = json.loads((out / "edits" / "color" / "run.json").read_text())["config"]
    assert sub["captioner"] == "toy-size"
