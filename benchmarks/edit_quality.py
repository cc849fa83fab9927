"""Editing quality of the subsets `segtk bench edits` builds (`--quality NAME[,NAME]`): the
columns of Gen4Seg's Tables I and VII–IX (CLIP accuracy, masked LPIPS, DINO distance, a
Fréchet distance), each a metric plugin, measured on every edited subset (Recon included) from
what the edit job saved: the source image (OUT/edits/SUBSET/source/images), the edit, its mask,
the caption P (`prompt_source`) and the edit prompt P* (`prompt`) of the manifest.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from segtk.benchmarks.edits import Subset
from segtk.core import (
    Metric,
    QualityPair,
    SegtkError,
    atomic_write_bytes,
    build,
    read_image,
    read_label,
)
from segtk.jobs.edit import parse_filter_params
from segtk.jobs.edit_records import EditLine
from segtk.storage.layout import IMAGES, MANIFEST, MASKS, SOURCE
from segtk.storage.runs import read_results

EDITED = "edited:"


def build_metrics(names: Sequence[str], items: Iterable[str] = ()) -> list[Metric]:
    """The metric plugins `names` (`--quality`), each built with its `--metric-param
    NAME.KEY=VALUE` items (an unknown metric, key or value is refused before anything runs)."""
    names = list(dict.fromkeys(names))
    options = parse_filter_params(names, list(items), kind="metric", option="--quality",
                                  param_option="--metric-param",
                                  example="fd.model=DIR")
    metrics: list[Metric] = [build("metric", n, options[n]) for n in names]
    return metrics


def quality_pairs(folder: Path, names: Sequence[str]) -> list[QualityPair]:
    """The edits `names` of the edited subset in `folder`, as metric pairs (manifest order)."""
    records = EditLine.keyed(read_results(folder / MANIFEST, key="name"), folder / MANIFEST)
    pairs = []
    for name in names:
        rec = records.get(name)
        if rec is None:
            raise SegtkError(f"{folder / MANIFEST} has no edit {name!r}",
                             hint="rerun bench edits with --resume to rebuild the subset")
        source = folder / SOURCE / IMAGES / f"{rec.source}.png"
        if not source.is_file():
            raise SegtkError(f"{source} is missing: the editing quality needs the source images",
                             hint="the edit job saves them (save_sources); rebuild the subset")
        mask = read_label(folder / MASKS / f"{name}.png") > 0
        pairs.append(QualityPair(read_image(source), read_image(folder / IMAGES / f"{name}.png"),
                                 mask, str(rec.prompt_source or ""), str(rec.prompt or "")))
    return pairs


def measure_quality(subsets: Sequence[Subset], metrics: Sequence[Metric],
                    warn: Callable[[str], None] = lambda message: None) -> dict[str, Any]:
    """{"columns", "better" {column: lower|higher}, "values" {subset: {column: number}},
    "per_image" {subset: {column: {edit: number}}}, "images" {subset: n}} over the edited
    subsets. A set metric (a Fréchet distance) of a subset with fewer than 2 edits is NaN."""
    columns = [m.column() for m in metrics]
    if len(set(columns)) != len(columns):
        raise SegtkError(f"--quality: two metrics share a column ({', '.join(columns)})",
                         hint="name each metric once")
    out: dict[str, Any] = {"columns": columns,
                           "better": {m.column(): m.better for m in metrics},
                           "values": {}, "per_image": {}, "images": {}}
    for sub in subsets:
        if not sub.data.startswith(EDITED) or not sub.images:
            continue
        pairs = quality_pairs(Path(sub.data.removeprefix(EDITED)), sub.images)
        values, per_image = {}, {}
        for metric, column in zip(metrics, columns, strict=True):
            if not metric.per_image and len(pairs) < 2:
                warn(f"{column} of {sub.name}: a set statistic needs at least 2 edits, "
                     f"{sub.name} has {len(pairs)}")
                values[column] = math.nan
                continue
            result = metric.measure(pairs)
            values[column] = result.value
            if result.per_image is not None:
                per_image[column] = dict(zip(sub.images, result.per_image, strict=True))
        out["values"][sub.name] = values
        out["per_image"][sub.name] = per_image
        out["images"][sub.name] = len(pairs)
    return out


def write_quality(quality: dict[str, Any], path: Path) -> Path:
    """quality.csv: one row per subset, one column per metric (and the subset's edits)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["subset", "images", *quality["columns"]])
    for subset, values in quality["values"].items():
        w.writerow([subset, quality["images"][subset],
                    *(f"{values[c]:.6g}" for c in quality["columns"])])
    atomic_write_bytes(path, buf.getvalue().encode())
    return path
