"""The typed records of edit, bench-edits, train and bench-augment runs: each line a job writes
reads back as its record and writes back as the same bytes, and lines written before a key
existed still read and resume (attack records: tests/test_attack_records.py)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from segtk.api import bench_edits
from segtk.benchmarks.edits import ScoreLine
from segtk.core import (
    EditedSample,
    Filter,
    FilterResult,
    PromptWriter,
    Sample,
    SegtkError,
    load_dataset,
)
from segtk.jobs.checkpoints import CheckpointRecord, checkpoint_dir
from segtk.jobs.edit import EditConfig, EditRun, build_editor, edit_dataset
from segtk.jobs.edit_records import EditLine, SkipLine, read_lines
from segtk.jobs.train import EpochLine, TrainConfig, train
from segtk.reports.bench_augment import bench_augment_context
from segtk.reports.edit import edit_context
from segtk.storage.layout import CHECKPOINT_DONE, MANIFEST, RESULTS, RUN, SKIPPED, TABLE_JSON
from segtk.storage.records import Record

# The keys of a manifest line as the first `segtk edit` wrote them, in its order.
FIRST_MANIFEST_KEYS = ("name", "source", "value", "variant", "source_image", "attribute", "editor",
                       "kind", "level", "class", "object_area", "prompt_source", "prompt",
                       "backend", "parameters", "seed", "run_seed")


def raw_lines(path: Path) -> list[str]:
    return path.read_text().splitlines()


def as_written(record: Record) -> str:
    """The line a job appends for `record` (storage.runs.append_line's JSON)."""
    return json.dumps(record.to_json(), separators=(",", ":"))


def assert_round_trips(path: Path, record: type[Record]) -> list[Any]:
    """Every line of `path` reads as `record` and writes back as the same bytes."""
    lines = raw_lines(path)
    assert lines, f"{path} is empty"
    records = [record.from_json(json.loads(line)) for line in lines]
    assert [as_written(r) for r in records] == lines
    return records


# --- edit ---------------------------------------------------------------------------------------


class Echo(PromptWriter):
    name = "echo"

    def rewrite(self, sample: Sample, attribute: str, value: str,
                template: str) -> tuple[str, str]:
        return f"{template}, {attribute}={value}", "echo:1"


class Scored(Filter):
    """A pixel filter that keeps every pixel and scores each edit."""

    name, stage = "scored", "pixel"

    def apply(self, original: Sample, edited: EditedSample) -> FilterResult:
        return FilterResult(keep=True, scores={"kept_fraction": 1.0})


class NotScene1(Filter):
    """A sample filter that rejects the edits of scene_001."""

    name, stage = "not-scene-1", "sample"

    def apply(self, original: Sample, edited: EditedSample) -> FilterResult:
        return FilterResult(keep=original.name != "scene_001", scores={"score": 0.5})


def edit_demo(out: Path, resume: bool = False, **settings: Any) -> Any:
    """The classical color editor over demo scenes 000-002 (002 has no large enough object)."""
    with EditRun(out, {"x": 1}, resume=resume) as run:
        return edit_dataset(build_editor("color", "classical", {}), load_dataset("demo", None, 3),
                            run, EditConfig(["red", "blue"], sheet_rows=1, **settings))


def test_edit_lines_read_back_as_the_bytes_the_job_wrote(tmp_path: Path) -> None:
    """Manifest and skipped lines with every optional key (prompt writer, filters, a filtered
    skip) and without any: each reads as its record and writes back byte for byte, and the
    job's own records (the Python API's) are those lines."""
    full = edit_demo(tmp_path / "full", prompt_writer=Echo("m"), filters=[NotScene1(), Scored()])
    edits = assert_round_trips(tmp_path / "full" / MANIFEST, EditLine)
    skips = assert_round_trips(tmp_path / "full" / SKIPPED, SkipLine)
    assert {e.prompt_writer for e in edits} == {"echo:1"}
    assert {e.class_name for e in edits} == {"building"}  # the line's "class"
    assert edits[0].filters == {"not-scene-1": {"score": 0.5}, "scored": {"kept_fraction": 1.0}}
    assert {s.reason for s in skips} == {"filtered:not-scene-1", "tiny-object"}
    assert all((s.filters is None) == (s.reason == "tiny-object") for s in skips)
    assert [as_written(r) for r in full.edited] == raw_lines(tmp_path / "full" / MANIFEST)
    plain = edit_demo(tmp_path / "plain")
    for line in assert_round_trips(tmp_path / "plain" / MANIFEST, EditLine):
        assert list(line.to_json()) == list(FIRST_MANIFEST_KEYS)
    assert [as_written(r) for r in plain.skipped] == raw_lines(tmp_path / "plain" / SKIPPED)


def test_an_edit_run_resumes_over_lines_an_older_segtk_wrote(tmp_path: Path) -> None:
    """A manifest line with only the first writer's keys and a key this segtk does not know,
    and a lost last line (a crash): --resume keeps the line as it is, redoes only the lost
    edit, and the dataset reader and the report read the folder."""
    out = tmp_path / "e"
    edit_demo(out)
    lines = raw_lines(out / MANIFEST)
    first = json.loads(lines[0])
    old = json.dumps({**{k: first[k] for k in FIRST_MANIFEST_KEYS}, "clip_score": 0.25},
                     separators=(",", ":"))
    (out / MANIFEST).write_text("\n".join([old, *lines[1:-1]]) + "\n")
    resumed = edit_demo(out, resume=True)
    assert raw_lines(out / MANIFEST) == [old, *lines[1:]]
    assert resumed.edited[0].extra == {"clip_score": 0.25}
    assert resumed.as_dict()["edited"] == len(lines)
    assert len(load_dataset(f"edited:{out}").extra["manifest"]) == len(lines)
    meta = json.loads((out / RUN).read_text())
    context = edit_context(out, meta, "demo", [])
    assert context["edited"] == len(lines) and context["score_columns"] == ["clip_score"]


def test_a_manifest_line_that_is_no_edit_is_refused_naming_the_line(tmp_path: Path) -> None:
    """The report's reader names FILE:LINE; the edited: dataset still takes any JSON objects
    (its Dataset.extra["manifest"] is what plugins read)."""
    out = tmp_path / "e"
    edit_demo(out)
    lines = raw_lines(out / MANIFEST)
    (out / MANIFEST).write_text("\n".join([*lines[:-1], '{"name": "scene_001__blue"}']) + "\n")
    with pytest.raises(SegtkError, match=rf"{out / MANIFEST}:{len(lines)}: a manifest line "
                                         "without source, value"):
        read_lines(out / MANIFEST, EditLine)
    assert load_dataset(f"edited:{out}").extra["manifest"][-1] == {"name": "scene_001__blue"}


# --- bench edits and bench augment --------------------------------------------------------------


def without_kind(path: Path) -> list[str]:
    """results.jsonl as a run made before its lines named their subset's kind."""
    old = [json.dumps({k: v for k, v in json.loads(line).items() if k != "kind"},
                      separators=(",", ":")) for line in raw_lines(path)]
    path.write_text("\n".join(old) + "\n")
    return old


def test_bench_edits_lines_read_back_and_a_run_from_before_kinds_resumes(tmp_path: Path) -> None:
    out = tmp_path / "bench"
    settings: dict[str, Any] = dict(models="demo", data="demo", attributes="color",
                                    values={"color": ["red"]}, limit=2, executor="inline")
    first = bench_edits(out=out, **settings)
    records = assert_round_trips(out / RESULTS, ScoreLine)
    assert {(r.subset, r.kind) for r in records} == {("original", ""), ("color", "appearance")}
    assert list(records[0].to_json()) == ["key", "model", "subset", "kind", "image", "confusion"]
    table = (out / TABLE_JSON).read_text()
    old = without_kind(out / RESULTS)
    again = bench_edits(out=out, resume=True, **settings)
    assert raw_lines(out / RESULTS) == old  # nothing scored again, nothing rewritten
    assert (out / TABLE_JSON).read_text() == table and again.details == first.details


def test_a_bench_augment_report_reads_lines_from_before_kinds(tmp_path: Path) -> None:
    run = tmp_path / "bench-augment"
    run.mkdir()
    trained = "demo:OUT/train/cutmix/checkpoints/epoch-0001/model/model.safetensors"
    lines = [ScoreLine(key=f"{model}|{subset}|{image}", model=model, subset=subset,
                       kind="appearance" if subset == "color" else "", image=image,
                       confusion=[[3, 1], [0, 2]] if model == trained else [[4, 0], [0, 2]])
             for model in ("demo", trained) for subset in ("original", "color")
             for image in ("a", "b")]
    (run / RESULTS).write_text("".join(as_written(r) + "\n" for r in lines))
    without_kind(run / RESULTS)
    meta = {"kind": "bench-augment", "config": {"model": "demo", "data": "demo"}}
    context = bench_augment_context(run, meta, None, [])
    assert [r["label"] for r in context["rows"]] == ["start", "cutmix"]
    assert context["subsets"] == ["original", "color"]
    assert context["rows"][0]["cells"] == [100.0, 100.0]
    assert context["rows"][1]["cells"][0] == pytest.approx(100 * (3 / 4 + 2 / 3) / 2)


# --- train --------------------------------------------------------------------------------------


def test_train_lines_and_checkpoints_read_back_and_an_old_run_resumes(random_demo: str,
                                                                      tmp_path: Path) -> None:
    """An epoch line and checkpoint.json read as records and write back as the same bytes; a
    run whose checkpoint.json predates its sha256 resumes (its epoch line kept as it is)."""
    out = tmp_path / "run"
    config = TrainConfig(random_demo, "demo", split=None, limit=4, epochs=1, batch_size=4,
                         crop=(64, 48), lr=3e-3)
    train(config, out)
    for line in assert_round_trips(out / RESULTS, EpochLine):  # the first writer's keys
        assert list(line.to_json()) == ["key", "epoch", "loss", "steps", "seconds", "spec"]
    done = checkpoint_dir(out, 1) / CHECKPOINT_DONE
    record = CheckpointRecord.from_json(json.loads(done.read_text()))
    assert json.dumps(record.to_json(), indent=2) + "\n" == done.read_text()
    assert list(record.to_json()) == ["epoch", "spec", "loss", "augment", "sha256"]
    assert record.sha256 and record.epoch == 1 and record.augment == "baseline"
    old = {k: v for k, v in record.to_json().items() if k != "sha256"}  # before hashes
    assert CheckpointRecord.from_json(old).to_json() == old
    done.write_text(json.dumps(old))
    first = raw_lines(out / RESULTS)
    results = train(replace(config, epochs=2), out, resume=True)
    assert [r.epoch for r in results] == [1, 2] and raw_lines(out / RESULTS)[:1] == first


def test_an_epoch_line_with_what_the_augmenter_drew_round_trips() -> None:
    line = ('{"key":"epoch-1","epoch":1,"loss":2.1,"steps":1,"seconds":0.16,"spec":"demo:./m",'
            '"augmenter":{"replaced":3,"skipped":0}}')
    record = EpochLine.from_json(json.loads(line))
    assert record.augmenter == {"replaced": 3, "skipped": 0} and as_written(record) == line
