"""Label-free attacks (reference=prediction): each query is scored against the model's labels
for the clean image, never the ground truth; the default (labels) is unchanged; images without
labels can be attacked and benchmarked, and every record says what it was scored against."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner

import segtk
from segtk.cli import cli
from segtk.core import DataError, Dataset, Item, Proxy, SegtkError, build, load_dataset, write_png
from segtk.core._attack import Attack
from segtk.core._oracle import Oracle, project
from segtk.reports.writer import write_report
from segtk.storage import layout
from segtk.testing import RecordingSegmenter, TinySegmenter, toy_batch

DECISION_BASED = ["dla", "random", "random:variant=released", "nes", "bandits", "zo-signsgd",
                  "signhunter", "simba", "square", "colour-stripes", "colour-blocks"]


class Probe(Attack):
    """Queries its clean image, then three noisy candidates per image; keeps what it saw."""

    name = "probe"

    def attack(self, oracle: Oracle) -> None:
        self.before = oracle.labels.clone()
        oracle.query(oracle.clean)
        self.after = oracle.labels.clone()
        self.seen: list[tuple[torch.Tensor, torch.Tensor]] = []
        g = torch.Generator().manual_seed(0)
        while active := oracle.active().tolist():
            owners = torch.tensor(active)
            noise = torch.rand(oracle.clean[owners].shape, generator=g) * 2 - 1
            x = project(oracle.clean[owners] + noise, oracle.clean[owners], oracle.eps_unit)
            self.seen.append((x, oracle.query(x, owners).scores))


class SkipsClean(Attack):
    """Never queries a clean image: three candidates per image per step (query_each), or one
    (query); the oracle must query each clean image first, within the budget."""

    name = "skips-clean"
    each = True

    def attack(self, oracle: Oracle) -> None:
        while active := oracle.active().tolist():
            steps = [project(oracle.clean[i] + 0.5, oracle.clean[i], oracle.eps_unit)[None]
                     .expand(3, -1, -1, -1) for i in active]
            if self.each:
                oracle.query_each(active, steps)
            else:
                oracle.query(torch.stack([s[0] for s in steps]), torch.tensor(active))


def test_every_query_is_scored_against_the_clean_prediction_not_the_labels() -> None:
    images, _ = toy_batch(2, 9, 11)
    model = TinySegmenter()
    clean_pred = model.predict(images)
    wrong = torch.zeros_like(clean_pred)  # a ground truth the attack must neither see nor use
    probe = Probe(budget=6, eps=255.0, reference="prediction")
    result = probe.run(model, images, wrong, seeds=[0, 1])
    assert bool((probe.before == 255).all())  # nothing is known before the clean query
    assert torch.equal(probe.after, clean_pred)
    proxy = Proxy(4)
    changed = False
    for x, scores in probe.seen:
        pred = model.predict(x)
        assert torch.allclose(scores, proxy(pred, clean_pred[: len(x)]))
        changed |= bool((scores < 1).any())
        assert not torch.allclose(scores, proxy(pred, wrong[: len(x)]))
    assert changed  # the candidates did change the model's answer
    assert [h[0] for h in result.history] == [1.0, 1.0]  # the clean image against itself
    assert result.queries.tolist() == [6, 6]


@pytest.mark.parametrize("each", [True, False])
def test_an_attack_that_skips_the_clean_image_gets_it_queried_first_within_the_budget(each) -> None:
    images, _ = toy_batch(2, 9, 11)
    model = RecordingSegmenter()
    attack = SkipsClean(budget=5, eps=255.0, reference="prediction")
    attack.each = each
    result = attack.run(model, images, None, seeds=[0, 1])
    assert result.queries.tolist() == [5, 5]
    assert len(model.seen) == 10  # exactly the budget reached the model
    assert torch.equal(model.batches[0], images)  # the clean images, before the attack's own
    assert not any(torch.equal(x, images[0]) or torch.equal(x, images[1]) for x in model.seen[2:])
    assert [h[0] for h in result.history] == [1.0, 1.0]
    assert all(h[-1] < 1.0 for h in result.history)  # the skewed images scored against it


@pytest.mark.parametrize("spec", DECISION_BASED)
def test_every_decision_based_attack_runs_label_free_within_its_budget(spec) -> None:
    name, _, params = spec.partition(":")
    run = segtk.attack(TinySegmenter(), _tiny_data(), name, budget=7,
                       params=[params] if params else None, reference="prediction",
                       save_images=False)
    for rec in run.records:
        assert rec.queries == 7 and len(rec.history) == 7
        assert rec.history[0] == 1.0
        assert rec.scored_against == "labels"  # these images have labels


def test_white_box_attacks_refuse_the_prediction_reference() -> None:
    with pytest.raises(SegtkError, match="white-box"):
        build("attack", "pgd", budget=5, reference="prediction")


# --- the default is unchanged ----------------------------------------------------------------

# Records of `segtk.attack("demo", "demo", NAME, budget=12, limit=2)` before reference existed
# (adversarial mIoU per image, and the history every 4th query), rounded to 4 places.
BEFORE = {
    "dla": ([0.7073, 0.7222], [[0.7623, 0.7073, 0.7073], [0.826, 0.754, 0.7244]]),
    "colour-blocks": ([0.7412, 0.7894], [[0.7623, 0.7502, 0.7427], [0.826, 0.8034, 0.7918]]),
}


@pytest.mark.parametrize("name", sorted(BEFORE))
def test_the_labels_reference_gives_the_records_it_gave_before(name) -> None:
    run = segtk.attack("demo", "demo", name, budget=12, limit=2, save_images=False)
    adv = [round(r.adv_miou, 4) for r in run.records]
    history = [[round(h, 4) for h in r.history[::4]] for r in run.records]
    assert (adv, history) == BEFORE[name]
    explicit = segtk.attack("demo", "demo", name, budget=12, limit=2, save_images=False,
                            reference="labels")
    assert [r.to_json() for r in explicit.records] == [r.to_json() for r in run.records]
    assert all("scored_against" not in r.to_json() for r in run.records)


def test_a_labels_run_records_no_reference_so_older_runs_resume(tmp_path) -> None:
    segtk.attack(TinySegmenter(), _tiny_data(), "dla", budget=4, out=tmp_path / "run")
    config = json.loads((tmp_path / "run" / layout.RUN).read_text())["config"]
    assert "reference" not in config["params"]
    segtk.attack(TinySegmenter(), _tiny_data(), "dla", budget=4, out=tmp_path / "run", resume=True)


# --- unlabelled images ----------------------------------------------------------------------

def _tiny_data() -> Dataset:
    """Two small labelled images of the tiny model's classes."""
    images, labels = toy_batch(2, 9, 11, seed=3)
    items = [Item(f"img{i}", np.round(images[i].permute(1, 2, 0).numpy() * 255).astype(np.uint8),
                  labels[i].numpy()) for i in range(2)]
    return Dataset("tiny", TinySegmenter().classes, [(it.name, _constant(it)) for it in items])


