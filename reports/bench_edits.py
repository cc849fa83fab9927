"""Report context of an edit benchmark (`segtk bench edits`): the paper-style table (mIoU per
subset per model, RmIoU and mR per group) from table.json, the bar chart (miou.png) and links to
each edited subset's own report (OUT/edits/SUBSET/report.html, written by write_report first)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from segtk.benchmarks.edits import ORIGINAL_OBJECT, ScoreLine, Shard, Subset, aggregate
from segtk.core import SegtkError
from segtk.core._specs import brief_spec
from segtk.reports.common import _href, _note
from segtk.storage.layout import (
    EDITS,
    MIOU_CHART,
    QUALITY_CSV,
    REPORT,
    RESULTS,
    RUN,
    TABLE_CSV,
    TABLE_JSON,
)
from segtk.storage.runs import read_results

GROUPS = ("appearance", "geometry")


def edit_subset_dirs(run: Path) -> list[Path]:
    """OUT/edits/ATTR folders that are `segtk edit` runs (they have a run.json)."""
    edits = run / EDITS
    if not edits.is_dir():
        return []
    return [p for p in sorted(edits.iterdir()) if p.is_dir() and (p / RUN).is_file()]


def read_table(run: Path, notes: list[dict[str, str]]) -> dict[str, Any]:
    """table.json as `segtk bench edits` wrote it, else recomputed from results.jsonl."""
    path = run / TABLE_JSON
    if path.is_file():
        try:
            table = json.loads(path.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise SegtkError(f"{path}: not valid JSON ({exc})",
                             hint="rerun segtk bench edits with --resume to rewrite it") from exc
        if isinstance(table, dict) and "miou" in table and "subsets" in table:
            return table
    records = list(ScoreLine.keyed(read_results(run / RESULTS, key="key"), run / RESULTS).values())
    if not records:
        raise SegtkError(f"{run}: no {TABLE_JSON} and no finished records in {RESULTS} yet",
                         hint="run the benchmark (or continue it with --resume) first")
    _note(notes, f"No {TABLE_JSON} (the benchmark did not finish): the table is recomputed from "
                 f"the {len(records)} records in {RESULTS}.", "warn")
    return table_from_records(records)


def table_from_records(records: list[ScoreLine]) -> dict[str, Any]:
    """benchmarks.edits.aggregate over every (model, subset) the records hold (the shards that
    made them, rebuilt from the records: each names its subset's kind)."""
    images: dict[tuple[str, str], list[str]] = {}
    kinds: dict[str, str] = {}  # each record names its subset's kind (its editor's mR group)
    for rec in records:
        images.setdefault((rec.model, rec.subset), []).append(rec.image)
        kinds[rec.subset] = rec.kind
    shards = [Shard(m, Subset(s, "", None, tuple(imgs),
                              kinds[s] == "geometry" or s == ORIGINAL_OBJECT, kind=kinds[s]),
                    tuple(imgs)) for (m, s), imgs in images.items()]
    return aggregate(records, shards)


def bench_edits_context(run: Path, meta: dict[str, Any], data_spec: str | None,
                        notes: list[dict[str, str]]) -> dict[str, Any]:
    config = meta.get("config") or {}
    table = read_table(run, notes)
    models, subsets = list(table.get("models") or []), list(table.get("subsets") or [])
    miou, counts = table.get("miou") or {}, table.get("images") or {}
    groups = {(g["model"], g["group"]): g for g in table.get("groups") or []}
    shown_groups = [g for g in GROUPS if any((m, g) in groups for m in models)]
    rows = []
    for m in models:
        scores = miou.get(m) or {}
        best = {g: groups.get((m, g)) for g in shown_groups}
        rows.append({"model": m, "cells": [scores.get(s) for s in subsets], "groups": best})
    group_rows = [dict(g, subsets=list(g.get("subsets") or [])) for g in table.get("groups") or []]

    subset_info = []
    edit_dirs = {p.name: p for p in edit_subset_dirs(run)}
    for s in subsets:
        folder = edit_dirs.get(s)
        summary: dict[str, Any] = {}
        if folder is not None:
            try:
                summary = json.loads((folder / RUN).read_text()).get("summary") or {}
            except (json.JSONDecodeError, UnicodeDecodeError, AttributeError):
                summary = {}
        skipped = summary.get("skipped")
        subset_info.append({
            "name": s,
            "role": _role(s, group_rows),
            "images": max((int((counts.get(m) or {}).get(s, 0)) for m in models), default=0),
            "edited": summary.get("edited"),
            "skipped": sum(skipped.values()) if isinstance(skipped, dict) else skipped,
            "report": (_href(f"{EDITS}/{s}/{REPORT}")
                       if folder is not None and (folder / REPORT).is_file() else None),
        })
    chart = _href(MIOU_CHART) if (run / MIOU_CHART).is_file() else None
    if chart is None:
        _note(notes, f"No {MIOU_CHART} in the run folder (matplotlib missing, or the benchmark "
                     f"did not finish): the bar chart is not shown.", "warn")
    files = [f for f in (TABLE_CSV, TABLE_JSON, MIOU_CHART, RESULTS, QUALITY_CSV)
             if (run / f).is_file()]
    quality = table.get("quality") or None
    attrs = config.get("attributes") or [s["name"] for s in subset_info if s["role"] != "reference"]
    return {
        "title": f"Edit benchmark: {', '.join(str(a) for a in attrs)} on "
                 f"{', '.join(brief_spec(m) for m in models)} / {brief_spec(config.get('data'))}",
        "models": models,
        "subsets": subsets,
        "rows": rows,
        "group_names": shown_groups,
        "group_rows": group_rows,
        "subset_info": subset_info,
        "chart": chart,
        "files": files,
        "backend": config.get("backend") or "?",
        "quality": quality,  # --quality: {columns, better, values {subset: {column: n}}, images}
    }


def _role(subset: str, groups: list[dict[str, Any]]) -> str:
    """The subset's mR group ("appearance", "geometry": its editor's kind), else "reference"."""
    for g in groups:
        if subset in g["subsets"]:
            return str(g["group"])
    return "reference"
