"""`segtk bench edits` end to end (in-process, demo model, 2 attributes, 3 images): subsets
built with the edit job (one colour drawn per image, one subset per size level), mIoU per
subset, RmIoU and mR checked by hand from the written files, geometry scored on object pixels
only, every subset on the object-centric images, resume reuses everything."""

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
from segtk.core import EditBackend, EditedSample, Editor, hookimpl, load_dataset, write_png
from segtk.core._metrics import mean_iou
from segtk.core._plugins import get_plugin_manager, reset_plugin_manager
from segtk.editkit import GeometryEditor
from segtk.jobs.edit import picked_value

ARGS = ["bench", "edits", "--models", "demo", "--attributes", "color,size", "--values",
        "color=red,blue,green", "--values", "size=0.2,0.4", "--limit", "3", "--executor", "inline"]
LEVELS = ("size-0.2", "size-0.4")


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
    for subset in ("color", *LEVELS):
        assert (out / "edits" / subset / "manifest.jsonl").exists()
    for name in ("table.csv", "table.json", "miou.png", "results.jsonl", "run.json"):
        assert (out / name).exists(), name
    table = json.loads((out / "table.json").read_text())
    assert table["subsets"] == ["original", "original-object", "color", *LEVELS]
    edits = {s: lines(out / "edits" / s / "manifest.jsonl") for s in ("color", *LEVELS)}
    sources = sorted({r["source"] for recs in edits.values() for r in recs})
    size_sources = {r["source"] for s in LEVELS for r in edits[s]}
    assert table["images"]["demo"] == {"original": len(sources), "original-object": len(size_sources),
                                       **{s: len(recs) for s, recs in edits.items()}}
    assert Image.open(out / "miou.png").size[0] > 100


def test_one_colour_drawn_per_image_and_one_subset_per_level(bench_run: Path) -> None:
    color = lines(bench_run / "edits" / "color" / "manifest.jsonl")
    sources = [r["source"] for r in color]
    skipped = lines(bench_run / "edits" / "color" / "skipped.jsonl") \
        if (bench_run / "edits" / "color" / "skipped.jsonl").exists() else []
    assert len(sources) == len(set(sources)) > 0  # one edit per image, not one per value
    assert len(sources) + len(skipped) == 3
    assert {r["value"] for r in color} <= {"red", "blue", "green"}
    assert [r["value"] for r in color] == [picked_value(["red", "blue", "green"], 0, s)
                                           for s in sources]
    for level in LEVELS:
        assert {r["value"] for r in lines(bench_run / "edits" / level / "manifest.jsonl")} \
            == {level.split("-")[1]}
    config = json.loads((bench_run / "edits" / "color" / "run.json").read_text())["config"]
    assert config["pick"] == "one" and "pick" not in json.loads(
        (bench_run / "edits" / "size-0.2" / "run.json").read_text())["config"]


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

    sizes = [object_miou(totals[s]) for s in LEVELS]
    orig_obj = object_miou(totals["original-object"])
    assert table["miou"]["demo"] == pytest.approx(
        {"original": orig, "color": color, **dict(zip(LEVELS, sizes, strict=True)),
         "original-object": orig_obj})
    groups = {g["group"]: g for g in table["groups"]}
    assert groups["appearance"]["reference"] == "original"
    assert groups["appearance"]["rmiou"] == pytest.approx(color)
    assert groups["appearance"]["mr"] == pytest.approx(color / orig)
    assert groups["geometry"]["reference"] == "original-object"
    assert groups["geometry"]["subsets"] == list(LEVELS)
    assert groups["geometry"]["mr"] == pytest.approx(np.mean(sizes) / orig_obj)  # Tab. III
    csv = (out / "table.csv").read_text()
    assert f"{color / orig:.4f}" in csv


def test_geometry_scored_on_object_pixels(bench_run: Path) -> None:
    out = bench_run
    seen = set()
    for rec in lines(out / "results.jsonl"):
        if rec["subset"] in LEVELS:
            folder = out / "edits" / rec["subset"]
            labels = folder / "labels"
        elif rec["subset"] == "original-object":
            folder = out / "edits" / "original-object"
            labels = out / "edits" / LEVELS[0] / "source" / "labels"
        else:
            continue
        seen.add(rec["subset"])
        mask = np.asarray(Image.open(folder / "masks" / f"{rec['image']}.png")) > 0
        label = np.asarray(Image.open(labels / f"{rec['image']}.png"))
        assert 0 < np.asarray(rec["confusion"]).sum() == int((mask & (label != 255)).sum())
    assert seen == {*LEVELS, "original-object"}


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
    assert table["subsets"] == ["original", "original-object", "dim", "squash-0.5"]
    groups = {g["group"]: g for g in table["groups"]}
    assert groups["appearance"]["subsets"] == ["dim"]  # one value drawn per image, one subset
    assert groups["appearance"]["reference"] == "original"
    assert groups["geometry"]["subsets"] == ["squash-0.5"]  # a subset per level
    assert groups["geometry"]["reference"] == "original-object"  # scored on object pixels
    miou = table["miou"]["demo"]
    assert groups["appearance"]["mr"] == pytest.approx(miou["dim"] / miou["original"])
    dim = lines(out / "edits" / "dim" / "manifest.jsonl")
    assert {r["value"] for r in dim} <= {"half", "third"} and dim[0]["kind"] == "appearance"
    assert len(dim) == len({r["source"] for r in dim})
    kinds = {r["subset"]: r["kind"] for r in lines(out / "results.jsonl")}
    assert kinds == {"original": "", "original-object": "", "dim": "appearance",
                     "squash-0.5": "geometry"}
    assert "squash" in result.output and "geometry" in result.output


