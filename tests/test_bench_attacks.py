"""`segtk bench attacks`: budgets read off one run equal separate runs; executors agree; resume."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from segtk.benchmarks import attacks as bench_module
from segtk.benchmarks.attacks import aggregate, plan, run_bench, write_contact_sheet, write_outputs
from segtk.core import registry
from segtk.core.data import Dataset, Item
from segtk.core.metrics import confusion
from segtk.core.runs import RunDir
from segtk.jobs.executors import InlineExecutor, LocalExecutor, make_executor
from segtk.testing import GridSegmenter, TinySegmenter, toy_batch

ANYTIME = ["random", "nes", "bandits", "zo-signsgd", "signhunter", "simba", "colour-stripes"]


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


def bench(tmp_path, executor, name="b", resume=False, images=("scene_000", "scene_001", "scene_002")):
    pytest.importorskip("segtk_demo")
    shards = plan(["demo"], "demo", None, ["dla", "signhunter"], [4, 8], 2, list(images), 2, 8.0, 0, 2,
                  sheet_dir=str(tmp_path / name / "sheet"))
    run = RunDir(tmp_path / name, {"t": 1}, resume, kind="bench-attacks")
    run_bench(shards, run, executor)
    return aggregate(run.done(key="key").values(), shards), run


def test_local_process_pool_equals_inline_and_writes_outputs(tmp_path) -> None:
    inline, _ = bench(tmp_path, InlineExecutor(), "inline")
    pooled, run = bench(tmp_path, LocalExecutor(workers=2), "pool")
    assert pooled.rows == inline.rows
    assert [r["attack"] for r in inline.rows][:1] == ["clean"]
    assert {(r["attack"], r["budget"]) for r in inline.rows} >= {("dla", 4), ("dla", 8), ("signhunter", 4)}
    paths = write_outputs(pooled, run.path)
    header = (run.path / "table.csv").read_text().splitlines()[0]
    assert header.startswith("model,attack,eps,budget,miou_mean,miou_std,pacc_mean")
    assert json.loads((run.path / "table.json").read_text()) == pooled.rows
    assert all(p.exists() for p in paths)
    final = [r for r in pooled.rows if r["budget"] == 8]
    assert final and all(r["psnr"] > 20 and 0 < r["ssim"] < 1 and r["changed_pct"] > 0 for r in final)
    assert "ssim" not in [r for r in pooled.rows if r["budget"] == 4][0]
    from segtk.core.specs import load_dataset

    sheet = write_contact_sheet(run.path, load_dataset("demo"), ["dla", "signhunter"], 8, 8.0)
    assert sheet is not None and sheet.stat().st_size > 0


def test_interrupted_bench_resumes_to_the_same_table(tmp_path) -> None:
    full, _ = bench(tmp_path, InlineExecutor(), "full")
    _, run = bench(tmp_path, InlineExecutor(), "cut")
    lines = (run.path / "results.jsonl").read_bytes().splitlines(keepends=True)
    (run.path / "results.jsonl").write_bytes(b"".join(lines[:5]) + lines[5][:20])  # torn line
    resumed, _ = bench(tmp_path, InlineExecutor(), "cut", resume=True)
    assert resumed.rows == full.rows


@pytest.mark.slow
def test_ray_executor_equals_local(tmp_path) -> None:
    pytest.importorskip("ray")
    import ray

    local, _ = bench(tmp_path, InlineExecutor(), "local", images=("scene_000", "scene_001"))
    try:
        remote, _ = bench(tmp_path, make_executor("ray", workers=2), "ray", images=("scene_000", "scene_001"))
    finally:
        ray.shutdown()
    assert remote.rows == local.rows


def test_a_repeat_missing_images_is_left_out_of_the_table(tmp_path) -> None:
    full, run = bench(tmp_path, InlineExecutor(), "part")
    shards = plan(["demo"], "demo", None, ["dla", "signhunter"], [4, 8], 2,
                  ["scene_000", "scene_001", "scene_002"], 2, 8.0, 0, 2)
    records = [r for r in run.done(key="key").values()
               if not (r["repeat"] == 1 and r["image"] == "scene_002" and r["attack"] == "dla")]
    part = aggregate(records, shards)
    by = {(r["attack"], r["budget"]): r for r in part.rows}
    assert by[("dla", 4)]["repeats"] == 1 and by[("dla", 8)]["repeats"] == 1
    assert by[("signhunter", 8)]["repeats"] == 2
    first = aggregate([r for r in records if r["repeat"] == 0], shards)
    assert by[("dla", 8)]["miou_mean"] == next(r for r in first.rows if r["attack"] == "dla" and r["budget"] == 8)["miou_mean"]


@pytest.fixture
def grid_world(monkeypatch):
    """`--model grid --data grid`: two 8-bit images labelled class 1 everywhere."""
    rng = np.random.default_rng(0)
    items = [Item(f"g{i}", rng.integers(20, 235, (12, 16, 3), dtype=np.uint8),
                  np.ones((12, 16), dtype=np.int64)) for i in range(2)]
    data = Dataset("grid", ["zero", "one"], [(it.name, lambda it=it: it) for it in items])
    model = GridSegmenter()
    monkeypatch.setattr(bench_module, "cached_segmenter", lambda spec: model)
    monkeypatch.setattr(bench_module, "load_dataset", lambda spec, split=None, limit=None: data)
    return data


@pytest.mark.parametrize("attack", ["random", "dla:values=continuous"])
def test_the_table_scores_the_stored_8bit_images_not_the_float_candidates(tmp_path, grid_world,
                                                                          attack) -> None:
    shards = plan(["grid"], "grid", None, [attack], [3, 6], 1, grid_world.names, 2, 8.0, 0, 2)
    run = RunDir(tmp_path / "b", {"t": 1}, False, kind="bench-attacks")
    run_bench(shards, run, InlineExecutor())
    result = aggregate(run.done(key="key").values(), shards)
    assert min(result.curves["grid"][attack]) == 0  # the float candidates fool the model (proxy)...
    by = {(r["attack"], r["budget"]): r["miou_mean"] for r in result.rows}
    assert by[("clean", 0)] == 100
    assert by[(attack, 3)] == by[(attack, 6)] == 100  # ...the stored 8-bit images do not
