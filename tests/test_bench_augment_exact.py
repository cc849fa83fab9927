"""`segtk bench augment`'s bookkeeping pinned on hand-made inputs: the recorded config, the
evaluation seed a run uses, row names, the rows a resume adds, Tab. IV's and Tab. VI's rows, the
files (table.csv, table.json, table_vi.csv byte for byte) and the chart."""

from __future__ import annotations

import copy
import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from segtk.benchmarks import augment
from segtk.benchmarks.augment import (
    AugmentBench,
    check_labels,
    eval_seed_for,
    label_of,
    original_rows,
    original_subset,
    original_title,
    table_rows,
    tabulate,
    trained_earlier,
    write_outputs,
)
from segtk.core import SegtkError
from segtk.jobs.train import TrainConfig


def bench(**kw: Any) -> AugmentBench:
    training = TrainConfig("demo", "camvid:data", split="train", limit=5, augment="ignored", seed=3,
                           crop=(64, 48))
    return AugmentBench(training, ("baseline", "cutmix"), ("color", "size"), **kw)


def test_run_json_records_the_training_flat_under_its_old_names() -> None:
    b = bench(eval_data="camvid:other", eval_limit=2, values={"color": ["red"]})
    expected = {**TrainConfig.record(b.training), "train_split": "train", "train_limit": 5,
                "augments": ["baseline", "cutmix"], "attributes": ["color", "size"],
                "eval_data": "camvid:other", "eval_split": "val", "eval_limit": 2,
                "values": {"color": ["red"]}, "backend": "classical", "eval_seed": 0}
    for key in ("split", "limit", "augment"):
        del expected[key]
    assert b.record() == expected
    older = bench(eval_seed=None).record()
    assert "eval_seed" not in older and older["seed"] == 3
    assert b.train_config("cutmix") == TrainConfig(**{**b.training.__dict__, "augment": "cutmix"})
    assert (b.subset_seed(), bench(eval_seed=None).subset_seed(), bench(eval_seed=9).subset_seed()) \
        == (0, 3, 9)


def test_the_evaluation_seed_of_a_new_a_resumed_and_an_older_run(tmp_path: Path) -> None:
    assert eval_seed_for(tmp_path, False, None, 4) == 0
    assert eval_seed_for(tmp_path, False, 7, 4) == 7
    assert eval_seed_for(tmp_path, True, None, 4) == 0  # --resume of a folder without run.json
    (tmp_path / "run.json").write_text(json.dumps({"kind": "bench-augment",
                                                   "config": {"seed": 4, "eval_seed": 5}}))
    assert eval_seed_for(tmp_path, True, None, 4) == 5  # the recorded one
    assert eval_seed_for(tmp_path, False, None, 4) == 0  # a new run (--overwrite) reads no record
    assert eval_seed_for(tmp_path, True, 6, 4) == 6  # given again: the given one (checked later)
    (tmp_path / "run.json").write_text(json.dumps({"kind": "bench-augment", "config": {"seed": 4}}))
    assert eval_seed_for(tmp_path, True, None, 4) is None  # made before eval_seed: the training seed
    assert eval_seed_for(tmp_path, True, 4, 4) is None
    assert eval_seed_for(tmp_path, True, 0, 4) == 0


def test_row_names_are_folder_safe_and_refused_when_empty_repeated_or_start() -> None:
    assert label_of(" CutMix ") == "cutmix"
    spec = "augmix:jsd=12"
    assert label_of(spec) == "augmix-" + hashlib.sha256(spec.encode()).hexdigest()[:6]
    assert label_of(" augmix:jsd=12 ") == label_of(spec)
    assert label_of("aug.mix+x:p=1").startswith("aug-mix-x-")
    assert check_labels(["baseline", "cutmix"]) == ["baseline", "cutmix"]
    for augments, message, hint in (
            ([], "--augment names no augmentation", "e.g. --augment baseline,cutmix"),
            (["cutmix", "CutMix"], "augmentation 'cutmix' is listed twice", "list each one once"),
            (["start"], "'start' is the untrained start model's row, not an augmentation", None)):
        with pytest.raises(SegtkError) as info:
            check_labels(augments)
        assert (str(info.value.args[0]), info.value.hint) == (message, hint)


