"""Report context of an augmentation benchmark (`segtk bench augment`, Gen4Seg Tab. IV): one row
per augmentation (the untrained start model first), mIoU on Original and each edited subset and
mR per group, a bar chart of the same numbers, and links to each augmentation's training report
(OUT/train/LABEL) and each edited subset's report (OUT/edits/ATTR), written first.

The table is built from the run's records (results.jsonl), not from table.json or run.json's
options, which name only the last invocation's augmentations: after any number of `--resume`s
that add augmentations, the page has a row for every model the run scored.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from segtk.benchmarks.augment import ALL_ORIGINAL, START, tabulate
from segtk.benchmarks.edits import ScoreLine
from segtk.core._specs import brief_spec
from segtk.reports.bench_edits import edit_subset_dirs, table_from_records
from segtk.reports.common import _href, _note, finished_records
from segtk.reports.svg import SERIES_COLOURS, Series, bar_chart
from segtk.storage.layout import (
    CHECKPOINTS,
    MIOU_CHART,
    REPORT,
    RESULTS,
    RUN,
    TABLE_CSV,
    TABLE_JSON,
    TRAIN,
)

# A trained model's spec names its checkpoint: .../train/LABEL/checkpoints/epoch-NNNN/...
_TRAINED = re.compile(r"(?:^|[/\\:=])" + TRAIN + r"[/\\]([^/\\]+)[/\\]" + CHECKPOINTS
                      + r"[/\\]epoch-(\d+)")


def train_dirs(run: Path) -> list[Path]:
    """OUT/train/LABEL folders that are `segtk train` runs (they have a run.json)."""
    folder = run / TRAIN
    if not folder.is_dir():
        return []
    return [p for p in sorted(folder.iterdir()) if p.is_dir() and (p / RUN).is_file()]


def row_label(model: str, start: str | None) -> str:
    """The row a scored model belongs to: START for the start model, the LABEL of the
    train/LABEL folder a trained model's checkpoint is in, else the model's brief spec."""
    if model == start:
        return START
    found = _TRAINED.search(model)
    return found.group(1) if found else brief_spec(model)


def bench_augment_context(run: Path, meta: dict[str, Any], data_spec: str | None,
                          notes: list[dict[str, str]]) -> dict[str, Any]:
    records = [ScoreLine.from_json(line, where=f"{run / RESULTS}, {line['key']}")
               for line in finished_records(run)]
    config = meta.get("config") or {}
    specs: dict[str, str] = {}  # row label -> the model it scored (the last one recorded)
    for model in dict.fromkeys(rec.model for rec in records):
        specs[row_label(model, config.get("model"))] = model
    subsets = list(dict.fromkeys(rec.subset for rec in records
                                 if rec.subset != ALL_ORIGINAL))  # Tab. IV's columns only
    result = tabulate(table_from_records(records), specs, subsets)
    trained = {p.name: p for p in train_dirs(run)}
    unscored = sorted(set(trained) - set(specs))
    if unscored:
        _note(notes, f"Trained but not scored yet: {', '.join(unscored)} (continue the benchmark "
                     "with --resume).", "warn")
    rows = [_row(row, subsets, result["groups"], trained.get(row["augmentation"]))
            for row in result["rows"]]
    series = [Series(r["label"], [r["miou"].get(s, float("nan")) for s in subsets],
                     SERIES_COLOURS[i % len(SERIES_COLOURS)]) for i, r in enumerate(rows)]
    files = [f for f in (TABLE_CSV, TABLE_JSON, MIOU_CHART, RESULTS) if (run / f).is_file()]
    return {
        "title": f"Augmentation benchmark: {', '.join(r['label'] for r in rows if r['label'] != START)} "
                 f"from {brief_spec(config.get('model'))} / {brief_spec(config.get('data'))}",
        "rows": rows,
        "augmentations": sum(r["label"] != START for r in rows),
        "subsets": subsets,
        "group_names": result["groups"],
        "images": result["images"],
        "chart": bar_chart(subsets, series, ylabel="mIoU %", width=720, height=320),
        "edits": [{"name": p.name, "report": _link(run, p)} for p in edit_subset_dirs(run)],
        "files": files,
    }


def _row(row: dict[str, Any], subsets: list[str], groups: list[str],
         folder: Path | None) -> dict[str, Any]:
    """A table row: the augmentation's spec and epochs (from its training run), its scores,
    and a link to its training report."""
    config: dict[str, Any] = {}
    if folder is not None:
        try:
            config = json.loads((folder / RUN).read_text()).get("config") or {}
        except (OSError, ValueError, AttributeError):
            config = {}
    return {
        "label": row["augmentation"],
        "augment": config.get("augment") or ("none (untrained)" if row["augmentation"] == START else "?"),
        "epochs": config.get("epochs"),
        "miou": row["miou"],
        "cells": [row["miou"].get(s) for s in subsets],
        "groups": [{"name": g, "mr": row.get(f"mr_{g}"), "rmiou": row.get(f"rmiou_{g}")} for g in groups],
        "report": _link(folder.parent.parent, folder) if folder is not None else None,
    }


def _link(run: Path, sub: Path) -> str | None:
    """The link to a sub-run's report, if it was written."""
    page = sub / REPORT
    return _href(page.relative_to(run).as_posix()) if page.is_file() else None
