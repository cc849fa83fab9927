"""`segtk edit` end to end (in-process): the edited dataset, read back by predict; resume;
determinism; skips counted."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest
from click.testing import CliRunner
from PIL import Image

from segtk.cli import cli
from segtk.core import (
    Dataset,
    EditedSample,
    Editor,
    Filter,
    FilterResult,
    Item,
    PromptWriter,
    SegtkError,
)
from segtk.datasets.readers import load_edited
from segtk.jobs.edit import (
    EditConfig,
    EditRun,
    contact_sheet,
    edit_dataset,
    pick_rows,
    picked_value,
    sample_name,
)
from segtk.jobs.edit_records import EditLine


class Tint(Editor):
    """A toy appearance editor (no editor plugin needed): darkens the object."""

    name = attribute = "tint"
    values: ClassVar[tuple[str, ...]] = ("dark",)
    prompt_templates = {"*": "a photo of {a_value} {cls}"}

    def edit(self, sample, value, rng):
        image = np.where(sample.mask[..., None], sample.image // 2, sample.image)
        prompt, writer = self.write_prompt(sample, value)
        return EditedSample(image, sample.label, sample.mask, value, prompt,
                            prompt_writer=writer)


def toy_dataset(n: int = 2) -> Dataset:
    """`n` 32×40 images, each with a car (class 1) over half of it."""
    def item(i: int) -> Item:
        image = np.random.default_rng(i).integers(0, 256, (32, 40, 3), dtype=np.uint8)
        label = np.zeros((32, 40), np.int64)
        label[8:24, 5 + i:30 + i] = 1
        return Item(f"toy{i}", image, label)

    return Dataset("toy", ["background", "car"], [(f"toy{i}", functools.partial(item, i))
                                                  for i in range(n)])


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


@pytest.fixture(scope="module")
def material_run(tmp_path_factory) -> tuple[Path, list[str]]:
    out = tmp_path_factory.mktemp("edit") / "material"
    args = ["edit", "--plugin", "material", "--values", "wood,glass", "--limit", "3",
            "--out", str(out), "--seed", "5"]
    result = invoke(*args)
    assert result.exit_code == 0, result.output
    return out, args


def test_edit_writes_an_edited_dataset(material_run) -> None:
    out, _ = material_run
    manifest = lines(out / "manifest.jsonl")
    skipped = lines(out / "skipped.jsonl")
    # demo scenes 000..002: 000 and 001 have a building >= 20%, 002 does not
    assert sorted(r["name"] for r in manifest) == [
        "scene_000__glass", "scene_000__wood", "scene_001__glass", "scene_001__wood"]
    assert [(r["source"], r["reason"]) for r in skipped] == [("scene_002", "tiny-object")] * 2
    rec = manifest[0]
    for key in ("name", "source", "source_image", "attribute", "value", "prompt", "backend",
                "parameters", "seed", "class", "prompt_source"):
        assert key in rec
    assert rec["attribute"] == "material" and rec["backend"] == "classical"
    assert rec["prompt"] == f"a photo of a building made of {rec['value']}"
    assert (out / "classes.txt").read_text().split()[0] == "sky"
    for r in manifest:
        name = r["name"]
        label = Image.open(out / "labels" / f"{name}.png")
        assert label.mode == "P"
        src = np.asarray(Image.open(out / "source" / "labels" / f"{r['source']}.png"))
        assert np.array_equal(np.asarray(label), src)  # appearance edits keep the label
        mask = np.asarray(Image.open(out / "masks" / f"{name}.png"))
        assert set(np.unique(mask).tolist()) <= {0, 255} and mask.mean() > 0.2 * 255
    sheet = Image.open(out / "contact_sheet.png")
    assert sheet.width > 3 * 300 and sheet.height > 4 * 200
    run = json.loads((out / "run.json").read_text())
    assert run["config"]["plugin"] == "material" and run["summary"]["edited"] == 4
    assert run["summary"]["skipped"] == {"tiny-object": 2}


def test_predict_reads_the_edited_dataset(material_run, tmp_path) -> None:
    out, _ = material_run
    dataset = load_edited(str(out), None)
    assert len(dataset) == 4 and len(dataset.extra["manifest"]) == 4
    result = invoke("predict", "--data", f"edited:{out}", "--out", str(tmp_path / "p"))
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "p" / "summary.json").read_text())
    assert summary["images"] == 4 and 0 <= summary["miou"] <= 1
    source = invoke("predict", "--data", f"folder:{out / 'source'}", "--json")
    assert source.exit_code == 0 and json.loads(source.stdout)["images"] == 2


def test_rerun_refuses_and_resume_skips_done(material_run) -> None:
    out, args = material_run
    again = CliRunner().invoke(cli, args)
    assert again.exit_code == 1 and "already holds" in again.output
    stamps = {p.name: p.stat().st_mtime_ns for p in (out / "images").iterdir()}
    resumed = invoke(*args, "--resume")
    assert resumed.exit_code == 0, resumed.output
    assert {p.name: p.stat().st_mtime_ns for p in (out / "images").iterdir()} == stamps
    assert len(lines(out / "manifest.jsonl")) == 4
    assert "edited" in resumed.output and "tiny-object" in resumed.output
    other = CliRunner().invoke(cli, args[:-1] + ["6", "--resume"])
    assert other.exit_code == 1 and "holds a run with --seed 5, not --seed 6" in other.output


def test_resume_after_a_crash_redoes_only_the_missing_edit(material_run, tmp_path) -> None:
    out, args = material_run
    copy = tmp_path / "copy"
    import shutil

    shutil.copytree(out, copy)
    manifest = (copy / "manifest.jsonl").read_bytes().splitlines(keepends=True)
    last = json.loads(manifest[-1])["name"]
    original = (copy / "images" / f"{last}.png").read_bytes()
    (copy / "manifest.jsonl").write_bytes(b"".join(manifest[:-1]) + manifest[-1][:20])  # torn
    (copy / "images" / f"{last}.png").unlink()
    result = invoke(*args[:-4], "--out", str(copy), "--seed", "5", "--resume")
    assert result.exit_code == 0, result.output
    assert [r["name"] for r in lines(copy / "manifest.jsonl")][-1] == last
    assert len(lines(copy / "manifest.jsonl")) == 4
    assert (copy / "images" / f"{last}.png").read_bytes() == original  # same seed, same edit


def test_same_seed_same_files_other_seed_differs(material_run, tmp_path) -> None:
    out, args = material_run
    base = ["edit", "--plugin", "material", "--values", "wood", "--limit", "1", "--sheet-rows", "0"]
    assert invoke(*base, "--out", str(tmp_path / "a"), "--seed", "5").exit_code == 0
    assert invoke(*base, "--out", str(tmp_path / "b"), "--seed", "6").exit_code == 0
    name = "scene_000__wood.png"
    same = (tmp_path / "a" / "images" / name).read_bytes() == (out / "images" / name).read_bytes()
    assert same  # --limit and the other value do not change an edit's random stream
    assert (tmp_path / "b" / "images" / name).read_bytes() != (out / "images" / name).read_bytes()


def test_geometry_edit_labels_uncovered_area_ignore(tmp_path) -> None:
    out = tmp_path / "size"
    result = invoke("edit", "--plugin", "size", "--values", "0.4", "--limit", "1", "--out", str(out),
                    "--variants", "2", "--sheet-rows", "2")
    assert result.exit_code == 0, result.output
    names = sorted(r["name"] for r in lines(out / "manifest.jsonl"))
    assert names == ["scene_000__0.4__0", "scene_000__0.4__1"]
    label = np.asarray(Image.open(out / "labels" / f"{names[0]}.png"))
    source = np.asarray(Image.open(out / "source" / "labels" / "scene_000.png"))
    mask = np.asarray(Image.open(out / "masks" / f"{names[0]}.png")) > 0
    assert (label == 255).sum() > 0 and (source == 255).sum() < (label == 255).sum()
    assert (label[mask] == 3).all()  # building


def test_cli_errors_are_one_line(tmp_path) -> None:
    for args, message in [
        (["edit", "--plugin", "nope"], "no editor plugin named 'nope'"),
        (["edit", "--plugin", "color", "--values", "plaid"], "no value 'plaid'"),
        (["edit", "--plugin", "color", "--param", "bogus=1"], "unknown parameter 'bogus'"),
        (["edit", "--plugin", "color", "--classes", "unicorn"], "none of these is a class"),
        (["edit", "--plugin", "color", "--backend", "gan"], "unknown backend 'gan'"),
        (["edit", "--plugin", "color", "--prompt-writer", "lm"], "needs --prompt-model"),
        (["edit", "--plugin", "color", "--prompt-writer", "nope", "--prompt-model", "m"],
         "no prompt-writer plugin named 'nope'"),
    ]:
        result = CliRunner().invoke(cli, args + ["--out", str(tmp_path / "x")])
        assert result.exit_code == 1, result.output
        assert message in result.output and "Traceback" not in result.output


def test_help_has_examples() -> None:
    result = invoke("edit", "--help")
    assert result.exit_code == 0 and "Example" in result.output and "--min-area" in result.output


def test_names_and_sheet_rows() -> None:
    assert sample_name("a", "red", 0, 1) == "a__red"
    assert sample_name("a", "red", 2, 3) == "a__red__2"
    recs = [EditLine(name=f"{s}__{v}", value=v, source=s) for s in "abc" for v in ("x", "y")]
    picked = pick_rows(recs, 4)
    assert [r.value for r in picked] == ["x", "y", "x", "y"]
    assert len({r.source for r in picked}) == 3  # spread over sources too
    assert callable(contact_sheet)


@pytest.mark.shared
def test_real_camvid_geometry_edit_reads_back(tmp_path) -> None:
    from segtk.datasets.readers import CAMVID_CLASSES
    from segtk.testing import shared

    root = shared("data/camvid")
    out = tmp_path / "camvid-size"
    result = invoke("edit", "--plugin", "size", "--values", "0.4", "--data", f"camvid:{root}",
                    "--limit", "2", "--classes", "car", "--min-area", "0.02", "--sheet-rows", "1",
                    "--out", str(out))
    assert result.exit_code == 0, result.output
    dataset = load_edited(str(out), None)
    assert dataset.classes == CAMVID_CLASSES and len(dataset) == 2
    for item in dataset:  # Dataset.__getitem__ validates ids against the 11 classes
        assert (item.label == 255).any() and (item.label == CAMVID_CLASSES.index("car")).any()


def test_edit_with_surrogate_filter(tmp_path) -> None:
    """--filter surrogate on the demo model (it has logits): labels rewritten, fractions in the
    manifest, l_g cached; a sample filter that rejects everything counts filtered:NAME skips."""
    pytest.importorskip("segtk_filter_surrogate")
    out = tmp_path / "f"
    result = invoke("edit", "--plugin", "material", "--values", "wood", "--limit", "2",
                    "--out", str(out), "--filter", "surrogate",
                    "--filter-param", "surrogate.model=demo",
                    "--filter-param", "surrogate.mode=code")
    assert result.exit_code == 0, result.output
    manifest = lines(out / "manifest.jsonl")
    assert len(manifest) == 2
    cache = json.loads((out / "filters" / "surrogate_lg.json").read_text())
    assert cache["model"] == "demo" and cache["images"] == 2
    for rec in manifest:
        kept = rec["filters"]["surrogate"]["kept_fraction"]
        assert 0 < kept <= 1
        label = np.asarray(Image.open(out / "labels" / f"{rec['name']}.png"))
        src = np.asarray(Image.open(out / "source" / "labels" / f"{rec['source']}.png"))
        labelled = src != 255
        assert np.all((label == src) | (label == 255))
        assert (label[labelled] != 255).mean() == pytest.approx(kept, abs=1e-5)
    run = json.loads((out / "run.json").read_text())
    assert run["config"]["filters"]["surrogate"]["mode"] == "code"
    # resume with the same options is fine; with other filter options it is refused
    again = invoke("edit", "--plugin", "material", "--values", "wood", "--limit", "2",
                   "--out", str(out), "--resume", "--filter", "surrogate",
                   "--filter-param", "surrogate.model=demo", "--filter-param", "surrogate.mode=code")
    assert again.exit_code == 0
    bad = CliRunner().invoke(cli, ["edit", "--plugin", "material", "--values", "wood", "--limit",
                                   "2", "--out", str(out), "--resume", "--filter", "surrogate",
                                   "--filter-param", "surrogate.model=demo"])
    assert bad.exit_code != 0


def test_sample_filter_rejection_is_a_skip_reason(tmp_path) -> None:
    class Never(Filter):
        name, stage = "never", "sample"

        def apply(self, original, edited):
            return FilterResult(keep=False, scores={"score": 0.5})

    data = toy_dataset()
    run = EditRun(tmp_path / "n", {"x": 1}, resume=False)
    summary = edit_dataset(Tint(), data, run, EditConfig(["dark"], sheet_rows=0, filters=[Never()]))
    assert summary.as_dict()["skipped"] == {"filtered:never": 2}
    skipped = lines(tmp_path / "n" / "skipped.jsonl")
    assert skipped[0]["filters"] == {"never": {"score": 0.5}}
    assert not (tmp_path / "n" / "manifest.jsonl").exists()


def test_a_prompt_writer_writes_the_prompts_and_the_manifest_says_who(tmp_path) -> None:
    class Echo(PromptWriter):
        name = "echo"

        def rewrite(self, sample, attribute, value, template):
            if sample.name == "toy1":
                return template, "template"  # e.g. a language model with an empty answer
            return f"{template}, {attribute}={value}", "echo:1"

    run = EditRun(tmp_path / "p", {"x": 1}, resume=False)
    summary = edit_dataset(Tint(), toy_dataset(), run,
                           EditConfig(["dark"], sheet_rows=0, prompt_writer=Echo("m")))
    run.close()
    assert [(r["prompt"], r["prompt_writer"]) for r in summary.edited] == [
        ("a photo of a dark car, tint=dark", "echo:1"), ("a photo of a dark car", "template")]
    assert lines(tmp_path / "p" / "manifest.jsonl")[0]["prompt_writer"] == "echo:1"
    plain = EditRun(tmp_path / "q", {"x": 1}, resume=False)
    records = edit_dataset(Tint(), toy_dataset(), plain, EditConfig(["dark"], sheet_rows=0)).edited
    assert "prompt_writer" not in records[0] and records[0]["kind"] == "appearance"


# --- edit and bench-edits folders are one kind of run -------------------------------------------


def test_bench_edits_subsets_and_edit_runs_are_interchangeable(tmp_path) -> None:
    """A `segtk bench edits` subset folder is a `segtk edit` run of the same settings, and the
    other way round: either command resumes the other's folder without redoing an edit."""
    common = ["--limit", "2", "--seed", "3"]
    edit_args = ["edit", "--plugin", "color", "--values", "red", *common]
    bench_args = ["bench", "edits", "--models", "demo", "--attributes", "color,material",
                  "--values", "color=red", "--values", "material=wood", "--executor", "inline",
                  *common]
    bench = tmp_path / "bench"
    first = invoke(*edit_args, "--out", str(bench / "edits" / "color"))  # made by segtk edit
    assert first.exit_code == 0, first.output
    stamps = {p.name: p.stat().st_mtime_ns for p in (bench / "edits" / "color" / "images").iterdir()}
    assert stamps
    made = invoke(*bench_args, "--out", str(bench))  # bench edits reuses it as its color subset
    assert made.exit_code == 0, made.output
    assert {p.name: p.stat().st_mtime_ns
            for p in (bench / "edits" / "color" / "images").iterdir()} == stamps
    material = bench / "edits" / "material"  # made by bench edits, resumed by segtk edit
    resumed = invoke("edit", "--plugin", "material", "--values", "wood", *common,
                     "--out", str(material), "--resume")
    assert resumed.exit_code == 0, resumed.output
    for folder, kind in ((bench, "bench-edits"), (bench / "edits" / "color", "edit"), (material, "edit")):
        assert json.loads((folder / "run.json").read_text())["kind"] == kind
    config = json.loads((material / "run.json").read_text())["config"]
    assert set(config) >= {"plugin", "values", "min_area", "exclude", "classes", "params"}