def test_rows_trained_to_the_end_earlier_join_the_table(tmp_path: Path) -> None:
    assert trained_earlier(tmp_path, [], 2) == []
    for name, epochs in (("b-done", 2), ("a-done", 3), ("short", 1), ("listed", 2)):
        folder = tmp_path / "train" / name
        folder.mkdir(parents=True)
        (folder / "results.jsonl").write_text(
            "".join(json.dumps({"key": f"epoch-{e}", "epoch": e}) + "\n" for e in range(epochs)))
    got = trained_earlier(tmp_path, ["listed"], 2)
    assert got == [tmp_path / "train" / "a-done", tmp_path / "train" / "b-done"]


TABLE: dict[str, Any] = {
    "miou": {"start.spec": {"original": 50.0, "color": 40.0},
             "base.spec": {"original": 60.0, "color": 45.0, "original-all": 58.0}},
    "images": {"start.spec": {"original": 3, "color": 2, "original-all": 5},
               "base.spec": {"original": 3}},
    "groups": [{"model": "start.spec", "group": "appearance", "mr": 0.8, "rmiou": 40.0},
               {"model": "base.spec", "group": "appearance", "mr": 0.75, "rmiou": 45.0},
               {"model": "base.spec", "group": "geometry", "mr": 1.1, "rmiou": 66.0}],
}


def result() -> dict[str, Any]:
    return tabulate(copy.deepcopy(TABLE), {"start": "start.spec", "baseline": "base.spec"},
                    ["original", "color"])


def test_tab_iv_rows_hold_each_models_miou_and_mr_per_group() -> None:
    got = result()
    assert got == {
        "subsets": ["original", "color"], "groups": ["appearance", "geometry"],
        "rows": [{"augmentation": "start", "model": "start.spec",
                  "miou": {"original": 50.0, "color": 40.0},
                  "mr_appearance": 0.8, "rmiou_appearance": 40.0,
                  "mr_geometry": None, "rmiou_geometry": None},
                 {"augmentation": "baseline", "model": "base.spec",
                  "miou": {"original": 60.0, "color": 45.0, "original-all": 58.0},
                  "mr_appearance": 0.75, "rmiou_appearance": 45.0,
                  "mr_geometry": 1.1, "rmiou_geometry": 66.0}],
        "images": {"original": 3, "color": 2, "original-all": 5}}  # the first row's counts
    only_geometry = tabulate({**TABLE, "groups": TABLE["groups"][2:]},
                             {"baseline": "base.spec"}, ["original"])
    assert only_geometry["groups"] == ["geometry"]
    assert augment.columns(got) == ["augmentation", "original", "color", "mR appearance",
                                    "mR geometry"]
    assert table_rows(got) == [["start", 50.0, 40.0, "0.800", ""],
                               ["baseline", 60.0, 45.0, "0.750", "1.100"]]


def test_a_model_without_scores_gets_empty_cells() -> None:
    got = tabulate(copy.deepcopy(TABLE), {"ghost": "ghost.spec", "start": "start.spec"}, ["original"])
    assert got["rows"][0] == {"augmentation": "ghost", "model": "ghost.spec", "miou": {},
                              "mr_appearance": None, "rmiou_appearance": None,
                              "mr_geometry": None, "rmiou_geometry": None}
    assert got["images"] == {}


def test_every_image_reads_the_evaluation_split(monkeypatch: pytest.MonkeyPatch) -> None:
    from segtk.benchmarks.edits import Subset

    asked: list = []
    real = augment.load_dataset

    def load_dataset(data, split, limit):
        asked.append((data, split, limit))
        return real(data, None, limit)

    monkeypatch.setattr(augment, "load_dataset", load_dataset)
    got = augment.every_image([Subset("original", "demo", None, ("scene_000",))], "demo", "val", 2)
    assert asked == [("demo", "val", 2)]
    assert [s.images for s in got] == [("scene_000", "scene_001")]


