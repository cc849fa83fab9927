"""`segtk bench edits` end to end (in-process, demo model, 2 attributes, 3 images): subsets
built with the edit job (one colour drawn per image, one subset per size level), mIoU per
subset, RmIoU and mR checked by hand from the written files, geometry scored on object pixels
only, every subset on the object-centric images, resume reuses everything."""

from __future__ import annotations

import dataclasses
import json
import types
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from PIL import Image

from segtk.benchmarks.edits import subset_miou
from segtk.cli import cli
from segtk.core import (
    Captioner,
    EditBackend,
    EditedSample,
    Editor,
    Filter,
    FilterResult,
    PromptWriter,
    Segmenter,
    hookimpl,
    load_dataset,
    load_segmenter,
    write_png,
)
from segtk.core._metrics import mean_iou
from segtk.core._plugins import get_plugin_manager, reset_plugin_manager
from segtk.editkit import GeometryEditor
from segtk.jobs import edit as edit_job
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


def test_object_masks_are_the_editors_pick_and_an_existing_mask_is_kept(tmp_path: Path) -> None:
    # The geometry reference scores each source image on the object the geometry editors pick:
    # the same rule, min_area and things; no file where there is no object; a mask already
    # there (a resumed run) is kept and the images after it are still written.
    from segtk.benchmarks.edits import object_masks
    from segtk.editkit._selection import DEFAULT_MIN_AREA, prepare_sample

    data = load_dataset("demo")
    names = data.names[:5]

    def picked(name: str, things: list[str] | None = None) -> np.ndarray | None:
        item = data[data.names.index(name)]
        sample = prepare_sample(name, item.image, item.label, data.classes, "object",
                                DEFAULT_MIN_AREA, None, None, data.ignore_index, things=things)
        return getattr(sample, "mask", None)

    expected = {n: picked(n) for n in names}
    assert 0 < sum(m is not None for m in expected.values()) < len(names)  # both cases
    folder = tmp_path / "masks"
    folder.mkdir()
    first = next(n for n in names if expected[n] is not None)
    first_mask = expected[first]
    assert first_mask is not None
    kept = np.zeros(first_mask.shape, np.uint8)
    kept[0, 0] = 255
    write_png(folder / f"{first}.png", kept)
    assert object_masks(data, names, folder) == str(folder)
    for name in names:
        path = folder / f"{name}.png"
        if name == first:
            assert np.array_equal(np.asarray(Image.open(path)), kept)
        elif expected[name] is None:
            assert not path.exists()
        else:
            mask = expected[name]
            assert mask is not None
            png = np.asarray(Image.open(path))
            assert png.dtype == np.uint8
            assert np.array_equal(png, mask.astype(np.uint8) * 255)
    things = tmp_path / "things"
    things.mkdir()
    object_masks(data, names, things, things=["car", "person"])  # only thing classes may count
    written = {p.stem for p in things.glob("*.png")}
    with_things = {n for n in names if picked(n, ["car", "person"]) is not None}
    assert written == with_things != {n for n in names if expected[n] is not None}


class SpyModel(Segmenter):
    """The demo model behind a spy: the sizes of the batches it is asked for."""

    name = "demo"

    def __init__(self, device: str) -> None:
        self.inner = load_segmenter("demo")
        self.classes, self.ignore_index = self.inner.classes, self.inner.ignore_index
        self.device = torch.device(device)
        self.batches: list[int] = []

    def predict(self, images: torch.Tensor) -> torch.Tensor:
        self.batches.append(images.shape[0])
        return self.inner.predict(images)