def _constant(item: Item) -> Callable[[], Item]:
    return lambda: item


@pytest.fixture
def unlabelled(folder_dataset: Path) -> Path:
    shutil.rmtree(folder_dataset / "labels")
    return folder_dataset


def test_an_unlabelled_folder_is_attacked_label_free_and_scored_against_its_prediction(
        tmp_path, unlabelled) -> None:
    run = segtk.attack(TinySegmenter(), f"folder:{unlabelled}", "dla", budget=6, eps=64,
                       reference="prediction", out=tmp_path / "run")
    lines = [json.loads(x) for x in (tmp_path / "run" / layout.RESULTS).read_text().splitlines()]
    assert [x["scored_against"] for x in lines] == ["prediction"] * 3
    assert all(r.clean_miou == 1.0 and r.queries == 6 for r in run.records)
    assert any(r.adv_miou < 1.0 for r in run.records)
    config = json.loads((tmp_path / "run" / layout.RUN).read_text())["config"]
    assert config["params"]["reference"] == "prediction"
    page = write_report(tmp_path / "run").read_text()
    assert "Label-free attack" in page and "3 of 3 images have no labels" in page


def test_an_unlabelled_folder_is_refused_with_the_labels_reference_naming_the_option(
        tmp_path, unlabelled) -> None:
    with pytest.raises(DataError, match="--reference prediction"):
        segtk.attack(TinySegmenter(), f"folder:{unlabelled}", "dla", budget=6)
    with pytest.raises(DataError, match="labels folder not found"):
        load_dataset(f"folder:{unlabelled}")  # everything else refuses it as before
    result = CliRunner().invoke(cli, ["attack", "--plugin", "dla", "--data", f"folder:{unlabelled}",
                                      "--out", str(tmp_path / "cli")])
    assert result.exit_code != 0
    error, hint = [x for x in result.output.splitlines() if x.strip()]  # segtk's error and hint
    assert error.startswith("Error: ") and "labels folder not found" in error, result.output
    assert hint.startswith("hint: ") and "--reference prediction" in hint, result.output


