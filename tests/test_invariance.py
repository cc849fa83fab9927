"""Results depend on the seed and the images, never on how the work is cut: the same records,
byte for byte, whatever the chunk of a shard and the batch size (the executors are compared in
test_bench_attacks.py). Random attacks are used, so a stream drawn per batch or per chunk
instead of per image shows."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from segtk.benchmarks.attacks import plan, run_bench
from segtk.core import load_dataset, load_segmenter, registry
from segtk.jobs.attack import attack_dataset
from segtk.jobs.executors import InlineExecutor
from segtk.storage.runs import RunDir

pytest.importorskip("segtk_demo")
IMAGES = ["scene_000", "scene_001", "scene_002"]
ATTACKS = ["random", "square"]


def bench_lines(out: Path, chunk: int, batch_size: int) -> list[bytes]:
    """results.jsonl of a demo bench, its lines in key order (shards land in any order)."""
    shards = plan(["demo"], "demo", None, ATTACKS, [3, 6], 1, IMAGES, chunk, 8.0, 0, batch_size)
    with RunDir(out, {"t": 1}, False, kind="bench-attacks") as run:
        run_bench(shards, run, InlineExecutor())
    return sorted((out / "results.jsonl").read_bytes().splitlines())


@pytest.fixture(scope="module")
def whole_bench(tmp_path_factory) -> list[bytes]:
    return bench_lines(tmp_path_factory.mktemp("whole") / "b", chunk=3, batch_size=3)


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(chunk=st.integers(1, 3), batch_size=st.integers(1, 3))
def test_bench_records_do_not_depend_on_chunks_or_batches(whole_bench, tmp_path_factory,
                                                          chunk: int, batch_size: int) -> None:
    cut = bench_lines(tmp_path_factory.mktemp("cut") / "b", chunk, batch_size)
    assert cut == whole_bench, f"--chunk {chunk} --batch-size {batch_size} changed the records"


def attack_folder(out: Path, batch_size: int) -> dict[str, bytes]:
    """Every file a `segtk attack` run with a random attack writes but run.json, by name."""
    data = load_dataset("demo").subset(names=IMAGES)
    attack = registry.attack("random")(budget=5, eps=8.0, seed=3)
    model = load_segmenter("demo")
    with RunDir(out, {"t": 1}, False, kind="attack") as run:
        attack_dataset(attack, model, data, run, batch_size=batch_size)
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*"))
            if p.is_file() and p.name not in ("run.json", ".lock")}


def test_attack_records_and_images_do_not_depend_on_the_batch_size(tmp_path) -> None:
    one = attack_folder(tmp_path / "one", batch_size=1)
    three = attack_folder(tmp_path / "three", batch_size=3)
    assert sorted(one) == sorted(three)
    changed = [name for name in one if one[name] != three[name]]
    assert not changed, f"batch size 1 vs 3 changed {changed}"
    assert "results.jsonl" in one and any(name.endswith(".png") for name in one)
