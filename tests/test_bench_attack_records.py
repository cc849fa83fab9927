"""`segtk bench attacks`' results.jsonl as typed records: a real run's lines read back and
write the same bytes in the order segtk has always written them, a line of an older segtk is
kept on --resume and counted, and a line without a key is one error naming file, key and key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from segtk.benchmarks.attacks import BenchAttackRecord, aggregate, bench_records, plan, run_bench
from segtk.cli import cli
from segtk.core import SegtkError
from segtk.jobs.executors import InlineExecutor
from segtk.storage import layout
from segtk.storage.runs import RunDir

# The keys of a line in the order segtk writes them; "stopped" (a time limit stopped the
# attack) and "white_box" (a white-box attack) follow only where they hold.
KEYS = ["key", "model", "attack", "eps", "repeat", "run_budget", "image", "queries",
        "clean_confusion", "confusions", "history", "visibility"]
SHARDS = plan(["demo"], "demo", None, ["dla"], [4], 1, ["scene_000", "scene_001"], 1, 8.0, 0, 1)


def bench(out: Path, resume: bool = False) -> list[BenchAttackRecord]:
    with RunDir(out, {"t": 1}, resume, kind="bench-attacks") as run:
        run_bench(SHARDS, run, InlineExecutor())
        return bench_records(run.done(key="key").values(), out / layout.RESULTS)


def lines(out: Path) -> list[bytes]:
    return (out / layout.RESULTS).read_bytes().splitlines(keepends=True)


def test_a_real_runs_lines_read_back_and_write_the_same_bytes(tmp_path) -> None:
    records = bench(tmp_path / "b")
    written = lines(tmp_path / "b")
    assert [list(json.loads(line)) for line in written] == [KEYS] * 2
    for line, record in zip(written, records):
        assert BenchAttackRecord.from_json(json.loads(line)) == record
        assert (json.dumps(record.to_json(), separators=(",", ":")) + "\n").encode() == line
    marked = BenchAttackRecord.from_json({**json.loads(written[0]), "stopped": "time",
                                          "white_box": True})
    assert list(marked.to_json()) == [*KEYS, "stopped", "white_box"]
    assert marked.stopped == "time" and marked.white_box and records[0].white_box is False


def test_a_line_of_an_older_segtk_is_kept_on_resume_and_counted(tmp_path) -> None:
    """An older line: written with other spacing, a visibility measured before colour (no ΔE)
    and a key this segtk does not know. A resume keeps it byte for byte, runs only the other
    shard, and the table counts it (without a ΔE column, which it cannot average)."""
    whole = bench(tmp_path / "whole")
    first = json.loads(lines(tmp_path / "whole")[0])
    seen = {k: v for k, v in first["visibility"].items() if k in ("psnr", "ssim", "changed")}
    old_line = (json.dumps({**first, "visibility": seen, "note": "kept"}) + "\n").encode()
    old = tmp_path / "old"
    old.mkdir()
    (old / layout.RUN).write_text(json.dumps({"kind": "bench-attacks", "config": {"t": 1}}))
    (old / layout.RESULTS).write_bytes(old_line)
    resumed = bench(old, resume=True)
    assert lines(old) == [old_line, lines(tmp_path / "whole")[1]]
    assert resumed[0].extra == {"note": "kept"} and resumed[0].eps == 8.0
    got, want = aggregate(resumed, SHARDS).rows, aggregate(whole, SHARDS).rows
    assert [r["miou_mean"] for r in got] == [r["miou_mean"] for r in want]
    assert got[-1]["psnr"] == want[-1]["psnr"] and "delta_e" not in got[-1] and "delta_e" in want[-1]


def test_a_line_without_a_key_is_one_error_naming_the_file_the_line_and_the_key(tmp_path) -> None:
    bench(tmp_path / "b")
    path = tmp_path / "b" / layout.RESULTS
    broken = [json.loads(line) for line in lines(tmp_path / "b")]
    del broken[1]["confusions"]
    path.write_text("".join(json.dumps(r) + "\n" for r in broken))
    message = f"{path}, {broken[1]['key']}: a segtk bench attacks record without confusions"
    with pytest.raises(SegtkError) as resumed:
        bench(tmp_path / "b", resume=True)
    assert resumed.value.message == message
    report = CliRunner().invoke(cli, ["report", str(tmp_path / "b")])
    assert report.exit_code == 1 and message in report.output