def test_a_shard_scores_its_own_images_with_its_model_split_batches_and_masks(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # One shard in-process: the model and dataset it names (device, split), batches of its
    # batch size on the model's device, a record per image of the shard and no other, the
    # object pixels of an object-only subset (any non-zero mask value; no mask file: nothing
    # scored), and whole images where the subset is not object-only, masks or not.
    from segtk.benchmarks import edits as bench_edits
    from segtk.core import confusion
    from segtk.jobs.batching import batch_tensors

    asked: dict[str, object] = {}
    spy = SpyModel("cpu")
    spy.device = torch.device("cpu", 0)  # told apart from a default: the model's own device

    def segmenter(spec: str, device: str) -> SpyModel:
        asked["model"] = (spec, device)
        return spy

    def dataset(spec: str, split: str | None):
        asked["data"] = (spec, split)
        return data

    def tensors(batch, device):
        asked["batch device"] = device
        return batch_tensors(batch, device)

    monkeypatch.setattr(bench_edits, "cached_segmenter", segmenter)
    monkeypatch.setattr(bench_edits, "load_dataset", dataset)
    monkeypatch.setattr(bench_edits, "batch_tensors", tensors)
    data = dataclasses.replace(load_dataset("demo"), ignore_index=7)  # "pole" is not scored
    names = tuple(data.names[1:6:2])  # three of the eight images
    masks = tmp_path / "masks"
    masks.mkdir()
    height, width = data[0].label.shape[:2]
    half = np.zeros((height, width), np.uint8)
    half[: height // 2] = 1  # 0/1, not 0/255: any non-zero value marks the object
    write_png(masks / f"{names[0]}.png", half)
    write_png(masks / f"{names[1]}.png", half * 255)  # names[2]: no mask file
    whole = bench_edits.Subset("original", "demo", "val", names)
    objects = bench_edits.Subset("original-object", "demo", "val", names, True, str(masks))
    unmasked = bench_edits.Subset("color", "demo", "val", names, False, str(masks))
    k = len(data.classes)
    for subset in (whole, objects, unmasked):
        spy.batches.clear()
        shard = bench_edits.Shard("demo", subset, names, batch_size=2, device="cuda:7")
        records = bench_edits.run_shard(shard)
        assert asked == {"model": ("demo", "cuda:7"), "data": ("demo", "val"),
                         "batch device": spy.device}
        assert spy.batches == [2, 1]
        assert [r.image for r in records] == list(names)
        assert [r.key for r in records] == [shard.key(n) for n in names]
        for record in records:
            item = data[data.names.index(record.image)]
            pred = spy.inner.predict(torch.from_numpy(item.image).permute(2, 0, 1)[None].float() / 255)[0]
            label = torch.from_numpy(item.label.astype(np.int64))
            if subset.object_only:
                inside = torch.zeros_like(label, dtype=torch.bool)
                if record.image != names[2]:
                    inside[: label.shape[0] // 2] = True
                label = torch.where(inside, label, data.ignore_index)
            assert record.confusion == confusion(pred, label, k, data.ignore_index)[0].tolist()
        if subset.object_only:
            assert sum(map(sum, records[2].confusion)) == 0  # no mask: nothing scored


def test_object_masks_follow_the_objects_rule() -> None:
    # The largest region is a one-pixel comb (thin: no editor takes it), the next a solid
    # square: "ranked" picks the square, "largest" gives up, as the editors do.
    from segtk.benchmarks.edits import object_masks
    from segtk.core import Dataset, Item

    label = np.full((40, 40), 255, np.int64)
    label[0::2, :19] = 0  # comb teeth
    label[:, 0] = 0  # and its back: one region of 400 pixels
    label[:19, 21:39] = 1  # the square: 342 pixels, 21% of the image
    item = Item("comb", np.zeros((40, 40, 3), np.uint8), label)
    data = Dataset("comb", ["comb", "square"], [("comb", lambda: item)])
    for objects, expected in (("largest", None), ("ranked", label == 1)):
        with TemporaryDirectory() as tmp:
            object_masks(data, ["comb"], Path(tmp), objects=objects)
            path = Path(tmp) / "comb.png"
            assert path.exists() == (expected is not None)
            if expected is not None:
                assert np.array_equal(np.asarray(Image.open(path)) > 0, expected)


def test_table_csv_json_and_chart_say_what_the_result_holds(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    from segtk.benchmarks import edits as bench_edits

    result = {
        "models": ["demo", "hf:runs/seg"], "subsets": ["original", "color", "size-0.2"],
        "miou": {"demo": {"original": 61.23456, "color": 40.5, "size-0.2": 55.0},
                 "hf:runs/seg": {"original": 70.0, "color": 66.66666}},
        "images": {"demo": {"original": 3, "color": 2, "size-0.2": 1},
                   "hf:runs/seg": {"original": 3, "color": 2}},
        "groups": [{"model": "demo", "group": "appearance", "reference": "original",
                    "reference_miou": 61.23456, "rmiou": 40.5, "mr": 0.66139, "subsets": ["color"]},
                   {"model": "demo", "group": "geometry", "reference": "original-object",
                    "reference_miou": 50.0, "rmiou": 55.0, "mr": 1.1, "subsets": ["size-0.2", "x"]}],
    }
    charts: list = []
    monkeypatch.setattr(bench_edits, "save_figure", lambda fig, path: charts.append((fig, path)))
    paths = bench_edits.write_outputs(result, tmp_path)
    assert paths == [tmp_path / "table.csv", tmp_path / "table.json", tmp_path / "miou.png"]
    assert (tmp_path / "table.csv").read_bytes() == (
        b"model,subset,miou,images\n"
        b"demo,original,61.2346,3\ndemo,color,40.5000,2\ndemo,size-0.2,55.0000,1\n"
        b"hf:runs/seg,original,70.0000,3\nhf:runs/seg,color,66.6667,2\n"
        b"\n"
        b"model,group,reference,reference_miou,rmiou,mr,subsets\n"
        b"demo,appearance,original,61.2346,40.5000,0.6614,color\n"
        b"demo,geometry,original-object,50.0000,55.0000,1.1000,size-0.2 x\n")
    assert json.loads((tmp_path / "table.json").read_text()) == result
    (fig, path), = charts
    assert path == tmp_path / "miou.png"
    ax = fig.axes[0]
    assert (ax.get_ylabel(), ax.get_title()) == ("mIoU %", "mIoU per subset (Gen4Seg attribute edits)")
    assert [t.get_text() for t in ax.get_xticklabels()] == result["subsets"]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["demo", "hf:seg"]  # no folder
    bars = [(round(p.get_x() + p.get_width() / 2, 6), p.get_height()) for p in ax.patches]
    heights = [h for _, h in bars]
    assert heights[:3] == [61.23456, 40.5, 55.0] and heights[3:5] == [70.0, 66.66666]
    assert np.isnan(heights[5])  # a subset a model was not scored on: no bar
    centres = [x for x, _ in bars]
    assert centres == [-0.2, 0.8, 1.8, 0.2, 1.2, 2.2]  # side by side around each subset's tick
    assert {round(p.get_width(), 6) for p in ax.patches} == {0.4}  # 0.8 shared by the models
    assert tuple(fig.get_size_inches()) == pytest.approx((1.1 * 3 * 2 + 2, 4))  # grows with both
    one = {**result, "models": ["demo"], "groups": []}
    bench_edits.plot(one, tmp_path / "one.png")
    fig = charts[-1][0]
    assert {round(p.get_width(), 6) for p in fig.axes[0].patches} == {0.8}
    assert tuple(fig.get_size_inches()) == pytest.approx((1.1 * 3 + 2, 4))
    bench_edits.plot({**one, "subsets": ["original"]}, tmp_path / "narrow.png")
    assert tuple(charts[-1][0].get_size_inches()) == pytest.approx((5, 4))  # never narrower


# --- the subsets as build_subsets makes them -----------------------------------------------------


def test_subsets_default_to_segtk_edits_settings_and_pass_the_editor_params(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Without options, build_subsets edits as `segtk edit` does by default (classical backend,
    # seed 0, the default object), reads the dataset, split and limit it is given, and hands
    # the editor its parameters: the run.json of each subset says so.
    from segtk.benchmarks import edits as bench_edits
    from segtk.editkit import DEFAULT_MIN_AREA

    asked = []

    def dataset(spec: str, split: str | None, limit: int | None = None):
        asked.append((spec, split, limit))
        return load_dataset(spec, None, limit)

    monkeypatch.setattr(bench_edits, "load_dataset", dataset)
    sheets: list[int] = []
    built: list[str] = []
    contact_sheet = edit_job.contact_sheet

    def sheet(*args, **kwargs):
        sheets.append(args[-1])
        return contact_sheet(*args, **kwargs)

    monkeypatch.setattr(edit_job, "contact_sheet", sheet)
    subsets = bench_edits.build_subsets("demo", "val", 3, ["color", "size"], tmp_path,
                                        values={"color": ["red"], "size": ["0.4"]},
                                        on_subset=lambda name, summary: built.append(name))
    assert asked == [("demo", "val", 3)]
    config = json.loads((tmp_path / "edits" / "color" / "run.json").read_text())["config"]
    assert (config["plugin"], config["backend"], config["data"]) == ("color", "classical", "demo")
    assert (config["seed"], config["min_area"]) == (0, DEFAULT_MIN_AREA)
    assert (config["split"], config["limit"], config["values"]) == ("val", 3, ["red"])
    assert config["params"]["strength"] == 1.0
    bench_edits.build_subsets("demo", "val", 3, ["color"], tmp_path / "p",
                              values={"color": ["red"]}, editor_params={"strength": "0.5"})
    given = json.loads((tmp_path / "p" / "edits" / "color" / "run.json").read_text())["config"]
    assert given["params"]["strength"] == 0.5
    assert "objects" not in config and "things_only" not in config  # largest object, any class
    assert built == ["color", "size-0.4"] and sheets[:2] == [6, 6]  # a 6-row contact sheet each
    assert [s.name for s in subsets] == ["original", "original-object", "color", "size-0.4"]
    assert {s.split for s in subsets[:2]} == {"val"}  # the references read the bench's split
    assert [(s.object_only, s.masks is not None, s.kind) for s in subsets] == [
        (False, False, ""), (True, True, ""), (False, False, "appearance"), (True, True, "geometry")]


def test_things_only_chooses_the_reference_objects_among_the_thing_classes(tmp_path: Path) -> None:
    from segtk.benchmarks import edits as bench_edits

    data = load_dataset("demo")
    subsets = bench_edits.build_subsets("demo", None, None, ["size"], tmp_path,
                                        values={"size": ["0.4"]}, min_area=0.001,
                                        things_only=True, objects="ranked")
    reference = next(s for s in subsets if s.name == "original-object")
    config = json.loads((tmp_path / "edits" / "size-0.4" / "run.json").read_text())["config"]
    assert config["things_only"] is True and config["min_area"] == 0.001
    assert config["objects"] == "ranked"
    assert reference.images
    assert data.things is not None and reference.masks is not None
    things = [data.classes.index(c) for c in data.things]
    for name in reference.images:
        mask = np.asarray(Image.open(Path(reference.masks) / f"{name}.png")) > 0
        label = data[data.names.index(name)].label
        assert mask.any() and np.isin(label[mask], things).all(), name


class Odd(Editor):
    """An editor of a kind segtk does not know."""

    name = attribute = "odd"
    kind = "sideways"  # type: ignore[assignment]  # the point: a kind segtk does not know
    values = ("x",)

    def edit(self, sample, value, rng):
        return EditedSample(sample.image, sample.label, sample.mask, value)


def test_an_editor_of_an_unknown_kind_is_refused_naming_the_kinds(tmp_path: Path) -> None:
    from segtk.benchmarks import edits as bench_edits
    from segtk.core import EDIT_KINDS, SegtkError

    reset_plugin_manager()
    get_plugin_manager().register(
        types.SimpleNamespace(register_editors=hookimpl(lambda register: [register(Odd)])),
        name="segtk_odd_editor")
    try:
        with pytest.raises(SegtkError, match="editor 'odd' declares kind 'sideways'") as info:
            bench_edits.build_subsets("demo", None, 2, ["odd"], tmp_path)
    finally:
        reset_plugin_manager()
    assert info.value.hint == (f"an editor's kind is one of {', '.join(EDIT_KINDS)}; "
                               "fix the plugin")
    assert not (tmp_path / "edits").exists()  # refused before anything was edited


def test_filters_and_their_params_reach_every_edited_subset(tmp_path: Path) -> None:
    pytest.importorskip("segtk_filter_surrogate")
    from segtk.benchmarks import edits as bench_edits

    bench_edits.build_subsets("demo", None, 2, ["color"], tmp_path, values={"color": ["red"]},
                              filters=["surrogate"],
                              filter_params=["surrogate.model=demo", "surrogate.mode=code"])
    config = json.loads((tmp_path / "edits" / "color" / "run.json").read_text())["config"]
    assert list(config["filters"]) == ["surrogate"]
    assert config["filters"]["surrogate"]["model"] == "demo"
    assert config["filters"]["surrogate"]["mode"] == "code"
    records = lines(tmp_path / "edits" / "color" / "manifest.jsonl")
    assert records and all("surrogate" in r["filters"] for r in records)


class Echo(PromptWriter):
    """A prompt writer that signs its prompts."""

    name = "echo"

    def rewrite(self, sample, attribute, value, template):
        return f"{template}, {attribute}={value}", "echo:1"


def test_filters_seed_and_prompt_writer_reach_the_edits_and_the_reference_gets_none(
        backend_with_reference, tmp_path: Path) -> None:
    # The backend's reference subset (Recon) is the unedited pipeline: no filter and no prompt
    # writer touch it, while every edited subset gets both, and the seed.
    pytest.importorskip("segtk_filter_surrogate")
    from segtk.benchmarks import edits as bench_edits

    bench_edits.build_subsets("demo", None, 2, ["color"], tmp_path, backend="halves",
                              values={"color": ["red"]}, seed=3, filters=["surrogate"],
                              filter_params=["surrogate.model=demo", "surrogate.mode=code"],
                              prompt_writer=Echo("m"), prompt_config={"prompt_model": "m"})
    colour, recon = (json.loads((tmp_path / "edits" / s / "run.json").read_text())["config"]
                     for s in ("color", "recon"))
    assert colour["seed"] == recon["seed"] == 3
    assert colour["filters"]["surrogate"]["model"] == "demo" and "filters" not in recon
    assert colour["prompt_model"] == "m" and "prompt_model" not in recon
    edited = lines(tmp_path / "edits" / "color" / "manifest.jsonl")
    assert edited and all(r["prompt_writer"] == "echo:1" for r in edited)
    remade = lines(tmp_path / "edits" / "recon" / "manifest.jsonl")
    assert remade and not any("prompt_writer" in r or "filters" in r for r in remade)


class Plain(Captioner):
    name = "plain"

    def caption(self, image, mask, class_name):
        return f"a picture with a {class_name or 'scene'}"


def test_a_captioner_writes_every_subsets_source_captions_and_recon_is_no_kind(
        backend_with_reference, tmp_path: Path) -> None:
    from segtk.benchmarks import edits as bench_edits

    subsets = bench_edits.build_subsets("demo", None, 2, ["color"], tmp_path, backend="halves",
                                        values={"color": ["red"]}, captioner=Plain(),
                                        captioner_config={"captioner": "plain"})
    assert {s.name: s.kind for s in subsets} == {"original": "", "color": "appearance",
                                                 "recon": ""}
    for subset in ("color", "recon"):
        records = lines(tmp_path / "edits" / subset / "manifest.jsonl")
        assert records and all(r["captioner"] == "plain" for r in records)
        assert all(r["prompt_source"].startswith("a picture with a ") for r in records)


def test_nothing_editable_is_refused_with_where_to_look(tmp_path: Path) -> None:
    from segtk.benchmarks import edits as bench_edits
    from segtk.core import SegtkError

    with pytest.raises(SegtkError, match="^no image could be edited for any attribute ") as info:
        bench_edits.build_subsets("demo", None, 2, ["size"], tmp_path, min_area=0.99)
    assert info.value.hint == "see OUT/edits/ATTR/skipped.jsonl; try more images or --min-area"


# --- plan, run_bench and the object-only mIoU -----------------------------------------------------


def test_plan_cuts_each_subset_into_chunks_per_model() -> None:
    from segtk.benchmarks.edits import Shard, Subset, plan

    five = Subset("color", "demo", None, tuple("abcde"))
    ten = Subset("original", "demo", None, tuple("abcdefghij"))
    shards = plan(["m1", "m2"], [five, ten], chunk=2, batch_size=3, device="cuda:1")
    assert [(s.model, s.subset.name, s.images) for s in shards] == [
        (m, name, images) for m in ("m1", "m2") for name, images in (
            ("color", ("a", "b")), ("color", ("c", "d")), ("color", ("e",)),
            ("original", ("a", "b")), ("original", ("c", "d")), ("original", ("e", "f")),
            ("original", ("g", "h")), ("original", ("i", "j")))]
    assert {(s.batch_size, s.device) for s in shards} == {(3, "cuda:1")}
    default = plan(["m"], [ten])  # chunks of 8 images, batches of 4, on the CPU
    assert default == [Shard("m", ten, tuple("abcdefgh"), 4, "cpu"), Shard("m", ten, ("i", "j"), 4, "cpu")]


def test_run_bench_checks_each_model_once_then_scores_what_is_left(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Each model's classes are checked once against one image of its data (read with the
    # subset's split, on the shard's device); the progress starts at the records a resumed run
    # already has, then grows by each shard's records; done shards are not run again.
    from segtk.benchmarks import edits as bench_edits

    color = bench_edits.Subset("color", "demo", "val", ("a", "b", "c"))
    shards = [bench_edits.Shard("m1", color, ("a", "b"), device="cuda:3"),
              bench_edits.Shard("m1", color, ("c",), device="cuda:3"),
              bench_edits.Shard("m2", color, ("a", "b"), device="cuda:3"),
              bench_edits.Shard("m2", color, ("c",), device="cuda:3")]
    checks: list[tuple] = []
    loaded: list[tuple] = []
    ran: list = []
    progress: list[int] = []
    appended: list[str] = []
    monkeypatch.setattr(bench_edits, "cached_segmenter", lambda spec, device: (spec, device))
    monkeypatch.setattr(bench_edits, "check_compatible",
                        lambda model, data, from_data: checks.append((model, len(data), from_data)))

    def dataset(spec: str, split: str | None):
        loaded.append((spec, split))
        return load_dataset(spec)

    def shard_records(shard):
        ran.append(shard)
        return [bench_edits.ScoreLine(key=shard.key(i), model=shard.model, subset="color",
                                      image=i, confusion=[[1]]) for i in shard.images]

    monkeypatch.setattr(bench_edits, "load_dataset", dataset)
    monkeypatch.setattr(bench_edits, "run_shard", shard_records)
    run: Any = types.SimpleNamespace(done=lambda key: [shards[0].key("a"), shards[0].key("b")],
                                     append=appended.append)  # what run_bench uses of a RunDir
    executor = types.SimpleNamespace(map=lambda fn, items: map(fn, items))
    bench_edits.run_bench(shards, run, executor, on_records=progress.append)
    assert checks == [(("m1", "cuda:3"), 1, False), (("m2", "cuda:3"), 1, False)]
    assert loaded == [("demo", "val")] * 2
    assert ran == shards[1:] and progress == [2, 1, 2, 1] and len(appended) == 4
    checks.clear()
    bench_edits.run_bench(shards[2:], run, executor, classes_from_data=True)
    assert checks == [(("m2", "cuda:3"), 1, True)]


def test_object_only_miou_averages_the_classes_in_the_object_labels() -> None:
    from segtk.benchmarks.edits import subset_miou

    # class 0: one labelled pixel, right; class 1: none labelled, shown once; class 2: 2 of 4
    conf = torch.tensor([[1, 0, 0, 0], [0, 0, 0, 0], [0, 1, 2, 1]])
    assert subset_miou(conf, object_only=True) == pytest.approx((1.0 + 2 / 4) / 2)
    assert subset_miou(conf) == pytest.approx((1.0 + 0.0 + 2 / 4) / 3)  # a whole-image mean
    assert np.isnan(subset_miou(torch.zeros(3, 4, dtype=torch.long), object_only=True))


class KeepAll(Filter):
    """A third party's filter without `parameters()`: run.json records the options given."""

    name = "keep-all"

    def __init__(self, note: str = "none") -> None:
        self.note = note

    def apply(self, original, edited) -> FilterResult:
        return FilterResult(True, {"kept": 1.0})


def test_a_filter_without_parameters_is_recorded_by_the_options_given(tmp_path: Path) -> None:
    from segtk.benchmarks import edits as bench_edits
    from segtk.core import registry

    reset_plugin_manager()
    get_plugin_manager().register(
        types.SimpleNamespace(register_filters=hookimpl(lambda register: register(KeepAll))),
        name="segtk_keep_all")
    registry.reset()
    try:
        bench_edits.build_subsets("demo", None, 2, ["color"], tmp_path, values={"color": ["red"]},
                                  filters=["keep-all"], filter_params=["keep-all.note=hello"])
    finally:
        reset_plugin_manager()
        registry.reset()
    config = json.loads((tmp_path / "edits" / "color" / "run.json").read_text())["config"]
    assert config["filters"] == {"keep-all": {"note": "hello"}}
