"""The bench table and curves from hand-made records, against a pure-Python computation:
rows in order (clean, then ε × attack × budget), dataset mIoU mean ± population std over the
complete repeats, pixel accuracy, visibility at the largest budget, curves from the largest
budget's runs; and run_bench's bookkeeping (what it reruns, what it reports, the class check)
with an executor that hands back canned records."""

from __future__ import annotations

import dataclasses
import json
import math
import statistics

import numpy as np
import pytest

from segtk.benchmarks import attacks as bench_module
from segtk.benchmarks.attacks import BenchAttackRecord, Shard, aggregate, plan, run_bench
from segtk.core import DataError, Dataset, Item
from segtk.storage.runs import RunDir
from segtk.testing import GridSegmenter

# Per-image 2-class confusions (rows: label 0, 1; columns: predicted 0, 1, void).
RIGHT = [[2, 0, 0], [0, 1, 0]]
SWAPPED = [[1, 1, 0], [0, 1, 0]]
VOID = [[0, 0, 2], [0, 1, 0]]
CASES = [RIGHT, SWAPPED, VOID]
IMAGES = ["a", "b"]


def dataset_scores(confusions: list[list[list[int]]]) -> tuple[float, float]:
    """mIoU and pixel accuracy (%) of the summed confusion, counted by hand."""
    total = [[sum(c[i][j] for c in confusions) for j in range(3)] for i in range(2)]
    ious = []
    for k in range(2):
        union = sum(total[k]) + sum(total[i][k] for i in range(2)) - total[k][k]
        if union:
            ious.append(total[k][k] / union)
    correct = total[0][0] + total[1][1]
    return 100 * sum(ious) / len(ious), 100 * correct / sum(map(sum, total))


def case(attack: str, eps: float, budget: int, repeat: int, image: str) -> list[list[int]]:
    return CASES[(len(attack) + int(eps) + budget + 2 * repeat + ord(image)) % 3]


def history(shard: Shard, image: str) -> list[float]:
    """Image b's history is one query short (an early stop): curves pad it with its last value."""
    n = shard.budget - (image == "b")
    return [round(1 - (k + 1) / (shard.budget + 1) - 0.01 * shard.repeat, 6) for k in range(n)]


def visibility(shard: Shard, image: str) -> dict[str, float]:
    seen = {"psnr": 40.0 + shard.repeat if image == "a" else math.inf, "ssim": 0.9 - 0.1 * shard.repeat,
            "changed": 0.25 + 0.5 * (image == "b")}
    if shard.attack == "random" or image == "a":  # one dla record predates colour: no ΔE there
        seen.update(delta_e=1.0 + shard.repeat, delta_chroma=0.5)
    return seen


def records_of(shards: list[Shard], skip=lambda shard, image: False) -> list[BenchAttackRecord]:
    return [BenchAttackRecord.from_json(line) for line in lines_of(shards, skip)]


def lines_of(shards: list[Shard], skip=lambda shard, image: False) -> list[dict]:
    """The results.jsonl lines of `shards` (but the images `skip` leaves out)."""
    return [{"key": s.key(i), "model": s.model, "attack": s.attack, "eps": s.eps, "repeat": s.repeat,
             "run_budget": s.budget, "image": i, "queries": s.budget, "clean_confusion": RIGHT,
             "confusions": {str(b): case(s.attack, s.eps, b, s.repeat, i) for b in s.checkpoints},
             "history": history(s, i), "visibility": visibility(s, i)}
            for s in shards for i in s.images if not skip(s, i)]


SHARDS = plan(["m"], "d", None, ["random", "dla"], [2, 4], 2, IMAGES, 1, [4, 8], 0, 1)


def test_rows_are_the_mean_and_population_std_of_each_complete_repeat() -> None:
    # repeat 1 of dla at ε=8, budget 2 lacks image b: only repeat 0 counts there
    def missing(s: Shard, image: str) -> bool:
        return (s.attack, s.eps, s.budget, s.repeat, image) == ("dla", 8.0, 2, 1, "b")

    result = aggregate(records_of(SHARDS, missing), SHARDS)
    expected = [{"model": "m", "attack": "clean", "eps": None, "budget": 0, "images": 2, "repeats": 1,
                 "miou_mean": 100.0, "miou_std": 0.0, "pacc_mean": 100.0, "white_box": False}]
    for eps in (4.0, 8.0):
        for attack in ("random", "dla"):
            for budget in (2, 4):
                reps = [0] if (attack, eps, budget) == ("dla", 8.0, 2) else [0, 1]
                scores = [dataset_scores([case(attack, eps, budget, r, i) for i in IMAGES]) for r in reps]
                row: dict[str, float | int | str | None] = {"model": "m", "attack": attack, "eps": eps, "budget": budget, "images": 2,
                       "repeats": len(reps), "miou_mean": statistics.fmean(m for m, _ in scores),
                       "miou_std": statistics.pstdev([m for m, _ in scores]),
                       "pacc_mean": statistics.fmean(p for _, p in scores), "white_box": False}
                if budget == 4:
                    row.update(psnr=40.5, ssim=0.85, changed_pct=50.0)
                    if attack == "random":
                        row.update(delta_e=1.5, delta_chroma=0.5)
                expected.append(row)
    # the table's columns in the table's order, each value as computed by hand
    assert [{k: r[k] for k in e} for r, e in zip(result.rows, expected)] == \
        [{k: pytest.approx(v) for k, v in e.items()} for e in expected]
    assert [sorted(r) for r in result.rows] == [sorted(e) for e in expected]
    assert {r["miou_std"] for r in result.rows} != {0.0}  # the repeats differ somewhere


