"""`segtk bench attacks`: budgets read off one run equal separate runs; executors agree; resume."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from segtk.benchmarks import attacks as bench_module
from segtk.benchmarks.attacks import (
    BenchAttackRecord,
    Shard,
    aggregate,
    bench_records,
    plan,
    run_bench,
    write_contact_sheet,
    write_outputs,
)
from segtk.core import Dataset, Item, confusion, registry
from segtk.jobs.executors import InlineExecutor, LocalExecutor, make_executor
from segtk.storage.runs import RunDir, read_results
from segtk.testing import GridSegmenter, TinySegmenter, toy_batch

ANYTIME = ["random", "nes", "bandits", "zo-signsgd", "signhunter", "simba", "colour-stripes",
           "colour-blocks"]


@pytest.mark.parametrize("name", ANYTIME)
def test_smaller_budgets_read_off_one_run_equal_separate_runs(name) -> None:
    cls = registry.attack(name)
    assert cls.anytime
    images, labels = toy_batch(2, 16, 16, seed=4)
    long = cls(budget=24, seed=1).run(TinySegmenter(), images, labels, checkpoints=(5, 12, 24))
    for b in (5, 12, 24):
        short = cls(budget=b, seed=1).run(TinySegmenter(), images, labels)
        expected = confusion(short.predictions, labels, 4)
        assert torch.equal(long.checkpoints[b], expected), f"{name} at {b} queries"
        assert torch.equal(long.checkpoint_images[b], short.images), f"{name}'s image at {b} queries"
        assert [h[:b] for h in long.history] == short.history


def test_budget_dependent_attacks_run_once_per_budget() -> None:
    shards = plan(["m"], "d", None, ["dla", "random"], [10, 50], 2, ["a", "b", "c"], 2, 8.0, 0, 2)
    runs = {(s.attack, s.repeat, s.budget, s.checkpoints) for s in shards}
    assert ("dla", 0, 10, (10,)) in runs and ("dla", 0, 50, (50,)) in runs
    assert ("random", 1, 50, (10, 50)) in runs and not any(r[0] == "random" and r[2] == 10 for r in runs)
    assert len(shards) == (2 * 2 + 1 * 2) * 2  # (dla 2 budgets + random 1 run) × repeats × chunks


IMAGES = ("scene_000", "scene_001", "scene_002")


def demo_shards(sheet_dir: Path | None = None) -> list:
    """The demo bench: DLA and SignHunter, budgets 4 and 8, 2 repeats, 3 images in chunks of 2."""
    pytest.importorskip("segtk_demo")
    return plan(["demo"], "demo", None, ["dla", "signhunter"], [4, 8], 2, list(IMAGES), 2, 8.0, 0, 2,
                sheet_dir=str(sheet_dir) if sheet_dir else None)


def bench(path: Path, executor, resume: bool = False):
    shards = demo_shards(path / "sheet")
    with RunDir(path, {"t": 1}, resume, kind="bench-attacks") as run:
        run_bench(shards, run, executor)
        return aggregate(bench_records(run.done(key="key").values(), None), shards)


@pytest.fixture(scope="module")
def inline_bench(tmp_path_factory) -> tuple:
    """The demo bench run once, inline, for every test here that needs a finished run (its
    table and its folder); tests copy the folder before changing anything in it."""
    path = tmp_path_factory.mktemp("bench") / "inline"
    return bench(path, InlineExecutor()), path


def test_local_process_pool_equals_inline_and_writes_outputs(inline_bench, tmp_path) -> None:
    inline, _ = inline_bench
    out = tmp_path / "pool"
    pooled = bench(out, LocalExecutor(workers=2))
    assert pooled.rows == inline.rows
    assert [r["attack"] for r in inline.rows][:1] == ["clean"]
    assert {(r["attack"], r["budget"]) for r in inline.rows} >= {("dla", 4), ("dla", 8), ("signhunter", 4)}
    paths = write_outputs(pooled, out)
    header = (out / "table.csv").read_text().splitlines()[0]
    assert header.startswith("model,attack,eps,budget,miou_mean,miou_std,pacc_mean")
    assert json.loads((out / "table.json").read_text()) == pooled.rows
    assert all(p.exists() for p in paths)
    final = [r for r in pooled.rows if r["budget"] == 8]
    assert final and all(r["psnr"] > 20 and 0 < r["ssim"] < 1 and r["changed_pct"] > 0 for r in final)
    assert "ssim" not in [r for r in pooled.rows if r["budget"] == 4][0]
    from segtk.core import load_dataset
    sheet = write_contact_sheet(out, load_dataset("demo"), ["dla", "signhunter"], 8, 8.0)
    assert sheet is not None and sheet.stat().st_size > 0


@pytest.mark.parametrize("kept", [4, 5])  # cut inside a shard (its first image done), between shards
def test_a_resume_appends_only_the_missing_records(inline_bench, tmp_path, kept) -> None:
    """What results.jsonl held before --resume stays byte for byte (each kept line carries a mark
    a recomputed record would not have), only the missing records are appended, once each, and
    the table equals the uninterrupted run's."""
    full, done = inline_bench
    lines = (done / "results.jsonl").read_bytes().splitlines(keepends=True)
    marked = [line.replace(b"{", b'{"kept":1,', 1) for line in lines[:kept]]
    cut = tmp_path / "cut"
    cut.mkdir()
    shutil.copy(done / "run.json", cut / "run.json")
    (cut / "results.jsonl").write_bytes(b"".join(marked) + lines[kept][:20])  # then a torn line
    resumed = bench(cut, InlineExecutor(), resume=True)
    raw = (cut / "results.jsonl").read_bytes()
    assert raw.startswith(b"".join(marked)), "a record that was there before the resume changed"
    added = [json.loads(line)["key"] for line in raw[len(b"".join(marked)):].splitlines()]
    keys = [json.loads(line)["key"] for line in lines]
    assert sorted(added) == sorted(keys[kept:])  # each missing record once, nothing else
    assert resumed.rows == full.rows