def test_param_and_filter_param_errors_name_the_item(tmp_path) -> None:
    for args, message in [
        (["--param", "strength"], "cannot read --param 'strength': expected KEY=VALUE"),
        (["--param", "strength=strong"], "cannot read strength='strong': expected a number"),
        (["--param", "strength=1", "--param", "strength=2"], "'strength' is given twice"),
        (["--filter", "surrogate", "--filter-param", "alpha=2"], "expected FILTER.KEY=VALUE"),
        (["--filter-param", "clip.model=x"], "filter 'clip' is not among --filter"),
    ]:
        result = CliRunner().invoke(cli, ["edit", "--plugin", "color", *args,
                                          "--out", str(tmp_path / "x")])
        assert result.exit_code == 1, result.output
        assert message in result.output and "Traceback" not in result.output


# --- one value drawn per image; image edits on object-centric images only -------------------


class Shade(Tint):
    values = ("dark", "darker", "darkest")


class Whole(Tint):
    level = "image"


def test_pick_one_edits_one_value_per_image_drawn_from_its_own_stream(tmp_path) -> None:
    values = list(Shade.values)
    run = EditRun(tmp_path / "one", {"x": 1}, resume=False)
    summary = edit_dataset(Shade(), toy_dataset(12), run,
                           EditConfig(values, sheet_rows=0, pick="one", seed=5))
    picked = {r["source"]: r["value"] for r in summary.edited}
    assert len(summary.edited) == len(picked) == 12 and summary.planned == 12
    assert set(picked.values()) == set(values)  # every value stays an option
    assert picked == {s: picked_value(values, 5, s) for s in picked}
    fewer = EditRun(tmp_path / "fewer", {"x": 1}, resume=False)  # not moved by --limit
    first = edit_dataset(Shade(), toy_dataset(3), fewer, EditConfig(values, sheet_rows=0,
                                                                    pick="one", seed=5))
    assert {r["source"]: r["value"] for r in first.edited} == {s: picked[s] for s in
                                                              ("toy0", "toy1", "toy2")}
    other = {s: picked_value(values, 6, s) for s in picked}
    assert other != picked  # the seed moves the draws
    with pytest.raises(SegtkError, match="pick='some'"):
        EditConfig(values, pick="some")


