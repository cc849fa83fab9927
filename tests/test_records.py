"""The typed run-record base: lines round-trip, old lines read, unknown keys survive."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from segtk.core import SegtkError
from segtk.storage.records import Record


@dataclass(kw_only=True)
class Example(Record):
    KIND = "example result"
    OMIT_DEFAULT = ("stopped",)

    image: str
    score: float
    history: list[float] = field(default_factory=list)
    stopped: str | None = None


def test_a_record_round_trips_in_field_order_and_leaves_out_defaults_it_may_omit() -> None:
    rec = Example(image="a", score=0.5, history=[1.0, 0.5])
    assert list(rec.to_json()) == ["image", "score", "history"]
    assert Example.from_json(rec.to_json()) == rec
    timed = Example(image="a", score=0.5, stopped="time")
    assert timed.to_json()["stopped"] == "time"
    assert Example.from_json(timed.to_json()).stopped == "time"


def test_a_line_written_before_a_field_existed_reads_with_its_default() -> None:
    rec = Example.from_json({"image": "a", "score": 1.0})
    assert rec.history == [] and rec.stopped is None


def test_keys_the_reader_does_not_know_are_kept_and_written_back() -> None:
    line = {"image": "a", "score": 1.0, "visibility": {"psnr": 30.0}}
    rec = Example.from_json(line)
    assert rec.extra == {"visibility": {"psnr": 30.0}}
    assert rec.to_json() == {**line, "history": []}


def test_a_line_without_a_required_key_names_the_record_and_the_key() -> None:
    with pytest.raises(SegtkError, match=r"OUT/results.jsonl, image a: a example result without score"):
        Example.from_json({"image": "a"}, where="OUT/results.jsonl, image a")


def test_a_line_that_is_no_object_is_refused() -> None:
    with pytest.raises(SegtkError, match="not a JSON object"):
        Example.from_json([1, 2], where="OUT/results.jsonl line 3")  # type: ignore[arg-type]


def test_a_record_reads_as_the_json_object_of_its_line() -> None:
    timed = Example.from_json({"image": "a", "score": 0.5, "stopped": "time", "psnr": 30.0})
    assert timed["score"] == 0.5 and timed["psnr"] == 30.0 and timed.get("stopped") == "time"
    assert dict(timed) == timed.to_json() and len(timed) == 5
    assert all(timed[key] == value for key, value in timed.to_json().items())
    with pytest.raises(KeyError):
        timed["nothing"]
    untimed = Example(image="a", score=0.5)
    assert "stopped" not in untimed and untimed.get("stopped") is None  # left out, as in the line
    with pytest.raises(KeyError):
        untimed["stopped"]


@dataclass(kw_only=True)
class Keyed(Record):
    KIND = "keyed result"
    KEYS = {"class_name": "class"}

    name: str
    class_name: str | None = None


def test_a_field_may_be_written_under_another_key() -> None:
    rec = Keyed(name="a", class_name="car")
    assert rec.to_json() == {"name": "a", "class": "car"}
    assert Keyed.from_json({"name": "a", "class": "car"}) == rec
    assert Keyed.from_json({"name": "a", "class": "car"}).extra == {}
    assert rec["class"] == "car" and "class_name" not in rec  # looked up by the line's key
    with pytest.raises(KeyError):
        rec["class_name"]
    with pytest.raises(SegtkError, match="a keyed result without name"):
        Keyed.from_json({"class": "car"})


def test_keyed_lines_read_as_records_and_a_bad_one_names_its_file_and_key() -> None:
    lines = {"a": {"image": "a", "score": 1.0}, "b": {"image": "b", "score": 0.5}}
    assert Example.keyed(lines, "OUT/results.jsonl") == {"a": Example(image="a", score=1.0),
                                                         "b": Example(image="b", score=0.5)}
    with pytest.raises(SegtkError, match=r"^OUT/results.jsonl, b: a example result without score"):
        Example.keyed({**lines, "b": {"image": "b"}}, "OUT/results.jsonl")