@pytest.mark.slow
def test_ray_executor_equals_local(inline_bench, tmp_path) -> None:
    pytest.importorskip("ray")
    import ray

    try:
        remote = bench(tmp_path / "ray", make_executor("ray", workers=2))
    finally:
        ray.shutdown()
    assert remote.rows == inline_bench[0].rows


def test_a_repeat_missing_images_is_left_out_of_the_table(inline_bench) -> None:
    _, done = inline_bench
    shards = demo_shards()
    records = [r for r in bench_records(read_results(done / "results.jsonl", key="key").values(), None)
               if not (r.repeat == 1 and r.image == "scene_002" and r.attack == "dla")]
    part = aggregate(records, shards)
    by = {(r["attack"], r["budget"]): r for r in part.rows}
    assert by[("dla", 4)]["repeats"] == 1 and by[("dla", 8)]["repeats"] == 1
    assert by[("signhunter", 8)]["repeats"] == 2
    first = aggregate([r for r in records if r.repeat == 0], shards)
    assert by[("dla", 8)]["miou_mean"] == next(r for r in first.rows if r["attack"] == "dla" and r["budget"] == 8)["miou_mean"]


def hand_record(shard: Shard, image: str, conf: list[list[int]]) -> BenchAttackRecord:
    """A record as run_shard writes it, with a hand-made confusion at the shard's budget."""
    return BenchAttackRecord(key=shard.key(image), model=shard.model, attack=shard.attack,
                             eps=shard.eps, repeat=shard.repeat, run_budget=shard.budget,
                             image=image, queries=shard.budget,
                             clean_confusion=[[2, 0, 0], [0, 2, 0]],
                             confusions={str(shard.budget): conf}, history=[1.0, 0.5])


def test_the_table_is_the_mean_and_population_std_of_the_repeats_dataset_miou() -> None:
    """Two repeats of two images whose confusions (2 classes + the void column) give dataset
    mIoUs of 50% and 100% by hand: the row is 75 ± 25, the population std over repeats
    (statistics.pstdev), not the sample std (35.36); pixel accuracy 2/3 and 1 -> 83.33."""
    shards = plan(["m"], "d", None, ["random"], [2], 2, ["a", "b"], 2, 8.0, 0, 1)
    perfect = [[1, 0, 0], [0, 1, 0]]
    confusions = {0: {"a": perfect, "b": [[0, 1, 0], [0, 0, 0]]},  # class 0: 1/2, class 1: 1/2
                  1: {"a": perfect, "b": perfect}}  # every pixel right: 1
    records = [hand_record(s, image, confusions[s.repeat][image]) for s in shards for image in s.images]
    rows = {r["attack"]: r for r in aggregate(records, shards).rows}
    row = rows["random"]
    assert (row["repeats"], row["images"], row["budget"]) == (2, 2, 2)
    assert row["miou_mean"] == pytest.approx(75.0, abs=1e-9)
    assert row["miou_std"] == pytest.approx(25.0, abs=1e-9)
    assert row["pacc_mean"] == pytest.approx(100 * (2 / 3 + 1) / 2, abs=1e-9)
    assert (rows["clean"]["miou_mean"], rows["clean"]["miou_std"]) == (100.0, 0.0)


@pytest.fixture
def grid_world(monkeypatch):
    """`--model grid --data grid`: two 8-bit images labelled class 1 everywhere."""
    rng = np.random.default_rng(0)
    items = [Item(f"g{i}", rng.integers(20, 235, (12, 16, 3), dtype=np.uint8),
                  np.ones((12, 16), dtype=np.int64)) for i in range(2)]
    data = Dataset("grid", ["zero", "one"], [(it.name, lambda it=it: it) for it in items])
    model = GridSegmenter()
    monkeypatch.setattr(bench_module, "cached_segmenter", lambda spec, device="cpu": model)
    monkeypatch.setattr(bench_module, "load_dataset", lambda spec, split=None, limit=None: data)
    return data


@pytest.mark.parametrize("attack", ["random", "dla:values=continuous"])
def test_the_table_scores_the_stored_8bit_images_not_the_float_candidates(tmp_path, grid_world,
                                                                          attack) -> None:
    shards = plan(["grid"], "grid", None, [attack], [3, 6], 1, grid_world.names, 2, 8.0, 0, 2)
    run = RunDir(tmp_path / "b", {"t": 1}, False, kind="bench-attacks")
    run_bench(shards, run, InlineExecutor())
    result = aggregate(bench_records(run.done(key="key").values(), None), shards)
    assert min(result.curves["grid"][attack]) == 0  # the float candidates fool the model (proxy)...
    by = {(r["attack"], r["budget"]): r["miou_mean"] for r in result.rows}
    assert by[("clean", 0)] == 100
    assert by[(attack, 3)] == by[(attack, 6)] == 100  # ...the stored 8-bit images do not