def test_tab_vi_is_original_all_when_scored_and_original_otherwise() -> None:
    got = result()
    assert original_subset(got) == "original-all"
    assert original_rows(got) == [["start", None], ["baseline", 58.0]]
    assert original_title(got) == ("mIoU % on all 5 original evaluation images (unedited), one "
                                   "model per augmentation (Gen4Seg Tab. VI)")
    del got["images"]["original-all"]
    assert original_subset(got) == "original"
    assert original_rows(got) == [["start", 50.0], ["baseline", 60.0]]
    assert original_title(got).startswith("mIoU % on all 3 original")


def test_the_files_and_the_chart_say_what_the_table_holds(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    charts: list = []
    monkeypatch.setattr(augment, "save_figure", lambda fig, path: charts.append((fig, path)))
    got = result()
    paths = write_outputs(got, tmp_path)
    assert paths == [tmp_path / "table.csv", tmp_path / "table.json", tmp_path / "miou.png",
                     tmp_path / "table_vi.csv"]
    assert (tmp_path / "table.csv").read_bytes() == (
        b"augmentation,original,color,mR_appearance,mR_geometry,model\n"
        b"start,50.0000,40.0000,0.8000,,start.spec\n"
        b"baseline,60.0000,45.0000,0.7500,1.1000,base.spec\n")
    assert json.loads((tmp_path / "table.json").read_text()) == got
    assert (tmp_path / "table_vi.csv").read_bytes() == (
        b"augmentation,original,model\nstart,,start.spec\nbaseline,58.0000,base.spec\n")
    (fig, path), = charts
    assert path == tmp_path / "miou.png"
    ax = fig.axes[0]
    assert (ax.get_ylabel(), ax.get_title()) == (
        "mIoU %", "mIoU per subset after fine-tuning with each augmentation")
    assert [t.get_text() for t in ax.get_xticklabels()] == ["original", "color"]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [
        "start (mR 0.800)", "baseline (mR 0.750, mR 1.100)"]
    bars = [(round(p.get_x() + p.get_width() / 2, 6), p.get_height()) for p in ax.patches]
    assert bars == [(-0.2, 50.0), (0.8, 40.0), (0.2, 60.0), (1.2, 45.0)]
    assert {round(p.get_width(), 6) for p in ax.patches} == {0.4}
    assert list(fig.get_size_inches()) == [6.3, 4.0]  # 1.4 per subset + 3.5, at least 6 wide
    # the legend sits right of the bars, its top level with theirs, inside the figure
    fig.canvas.draw()
    legend, axes = ax.get_legend().get_window_extent(), ax.get_window_extent()
    figure = fig.get_window_extent()
    assert axes.x1 < legend.x0 < axes.x1 + 0.05 * axes.width
    assert legend.y1 == pytest.approx(axes.y1, abs=0.05 * axes.height)
    assert legend.x1 <= figure.x1 and legend.y0 >= figure.y0
    no_mr = {**got, "groups": [], "subsets": ["original", "color", "a", "b"]}
    no_mr["rows"] = [{**got["rows"][0], "miou": {"original": 1.0}}]
    charts.clear()
    augment.plot(no_mr, tmp_path / "x.png")
    ax = charts[0][0].axes[0]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["start"]
    heights = [p.get_height() for p in ax.patches]
    assert heights[0] == 1.0 and all(np.isnan(h) for h in heights[1:])
    assert [round(p.get_width(), 6) for p in ax.patches] == [0.8] * 4
    assert list(charts[0][0].get_size_inches()) == [9.1, 4.0]


def test_run_hands_every_step_its_settings_and_callbacks(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The demo data have no splits, so the spies note the splits asked for and go on without."""
    from dataclasses import replace

    calls: list[tuple] = []
    real = {name: getattr(augment, name) for name in
            ("load_dataset", "check_models", "build_subsets", "every_image", "train", "plan",
             "run_bench")}
    device = "cuda:9"  # noted, then run on the CPU

    def load_dataset(data, split, limit):
        calls.append(("load", data, split, limit))
        return real["load_dataset"](data, None, limit)

    def check_models(models, dataset, classes_from_data, device):
        calls.append(("check", models, len(dataset), classes_from_data, device))
        return real["check_models"](models, dataset, classes_from_data, "cpu")

    def build_subsets(data, split, limit, attributes, *args, **kw):
        calls.append(("subsets", data, split, limit, attributes, kw.get("on_subset") is not None))
        return real["build_subsets"](data, None, limit, attributes, *args, **kw)

    def every_image(subsets, data, split, limit):
        calls.append(("every", data, split, limit))
        return real["every_image"](subsets, data, None, limit)

    def train(config, folder, resume=False, on_step=None):
        calls.append(("train", config.augment, config.split, folder.name, resume, on_step is not None,
                      config.device))
        return real["train"](replace(config, split=None, device="cpu"), folder, resume=resume,
                             on_step=on_step)

    def run_bench(shards, results, executor, on_records, classes_from_data):
        calls.append(("score", on_records is not None, classes_from_data))
        return real["run_bench"](shards, results, executor, on_records, classes_from_data)

    def plan(models, subsets, chunk=8, batch_size=4, device="cpu"):
        calls.append(("plan", device))
        return real["plan"](models, subsets, *(chunking or (chunk, batch_size)), device="cpu")

    for name, spy in (("load_dataset", load_dataset), ("check_models", check_models),
                      ("build_subsets", build_subsets), ("every_image", every_image),
                      ("train", train), ("plan", plan), ("run_bench", run_bench)):
        monkeypatch.setattr(augment, name, spy)
    training = TrainConfig("demo", "demo", split="train", limit=4, epochs=1, batch_size=4, lr=3e-3,
                           crop=(64, 48), classes_from_data=True, device=device)
    b = AugmentBench(training, ("baseline",), ("weather",), eval_split="val", eval_limit=2,
                     values={"weather": ["fog"]})
    seen: dict[str, list] = {"subset": [], "train": [], "step": [], "scoring": [], "records": []}
    out = tmp_path / "run"
    chunking: tuple[int, ...] = ()  # run()'s chunks and batches
    augment.run(b, out, on_subset=lambda *a: seen["subset"].append(a),
                on_train=lambda *a: seen["train"].append(a),
                on_step=lambda *a: seen["step"].append(a),
                on_scoring=lambda n: seen["scoring"].append(n),
                on_records=lambda n: seen["records"].append(n))
    assert ("load", "demo", "train", 1) in calls and ("load", "demo", "val", 1) in calls
    assert calls.count(("check", ["demo"], 1, True, device)) == 2
    assert ("subsets", "demo", "val", 2, ["weather"], True) in calls
    assert ("every", "demo", "val", 2) in calls
    assert ("train", "baseline", "train", "baseline", False, True, device) in calls
    assert ("plan", device) in calls and ("score", True, True) in calls
    assert seen["subset"] and seen["step"]
    assert seen["train"] == [("baseline", {"augment": "baseline", "out": str(out / "train" / "baseline")})]
    records = (out / "results.jsonl").read_text().splitlines()
    assert seen["scoring"] == [len(records)]  # one record per model and image
    assert sum(seen["records"]) == len(records)
    # scored in chunks of one image, one image per batch: the same records and table
    chunking = (1, 1)
    other = tmp_path / "other"
    shutil.copytree(out / "edits", other / "edits")
    shutil.copytree(out / "train", other / "train")
    augment.run(b, other)
    again = (other / "results.jsonl").read_text().replace(str(other), str(out)).splitlines()
    assert sorted(again) == sorted(records)
    with (other / "results.jsonl").open("a") as fh:  # a line segtk did not write
        fh.write('{"key": "stray"}\n')
    with pytest.raises(SegtkError) as info:
        augment.run(b, other, resume=True)
    assert str(info.value.args[0]).startswith(f"{other / 'results.jsonl'}, stray: a ")
    with pytest.raises(SegtkError) as info:  # not resuming: the results are kept
        augment.run(b, out)
    assert (str(info.value.args[0]), info.value.hint) == (
        f"{out} already holds results",
        "pass --resume to continue that run, --overwrite to start it over, or choose another --out")