def test_object_centric_image_edits_skip_images_without_a_salient_object(tmp_path) -> None:
    data = toy_dataset(3)
    thin_car = np.zeros((32, 40), np.int64)
    thin_car[:, :3] = 1  # 7.5% of the image, under the default --min-area

    def load(i: int) -> Item:
        return data[i] if i < 2 else Item("toy2", data[2].image, thin_car)

    tiny = Dataset("toy", data.classes, [(n, functools.partial(load, i)) for i, n in enumerate(data.names)])
    run = EditRun(tmp_path / "o", {"x": 1}, resume=False)
    summary = edit_dataset(Whole(), tiny, run, EditConfig(["dark"], sheet_rows=0,
                                                          object_centric=True))
    assert [r["source"] for r in summary.edited] == ["toy0", "toy1"]
    assert [(r["source"], r["reason"]) for r in summary.skipped] == [("toy2", "tiny-object")]
    every = EditRun(tmp_path / "e", {"x": 1}, resume=False)
    assert len(edit_dataset(Whole(), tiny, every, EditConfig(["dark"], sheet_rows=0)).edited) == 3


def test_edit_cli_pick_and_object_centric_are_recorded_only_when_used(tmp_path) -> None:
    out = tmp_path / "w"
    result = invoke("edit", "--plugin", "weather", "--values", "fog,night", "--pick", "one",
                    "--object-centric", "--limit", "2", "--out", str(out))
    assert result.exit_code == 0, result.output
    assert "1 of 2 values" in result.output
    config = json.loads((out / "run.json").read_text())["config"]
    assert config["pick"] == "one" and config["object_centric"] is True
    names = [r["source"] for r in lines(out / "manifest.jsonl")]
    assert len(names) == len(set(names))
    plain = tmp_path / "p"
    assert invoke("edit", "--plugin", "weather", "--values", "fog", "--limit", "1",
                  "--out", str(plain)).exit_code == 0
    assert not {"pick", "object_centric"} & set(json.loads((plain / "run.json").read_text())["config"])