def test_a_flat_folder_of_pictures_with_a_classes_file_is_attacked_label_free(
        tmp_path, unlabelled) -> None:
    """Frames as a camera wrote them: pictures in the folder itself, the class names in a file
    elsewhere (classes=FILE); the same records as the images/ + classes.txt layout."""
    flat = tmp_path / "frames"
    flat.mkdir()
    for picture in sorted((unlabelled / "images").iterdir()):
        shutil.copy(picture, flat / picture.name)
    names = tmp_path / "names.txt"
    shutil.copy(unlabelled / "classes.txt", names)
    spec = f"folder:{flat},classes={names}"
    data = load_dataset(spec, unlabelled=True)
    assert [item.name for item in data] == [p.stem for p in sorted((unlabelled / "images").iterdir())]
    assert data.classes == load_dataset(f"folder:{unlabelled}", unlabelled=True).classes
    flat_run = segtk.attack(TinySegmenter(), spec, "dla", budget=4, eps=64,
                            reference="prediction")
    layout_run = segtk.attack(TinySegmenter(), f"folder:{unlabelled}", "dla", budget=4, eps=64,
                              reference="prediction")
    assert [(r.image, r.adv_miou) for r in flat_run.records] == \
        [(r.image, r.adv_miou) for r in layout_run.records]
    with pytest.raises(DataError, match="classes=FILE"):  # no classes.txt and no file named
        load_dataset(f"folder:{flat}", unlabelled=True)
    with pytest.raises(DataError, match="classes= names no file"):  # never read as classes.txt
        load_dataset(f"folder:{unlabelled},classes=", unlabelled=True)
    with pytest.raises(DataError, match="missing.txt: not found"):
        load_dataset(f"folder:{flat},classes={tmp_path / 'missing.txt'}", unlabelled=True)
    (flat / "labels").mkdir()  # a labelled folder still needs images/: it is not guessed
    with pytest.raises(DataError, match="images"):
        load_dataset(f"folder:{flat},classes={names}", unlabelled=True)


def test_resume_refuses_another_reference(tmp_path) -> None:
    out = tmp_path / "run"
    segtk.attack(TinySegmenter(), _tiny_data(), "dla", budget=4, out=out, limit=1)
    with pytest.raises(SegtkError, match="reference"):
        segtk.attack(TinySegmenter(), _tiny_data(), "dla", budget=4, out=out, resume=True,
                     reference="prediction")


# --- bench attacks ---------------------------------------------------------------------------

def demo_folder(root: Path, labelled: bool) -> Path:
    """The first two demo scenes as a folder dataset, with or without labels/."""
    data = load_dataset("demo", limit=2)
    for item in data:
        write_png(root / "images" / f"{item.name}.png", item.image)
        if labelled:
            write_png(root / "labels" / f"{item.name}.png", item.label.astype(np.uint8))
    (root / "classes.txt").write_text("\n".join(data.classes) + "\n")
    return root


def test_bench_attacks_tables_both_references_and_an_unlabelled_folder(tmp_path) -> None:
    both = segtk.bench_attacks("demo", "demo", "dla,dla:reference=prediction", "4,8", repeats=1,
                               limit=2)
    rows = {(r["attack"], r["budget"]): r for r in both}
    assert ("dla", 8) in rows and ("dla:reference=prediction", 8) in rows
    label_free = segtk.bench_attacks("demo", "demo", "dla", "4,8", repeats=1, limit=2,
                                     reference="prediction")
    assert {r["attack"] for r in label_free} == {"clean", "dla:reference=prediction"}
    same = {(r["attack"], r["budget"]): r["miou_mean"] for r in label_free}
    assert same == {k: v["miou_mean"] for k, v in rows.items() if k[0] != "dla"}
    folder = demo_folder(tmp_path / "unlabelled", labelled=False)
    out = tmp_path / "bench"
    table = segtk.bench_attacks("demo", f"folder:{folder}", "dla,signhunter", "4,8", repeats=1,
                                reference="prediction", out=out)
    clean = [r for r in table if r["attack"] == "clean"]
    assert clean and all(r["miou_mean"] == 100.0 for r in clean)
    lines = [json.loads(x) for x in (out / layout.RESULTS).read_text().splitlines()]
    assert {x["scored_against"] for x in lines} == {"prediction"}
    assert json.loads((out / layout.RUN).read_text())["config"]["reference"] == "prediction"
    assert all(r["scored_against"] == "prediction" for r in table)
    page = write_report(out).read_text()
    assert "Label-free attack" in page and "have no labels" in page
    with pytest.raises(DataError, match="--reference prediction"):
        segtk.bench_attacks("demo", f"folder:{folder}", "dla", "4", repeats=1)
    with pytest.raises(SegtkError, match="reference"):
        segtk.bench_attacks("demo", f"folder:{folder}", "dla,signhunter", "4,8", repeats=1,
                            out=out, resume=True)


def test_bench_resume_refuses_another_reference(tmp_path) -> None:
    out = tmp_path / "bench"
    segtk.bench_attacks("demo", "demo", "dla", "4", repeats=1, limit=1, out=out)
    assert "reference" not in json.loads((out / layout.RUN).read_text())["config"]
    with pytest.raises(SegtkError, match="reference"):
        segtk.bench_attacks("demo", "demo", "dla", "4", repeats=1, limit=1, out=out, resume=True,
                            reference="prediction")
    result = CliRunner().invoke(cli, ["bench", "attacks", "--out", str(out), "--resume",
                                      "--reference", "prediction"])
    assert result.exit_code != 0 and "--reference" in result.output, result.output