def test_curves_come_from_the_largest_budget_and_pad_short_histories() -> None:
    result = aggregate(records_of(SHARDS), SHARDS)
    assert list(result.curves) == ["m"]
    assert list(result.curves["m"]) == ["random ε=4", "dla ε=4", "random ε=8", "dla ε=8"]
    four = [s for s in SHARDS if s.budget == 4 and s.attack == "dla" and s.eps == 4]
    histories = [history(s, i) for s in four for i in s.images]
    padded = [h + h[-1:] * (4 - len(h)) for h in histories]
    assert result.curves["m"]["dla ε=4"] == pytest.approx(
        [100 * statistics.fmean(col) for col in zip(*padded)])
    backwards = aggregate(records_of(SHARDS), list(reversed(SHARDS)))  # budget 4 listed first
    assert backwards.curves["m"] == result.curves["m"]


def test_one_eps_labels_curves_by_spec_and_counts_records_without_eps() -> None:
    shards = plan(["m"], "d", None, ["random"], [2, 4], 1, IMAGES, 2, 8.0, 0, 1)
    lines = lines_of(shards)
    for line in lines:
        del line["eps"], line["visibility"]  # written before ε sweeps and visibility
    records = [BenchAttackRecord.from_json(line) for line in lines]
    result = aggregate(records, shards)
    assert [(r["attack"], r["budget"]) for r in result.rows] == [("clean", 0), ("random", 2), ("random", 4)]
    assert "psnr" not in result.rows[-1] and list(result.curves["m"]) == ["random"]
    swept = plan(["m"], "d", None, ["random"], [2, 4], 1, IMAGES, 2, [4, 8], 0, 1)
    assert [r["attack"] for r in aggregate(records, swept).rows] == []  # ε unknown in a sweep


def test_all_unchanged_images_have_an_infinite_psnr() -> None:
    shards = plan(["m"], "d", None, ["random"], [2], 1, IMAGES, 2, 8.0, 0, 1)
    records = records_of(shards)
    for rec in records:
        assert rec.visibility is not None
        rec.visibility["psnr"] = math.inf
    assert aggregate(records, shards).rows[-1]["psnr"] == math.inf


class Canned:
    """An executor handing back prepared records for the shards it is asked to run."""

    def __init__(self, records: list[BenchAttackRecord]) -> None:
        self.by_key = {r.key: r for r in records}
        self.asked: list[Shard] = []

    def map(self, fn, shards):
        self.asked = list(shards)
        return [[self.by_key[s.key(i)] for i in s.images] for s in self.asked]


@pytest.fixture
def grid(monkeypatch):
    """`--model grid --data grid`, with the model's class names or other ones."""
    item = Item("a", np.zeros((2, 2, 3), np.uint8), np.zeros((2, 2), np.int64))

    def use(classes: list[str]) -> None:
        data = Dataset("grid", classes, [("a", lambda: item)])
        monkeypatch.setattr(bench_module, "cached_segmenter", lambda spec, device="cpu": GridSegmenter())
        monkeypatch.setattr(bench_module, "load_dataset", lambda spec, split=None, limit=None: data)

    return use


def test_run_bench_runs_only_unfinished_shards_and_reports_progress(tmp_path, grid) -> None:
    grid(["zero", "one"])
    shards = plan(["m"], "d", None, ["random"], [2], 1, ["a", "b", "c"], 2, 8.0, 0, 1)
    records = records_of(shards)
    progress: list[int] = []
    with RunDir(tmp_path / "r", {}, False, kind="bench-attacks") as run:
        run.append(records[0].to_json())  # the first shard half done
        executor = Canned(records)
        run_bench(shards, run, executor, on_records=progress.append)
        assert executor.asked == shards and progress == [1, 1, 1]  # done before, then per shard
        lines = (run.path / "results.jsonl").read_text().splitlines()
        assert [json.loads(line)["key"] for line in lines] == [r.key for r in records]  # once each
        progress.clear()
        run_bench(shards, run, executor, on_records=progress.append)
        assert executor.asked == [] and progress == [3]  # finished: nothing to run