# --- every subset on the object-centric images (Gen4Seg §IV-A) ---------------------------------


def folder_without_an_object(root: Path) -> Path:
    """The first 3 demo images as a folder dataset; the last one's label is all ignore, so it
    has no salient object: object edits skip it, image edits would not."""
    data = load_dataset("demo", None, 3)
    (root / "labels").mkdir(parents=True)
    (root / "classes.txt").write_text("\n".join(data.classes) + "\n")
    for i, name in enumerate(data.names):
        item = data[i]
        label = item.label if i < 2 else np.full_like(item.label, 255)
        write_png(root / "images" / f"{name}.png", item.image)
        write_png(root / "labels" / f"{name}.png", label.astype(np.uint8))
    return root


def test_image_edits_share_the_object_centric_images(tmp_path: Path) -> None:
    data = folder_without_an_object(tmp_path / "data")
    args = ["bench", "edits", "--models", "demo", "--data", f"folder:{data}", "--attributes",
            "color,style", "--values", "style=sketch", "--executor", "inline"]
    run = CliRunner().invoke(cli, [*args, "--out", str(tmp_path / "a")], catch_exceptions=False)
    assert run.exit_code == 0, run.output
    sources = {s: {r["source"] for r in lines(tmp_path / "a" / "edits" / s / "manifest.jsonl")}
               for s in ("color", "style")}
    assert len(sources["color"]) == 2 and sources["style"] == sources["color"]
    skipped = lines(tmp_path / "a" / "edits" / "style" / "skipped.jsonl")
    assert [r["source"] for r in skipped] == sorted(set(load_dataset(f"folder:{data}").names)
                                                    - sources["color"])
    everything = CliRunner().invoke(cli, [*args, "--all-images", "--out", str(tmp_path / "b")],
                                    catch_exceptions=False)
    assert everything.exit_code == 0, everything.output
    style = lines(tmp_path / "b" / "edits" / "style" / "manifest.jsonl")
    assert len({r["source"] for r in style}) == 3  # the old behaviour, on request
    config = json.loads((tmp_path / "a" / "edits" / "style" / "run.json").read_text())["config"]
    assert config["object_centric"] is True
    assert "object_centric" not in json.loads(
        (tmp_path / "a" / "edits" / "color" / "run.json").read_text())["config"]


class Remake(Editor):
    """A fake backend's reference editor (like diffusion's recon), image-level: without the
    object-centric selection it would cover every image."""

    name = attribute = "remake"
    level = "image"
    values = ("remake",)

    def edit(self, sample, value, rng):
        return EditedSample(sample.image // 2 + 1, sample.label.copy(), sample.mask.copy(), value)


class Halves(EditBackend):
    name, reference = "halves", "remake"

    def appearance(self, sample, value, prompt_src, prompt_edit, rng):
        return EditedSample(sample.image // 2, sample.label.copy(), sample.mask.copy(), value)

    def geometry(self, sample, moved, rng):
        return moved


@pytest.fixture
def backend_with_reference():
    reset_plugin_manager()
    get_plugin_manager().register(types.SimpleNamespace(
        register_editors=hookimpl(lambda register: register(Remake)),
        register_edit_backends=hookimpl(lambda register: register(Halves))), name="segtk_halves")
    yield
    reset_plugin_manager()


def test_the_reference_subset_covers_the_images_of_every_appearance_subset(
        backend_with_reference, tmp_path: Path) -> None:
    data = folder_without_an_object(tmp_path / "data")
    out = tmp_path / "r"
    result = CliRunner().invoke(cli, [
        "bench", "edits", "--models", "demo", "--data", f"folder:{data}", "--attributes",
        "color,style", "--backend", "halves", "--executor", "inline", "--out", str(out)],
        catch_exceptions=False)
    assert result.exit_code == 0, result.output
    sources = {s: {r["source"] for r in lines(out / "edits" / s / "manifest.jsonl")}
               for s in ("color", "style", "recon")}
    assert len(sources["recon"]) == 2 and sources["color"] == sources["style"] == sources["recon"]
    table = json.loads((out / "table.json").read_text())
    group = next(g for g in table["groups"] if g["group"] == "appearance")
    assert group["reference"] == "recon" and table["images"]["demo"]["recon"] == 2


def _run_files(out: Path) -> dict[str, bytes]:
    """Every file of a bench edits folder but run.json and the locks; results.jsonl's lines in
    key order (shards land in any order)."""
    found = {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*"))
             if p.is_file() and p.name not in ("run.json", ".lock")}
    found["results.jsonl"] = b"\n".join(sorted(found["results.jsonl"].splitlines()))
    return found


@pytest.mark.slow
@pytest.mark.parametrize("executor", ["local", "ray"])
def test_every_executor_writes_the_inline_run_byte_for_byte(bench_run: Path, tmp_path: Path,
                                                            executor: str) -> None:
    """The edited subsets, their PNGs and manifests, the records and the table do not depend
    on the executor, its workers or the chunk of a shard."""
    if executor == "ray":
        pytest.importorskip("ray")
    out = tmp_path / executor
    args = [*ARGS[:-2], "--executor", executor, "--workers", "2", "--chunk", "1", "--out", str(out)]
    try:
        result = CliRunner().invoke(cli, args, catch_exceptions=False)
    finally:
        if executor == "ray":
            import ray

            ray.shutdown()
    assert result.exit_code == 0, result.output
    assert _run_files(out) == _run_files(bench_run)