def test_a_run_without_a_single_edit_fails_saying_why(tmp_path) -> None:
    """Every label bad or without an object: exit 1 with one line, not an empty dataset and 0."""
    image = np.random.default_rng(0).integers(0, 256, (20, 24, 3), dtype=np.uint8)
    data = tmp_path / "data"
    for folder in ("images", "labels"):
        (data / folder).mkdir(parents=True)
    for name, label_id in (("outside", 200), ("ignored", 255)):  # not a class; all ignore
        Image.fromarray(image).save(data / "images" / f"{name}.png")
        Image.fromarray(np.full((20, 24), label_id, np.uint8)).save(data / "labels" / f"{name}.png")
    (data / "classes.txt").write_text("zero\none\ntwo\n")
    out = tmp_path / "out"
    result = CliRunner().invoke(cli, ["edit", "--plugin", "color", "--values", "red", "--data",
                                      f"folder:{data}", "--out", str(out)])
    assert result.exit_code == 1 and "Traceback" not in result.output
    error = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert error == ["Error: no edit made: all 2 planned edits of 2 images were skipped "
                     "(1 bad-data, 1 no-object)"]
    assert f"{out / 'skipped.jsonl'} says why" in result.output
    assert {r["source"]: r["reason"] for r in lines(out / "skipped.jsonl")} == \
        {"outside": "bad-data", "ignored": "no-object"}
