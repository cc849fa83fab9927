"""The lines an edit run writes (jobs/edit.py): one `EditLine` per edited sample in
manifest.jsonl, one `SkipLine` per skipped edit in skipped.jsonl.

Kept apart from the job so that the reports and the Python API read the lines without
importing the job. The job writes every key of an `EditLine` (plus `prompt_writer`, `captioner`
and `filters` when used); readers need only `name`, `source` and `value` (an `edited:` folder's
manifest may come from another tool, and reports always showed such folders), so the other keys
read as their defaults when absent.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from segtk.datasets.readers import json_lines
from segtk.storage.records import Record

__all__ = ["EditLine", "SkipLine", "read_lines"]


@dataclass(kw_only=True)
class _Planned(Record):
    """What both lines start with: the planned edit (sample NAME = SOURCE__VALUE[__VARIANT])."""

    name: str
    source: str
    value: str
    variant: int = 0


@dataclass(kw_only=True)
class EditLine(_Planned):
    """A manifest.jsonl line: an edited sample, written after its PNGs."""

    KIND = "manifest line"
    KEYS = {"class_name": "class"}
    # written only when used: runs without them keep their lines
    OMIT_DEFAULT = ("prompt_writer", "captioner", "filters")

    source_image: str = ""  # the source image's file (its name where the dataset has none)
    attribute: str = ""
    editor: str = ""
    kind: str = ""  # the editor's kind: appearance, geometry
    level: str = ""  # object or image
    class_name: str = ""  # the edited object's class ("" for image-level edits)
    object_area: float | None = None  # the object's share of the image
    prompt_source: str = ""  # the caption P of the source
    prompt: str = ""  # the edit prompt P*
    backend: str = ""
    parameters: dict[str, Any] = field(default_factory=dict)  # the editor's metadata
    seed: int | None = None  # the sample's own random stream
    run_seed: int | None = None
    prompt_writer: str | None = None  # with --prompt-model: who wrote `prompt`
    captioner: str | None = None  # with --captioner: who wrote `prompt_source`
    filters: dict[str, dict[str, float]] | None = None  # with --filter: scores by filter


@dataclass(kw_only=True)
class SkipLine(_Planned):
    """A skipped.jsonl line: a planned edit that was not made, and why (editkit.SKIP_REASONS,
    or filtered:NAME with the filters' scores)."""

    KIND = "skipped edit"
    OMIT_DEFAULT = ("filters",)

    reason: str
    detail: str = ""
    filters: dict[str, dict[str, float]] | None = None


R = TypeVar("R", bound=Record)


def read_lines(file: Path, record: type[R]) -> list[R]:
    """manifest.jsonl or skipped.jsonl as its records, in file order (a line that is not one
    is an error naming FILE:LINE). `EditRun` reads them by name for resume instead."""
    return [record.from_json(line, where=f"{file}:{number}") for number, line in json_lines(file)]
