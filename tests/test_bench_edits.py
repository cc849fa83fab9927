"""`segtk bench edits` end to end (in-process, demo model, 2 attributes, 3 images): subsets
built with the edit job, mIoU per subset, RmIoU and mR checked by hand from the written
files, geometry scored on object pixels only, resume reuses everything."""

from __future__ import annotations

import json
import types
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from PIL import Image

from segtk.benchmarks.edits import subset_miou
from segtk.cli import cli
from segtk.core.editing import EditedSample, Editor
from segtk.core.editkit import GeometryEditor
from segtk.core.hookspecs import hookimpl
from segtk.core.metrics import mean_iou
from segtk.core.plugins import get_plugin_manager, reset_plugin_manager

ARGS = ["bench", "edits", "--models", "demo", "--attributes", "color,size", "--values",
        "color=red,blue", "--values", "size=0.4", "--limit", "3", "--executor", "inline"]


def lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


@pytest.fixture(scope="module")
def bench_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("bench") / "edits"
    result = CliRunner().invoke(cli, [*ARGS, "--out", str(out)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "mR" in result.output
    return out


def test_subsets_and_outputs(bench_run: Path) -> None:
    out = bench_run
    for attr in ("color", "size"):
        assert (out / "edits" / attr / "manifest.jsonl").exists()
    for name in ("table.csv", "table.json", "miou.png", "results.jsonl", "run.json"):
        assert (out / name).exists(), name
    table = json.loads((out / "table.json").read_text())
    assert table["subsets"] == ["original", "original-object", "color", "size"]
    color = lines(out / "edits" / "color" / "manifest.jsonl")
    sources = sorted({r["source"] for r in color} | {
        r["source"] for r in lines(out / "edits" / "size" / "manifest.jsonl")})
    size_sources = {r["source"] for r in lines(out / "edits" / "size" / "manifest.jsonl")}
    assert table["images"]["demo"] == {"original": len(sources), "color": len(color),
                                       "original-object": len(size_sources),
                                       "size": len(lines(out / "edits" / "size" / "manifest.jsonl"))}
    assert Image.open(out / "miou.png").size[0] > 100


def test_miou_and_mr_by_hand(bench_run: Path) -> None:
    out = bench_run
    table = json.loads((out / "table.json").read_text())
    records = lines(out / "results.jsonl")
    totals: dict[str, torch.Tensor] = {}
    for rec in records:
        conf = torch.tensor(rec["confusion"])
        totals[rec["subset"]] = totals.get(rec["subset"], 0) + conf
    # plain mIoU for original/colour; object-pixel subsets: mean IoU over present classes
    orig = 100 * float(mean_iou(totals["original"]))
    color = 100 * float(mean_iou(totals["color"]))
    def object_miou(conf: torch.Tensor) -> float:
        conf = conf.double()
        k = conf.shape[0]
        tp = torch.diagonal(conf[:, :k])
        iou = tp / (conf.sum(1) + conf[:, :k].sum(0) - tp)
        return 100 * float(iou[conf.sum(1) > 0].mean())

    size, orig_obj = object_miou(totals["size"]), object_miou(totals["original-object"])
    assert table["miou"]["demo"] == pytest.approx(
        {"original": orig, "color": color, "size": size, "original-object": orig_obj})
    groups = {g["group"]: g for g in table["groups"]}
    assert groups["appearance"]["reference"] == "original"
    assert groups["appearance"]["rmiou"] == pytest.approx(color)
    assert groups["appearance"]["mr"] == pytest.approx(color / orig)
    assert groups["geometry"]["reference"] == "original-object"
    assert groups["geometry"]["mr"] == pytest.approx(size / orig_obj)
    csv = (out / "table.csv").read_text()
    assert f"{color / orig:.4f}" in csv


def test_geometry_scored_on_object_pixels(bench_run: Path) -> None:
    out = bench_run
    seen = set()
    for rec in lines(out / "results.jsonl"):
        if rec["subset"] == "size":
            folder = out / "edits" / "size"
            labels = folder / "labels"
        elif rec["subset"] == "original-object":
            folder = out / "edits" / "original-object"
            labels = out / "edits" / "size" / "source" / "labels"
        else:
            continue
        seen.add(rec["subset"])
        mask = np.asarray(Image.open(folder / "masks" / f"{rec['image']}.png")) > 0
        label = np.asarray(Image.open(labels / f"{rec['image']}.png"))
        assert 0 < np.asarray(rec["confusion"]).sum() == int((mask & (label != 255)).sum())
    assert seen == {"size", "original-object"}


def test_subset_miou_object_only() -> None:
    conf = torch.tensor([[8, 2, 0], [0, 0, 0]])  # class 0 object; class 1 only predicted
    assert subset_miou(conf) == pytest.approx(0.4)  # (0.8 + 0) / 2
    assert subset_miou(conf, object_only=True) == pytest.approx(0.8)


def test_resume_reuses_edits_and_results(bench_run: Path) -> None:
    out = bench_run
    before = (out / "results.jsonl").read_bytes()
    edits = (out / "edits" / "color" / "manifest.jsonl").read_bytes()
    result = CliRunner().invoke(cli, [*ARGS, "--out", str(out), "--resume"],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert (out / "results.jsonl").read_bytes() == before
    assert (out / "edits" / "color" / "manifest.jsonl").read_bytes() == edits
    again = CliRunner().invoke(cli, [*ARGS, "--out", str(out)])
    assert again.exit_code != 0 and "--resume" in again.output


def test_resume_after_a_lost_result(bench_run: Path, tmp_path: Path) -> None:
    import shutil

    out = tmp_path / "copy"
    shutil.copytree(bench_run, out)
    rows = (out / "results.jsonl").read_text().splitlines(keepends=True)
    (out / "results.jsonl").write_text("".join(rows[:-1]) + rows[-1][:10])  # torn last line
    result = CliRunner().invoke(cli, [*ARGS, "--out", str(out), "--resume"],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert json.loads((out / "table.json").read_text())["miou"] == json.loads(
        (bench_run / "table.json").read_text())["miou"]


# --- a third-party editor joins the tables by its kind ----------------------------------------


class Dim(Editor):
    """A third party's appearance editor: darkens the object."""

    name = attribute = "dim"
    kind = "appearance"
    values = ("half", "third")

    def edit(self, sample, value, rng):
        factor = {"half": 2, "third": 3}[value]
        image = np.where(sample.mask[..., None], sample.image // factor, sample.image)
        return EditedSample(image, sample.label.copy(), sample.mask.copy(), value)


class Squash(GeometryEditor):
    """A third party's geometry editor built on the editing kit: halves the object's size."""

    name = attribute = "squash"
    values = ("0.5",)

    def placement(self, sample, value, rng):
        return value, (0, 0)


@pytest.fixture
def third_party_editors():
    reset_plugin_manager()
    get_plugin_manager().register(
        types.SimpleNamespace(register_editors=hookimpl(lambda register: [register(Dim),
                                                                            register(Squash)])),
        name="segtk_third_party_editors")
    yield
    reset_plugin_manager()


def test_third_party_editors_join_the_groups_of_their_kind(third_party_editors, tmp_path) -> None:
    out = tmp_path / "third"
    args = ["bench", "edits", "--models", "demo", "--attributes", "dim,squash", "--limit", "2",
            "--executor", "inline", "--out", str(out)]
    result = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    table = json.loads((out / "table.json").read_text())
    assert table["subsets"] == ["original", "original-object", "dim", "squash"]
    groups = {g["group"]: g for g in table["groups"]}
    assert groups["appearance"]["subsets"] == ["dim"]  # both values, one subset
    assert groups["appearance"]["reference"] == "original"
    assert groups["geometry"]["subsets"] == ["squash"]
    assert groups["geometry"]["reference"] == "original-object"  # scored on object pixels
    miou = table["miou"]["demo"]
    assert groups["appearance"]["mr"] == pytest.approx(miou["dim"] / miou["original"])
    dim = lines(out / "edits" / "dim" / "manifest.jsonl")
    assert {r["value"] for r in dim} == {"half", "third"} and dim[0]["kind"] == "appearance"
    kinds = {r["subset"]: r["kind"] for r in lines(out / "results.jsonl")}
    assert kinds == {"original": "", "original-object": "", "dim": "appearance",
                     "squash": "geometry"}
    assert "squash" in result.output and "geometry" in result.output