def test_run_bench_checks_the_classes_unless_taken_from_the_data(tmp_path, grid) -> None:
    grid(["background", "object"])
    shards = plan(["m"], "d", None, ["random"], [2], 1, ["a"], 1, 8.0, 0, 1)
    with RunDir(tmp_path / "r", {}, False, kind="bench-attacks") as run:
        with pytest.raises(DataError, match="name their classes differently"):
            run_bench(shards, run, Canned(records_of(shards)))
        run_bench(shards, run, Canned(records_of(shards)), classes_from_data=True)
        assert len(run.done(key="key")) == 1


def test_records_of_other_runs_are_skipped_and_white_box_runs_marked() -> None:
    shards = plan(["m"], "d", None, ["random"], [2], 1, IMAGES, 2, 8.0, 0, 1)
    records = records_of(shards)
    stray = dataclasses.replace(records[0], attack="square", key="stray")  # no shard asks: skipped
    plain = aggregate([stray, *records], shards)
    assert plain.rows == aggregate(records, shards).rows and plain.rows[-1]["white_box"] is False
    marked = aggregate([dataclasses.replace(r, white_box=True) for r in records], shards)
    assert marked.rows[-1]["white_box"] is True and list(marked.curves["m"]) == ["random (white-box)"]


def test_run_bench_checks_each_shards_own_model_and_data(tmp_path, monkeypatch) -> None:
    item = Item("a", np.zeros((2, 2, 3), np.uint8), np.zeros((2, 2), np.int64))
    asked: list[object] = []  # model specs and (data spec, split) pairs

    def load(spec, split=None, limit=None):
        asked.append((spec, split))
        return Dataset("grid", ["background", "object"], [("a", lambda: item)])

    def cached_segmenter(spec: str, device: str = "cpu") -> GridSegmenter:
        asked.append(spec)
        return GridSegmenter()

    monkeypatch.setattr(bench_module, "cached_segmenter", cached_segmenter)
    monkeypatch.setattr(bench_module, "load_dataset", load)
    shards = plan(["m"], "d", "val", ["random"], [2], 1, ["a"], 1, 8.0, 0, 1)
    with RunDir(tmp_path / "r", {}, False, kind="bench-attacks") as run:
        with pytest.raises(DataError, match="name their classes differently"):
            run_bench(shards, run, Canned(records_of(shards)))
    assert asked[:2] == ["m", ("d", "val")]


def test_run_bench_checks_each_model_on_the_shards_device(tmp_path, monkeypatch) -> None:
    """The class and gradient checks load each model where its shards run (the cached model the
    run then reuses), not a second copy on the default device."""
    item = Item("a", np.zeros((2, 2, 3), np.uint8), np.zeros((2, 2), np.int64))
    loaded: list[tuple[str, object]] = []

    def cached(spec, device="cpu"):
        loaded.append((spec, device))
        return GridSegmenter()

    monkeypatch.setattr(bench_module, "cached_segmenter", cached)
    monkeypatch.setattr(bench_module, "load_dataset",
                        lambda spec, split=None, limit=None: Dataset("grid", ["zero", "one"],
                                                                     [("a", lambda: item)]))
    shards = plan(["m"], "d", None, ["random"], [2], 1, ["a"], 1, 8.0, 0, 1, device="cuda:7")
    with RunDir(tmp_path / "r", {}, False, kind="bench-attacks") as run:
        run_bench(shards, run, Canned(records_of(shards)))
        assert len(run.done(key="key")) == 1
    assert loaded == [("m", "cuda:7")] * 2  # the class check, then the gradient check


def test_rows_follow_the_attacks_option_whatever_order_the_records_landed_in() -> None:
    # shards finish in any order (a process pool yields them as they end): records of the last
    # planned attack may come first; the table still follows --attacks (then --eps), and a
    # report read from the records alone follows run.json's options the same way
    from segtk.benchmarks.attacks import recorded_shards, with_recorded

    shards = plan(["m"], "d", None, ["random", "dla"], [2], 1, IMAGES, 1, [4, 8], 0, 1)
    landed = records_of(list(reversed(shards)))
    rows = aggregate(landed, with_recorded(shards, landed)).rows
    assert [(r["attack"], r["eps"]) for r in rows] == [
        ("clean", None), ("random", 4.0), ("dla", 4.0), ("random", 8.0), ("dla", 8.0)]
    planned = [("m", a, e) for e in (4.0, 8.0) for a in ("random", "dla")]
    from_records = recorded_shards(landed, IMAGES, planned=planned)
    assert [(r["attack"], r["eps"]) for r in aggregate(landed, from_records).rows] == \
        [(a, e) for a, e in [("clean", None)] + [(a, e) for _, a, e in planned]]
