"""Report context of an edit run (`segtk edit`): the contact sheet, a per-attribute table and
the edited images."""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from segtk.core import Dataset, SegtkError, read_image, read_label
from segtk.core._specs import brief_spec
from segtk.datasets.readers import IMAGE_SUFFIXES, read_classes
from segtk.editkit import SKIP_REASONS
from segtk.imaging import overlay
from segtk.jobs.edit_records import EditLine, SkipLine, read_lines
from segtk.reports.common import (
    _classes_and_palette,
    _derived,
    _href,
    _legend,
    _load_dataset,
    _note,
    _picture,
)
from segtk.storage.layout import (
    CLASSES,
    IMAGES,
    LABELS,
    MANIFEST,
    MASKS,
    SKIPPED,
    SOURCE,
)

# Keys of a manifest line that are no score even when they hold a number (the EditLine
# fields are none: a score is a number under another key, e.g. a metric's clip_score).
NOT_SCORES = {"image", "index", "mask", "label", "class_name", "object", "reason", "detail"}


def edit_context(run: Path, meta: dict[str, Any], data_spec: str | None,
                  notes: list[dict[str, str]]) -> dict[str, Any]:

    config = meta.get("config") or {}
    manifest = read_lines(run / MANIFEST, EditLine) if (run / MANIFEST).is_file() else []
    skipped = read_lines(run / SKIPPED, SkipLine) if (run / SKIPPED).is_file() else []
    images = _image_files(run / IMAGES)
    edits: list[tuple[str, EditLine | None]] = [(rec.name, rec) for rec in manifest]
    if not manifest:
        if not images and not skipped:
            raise SegtkError(f"{run}: no {MANIFEST} and no edited images yet",
                             hint="run segtk edit (or let it finish) first")
        if images:
            _note(notes, f"No {MANIFEST}: attributes and values are unknown.", "warn")
        edits = [(n, None) for n in images]
    classes = read_classes(run) if (run / CLASSES).is_file() else []
    source = data_spec or config.get("data")
    dataset, _ = _load_dataset(source, config.get("split"), run, notes) if source else (None, "")
    if not classes and dataset is not None:
        classes = list(dataset.classes)
    if not classes:
        _note(notes, "No classes.txt: labels are shown with the default colours.", "warn")
    _, palette = _classes_and_palette(dataset, len(classes) or 256)

    originals = _originals(run, manifest, dataset)
    rows = [_edit_row(run, name, rec, images.get(name), palette, originals) for name, rec in edits]
    missing = sum(1 for r in rows if r["pictures"]["image"] is None)
    if missing:
        _note(notes, f"{missing} of {len(rows)} manifest entries have no image in images/.", "warn")
    attribute = str(config.get("plugin") or (rows[0]["attribute"] if rows else "") or "edit")
    summary = meta.get("summary") or {}
    plugin = config.get("plugin")
    return {
        "title": (f"{plugin} edits of {brief_spec(source)}" if plugin
                  else f"Edited images from {brief_spec(source) if source else run.name}"),
        "sheets": [_picture(_href(p.name), None) for p in _contact_sheets(run)],
        "values_table": _values_table(rows, skipped, attribute),
        "skips": _skip_table(skipped),
        "score_columns": sorted({k for r in rows for k in r["scores"]}),
        "rows": rows,
        "edited": len(rows),
        "planned": summary.get("planned") or len(rows) + len(skipped),
        "skipped": len(skipped),
        "sources": len({r["source"] for r in rows if r["source"]}),
        "legend": _legend(classes, palette) if classes else [],
        "source": source,
    }


def _image_files(folder: Path) -> dict[str, Path]:
    if not folder.is_dir():
        return {}
    return {p.stem: p for p in sorted(folder.iterdir())
            if p.suffix.lower() in IMAGE_SUFFIXES and not p.name.startswith(".")}


def _contact_sheets(run: Path) -> list[Path]:
    """Top-level pictures of an edit run, contact sheets first."""
    pics = [p for p in sorted(run.iterdir())
            if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES and not p.name.startswith(".")]
    return sorted(pics, key=lambda p: ("contact" not in p.name.lower() and "sheet" not in p.name.lower()))


def _originals(run: Path, manifest: list[EditLine], dataset: Dataset | None) -> dict[str, str]:
    """Source name -> link to the unedited image: DIR/source/images/ (segtk edit keeps them
    there), else a copy from the dataset in report_files/original/."""
    sources = list(dict.fromkeys(str(r.source) for r in manifest if r.source))
    kept = _image_files(run / SOURCE / IMAGES)
    links = {s: _href(f"{SOURCE}/{IMAGES}/{kept[s].name}") for s in sources if s in kept}
    wanted = [s for s in sources if s not in links]
    if wanted and dataset is not None:
        sub = dataset.subset(names=wanted)
        for i in range(len(sub)):
            try:
                item = sub[i]
            except SegtkError:
                continue
            links[item.name] = _derived(run, "original", item.name, item.image)
    return links


def _edit_row(run: Path, name: str, rec: EditLine | None, image_file: Path | None,
              palette: np.ndarray, originals: dict[str, str]) -> dict[str, Any]:
    """A table row: the edit's pictures, its manifest line's fields (blank without one) and
    scores (the numbers its line holds under other keys)."""
    if rec is None:  # no manifest: only the pictures are known
        rec = EditLine(name=name, source="", value="–")
    source = str(rec.source or "")
    pics: dict[str, dict[str, Any] | None] = dict.fromkeys(("original", "image", "label", "mask"))
    coverage = None
    if image_file is not None:
        image = read_image(image_file)
        pics["image"] = _picture(_href(f"{IMAGES}/{image_file.name}"), image.shape)
        label_file = run / LABELS / f"{name}.png"
        if label_file.is_file():
            label = read_label(label_file)
            if label.shape == image.shape[:2]:
                pics["label"] = _picture(_derived(run, "label", name, overlay(image, label, palette)),
                                         image.shape)
        mask_file = run / MASKS / f"{name}.png"
        if mask_file.is_file():
            mask = np.asarray(read_label(mask_file)) > 0
            if mask.shape == image.shape[:2]:
                coverage = 100 * float(mask.mean())
                shown = np.where(mask[..., None], image, (image * 0.25 + 40).astype(np.uint8))
                pics["mask"] = _picture(_derived(run, "mask", name, shown), image.shape)
        if source in originals:
            pics["original"] = _picture(originals[source], image.shape)
    scores = {k: float(v) for k, v in rec.extra.items()
              if k not in NOT_SCORES and isinstance(v, float) and math.isfinite(v)}
    area = rec.object_area
    return {
        "name": name,
        "attribute": str(rec.attribute or "–"),
        "value": "–" if rec.value is None else str(rec.value),
        "editor": str(rec.editor or ""),
        "source": source,
        "prompt": str(rec.prompt or ""),
        "object": str(rec.class_name or ""),
        "object_area": 100 * float(area) if isinstance(area, int | float) else None,
        "coverage": coverage,
        "scores": scores,
        "pictures": pics,
    }


def _mean(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.fmean(present) if present else None


def _values_table(rows: list[dict[str, Any]], skipped: list[SkipLine],
                  attribute: str) -> list[dict[str, Any]]:
    """One row per attribute and value (plus an 'all values' row where there are several)."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        groups[(r["attribute"], r["value"])].append(r)
    skips: dict[tuple[str, str], int] = defaultdict(int)
    for rec in skipped:
        key = (attribute, str(rec.value))
        skips[key] += 1
        groups.setdefault(key, [])

    def line(attr: str, value: str, group: list[dict[str, Any]], skip: int, total: bool) -> dict:
        names = {k for r in group for k in r["scores"]}
        return {
            "attribute": attr, "value": value, "total": total, "edits": len(group),
            "skipped": skip, "sources": len({r["source"] for r in group if r["source"]}),
            "coverage": _mean(r["coverage"] for r in group),
            "object_area": _mean(r["object_area"] for r in group),
            "objects": list(dict.fromkeys(r["object"] for r in group if r["object"])),
            "scores": {k: _mean(r["scores"].get(k) for r in group) for k in names},
        }

    out: list[dict[str, Any]] = []
    for attr in dict.fromkeys(a for a, _ in groups):
        keys = [k for k in groups if k[0] == attr]
        out.extend(line(attr, v, groups[(attr, v)], skips[(attr, v)], False) for _, v in keys)
        if len(keys) > 1:
            out.append(line(attr, "all values", [r for k in keys for r in groups[k]],
                            sum(skips[k] for k in keys), True))
    return out


def _skip_table(skipped: list[SkipLine]) -> list[dict[str, Any]]:
    by_reason: dict[str, list[SkipLine]] = defaultdict(list)
    for rec in skipped:
        by_reason[str(rec.reason or "unknown")].append(rec)
    return [{"reason": reason, "count": len(recs),
             "sources": len({r.source for r in recs}),
             "meaning": SKIP_REASONS.get(reason, ""),
             "example": str(recs[0].detail or "")}
            for reason, recs in sorted(by_reason.items(), key=lambda kv: -len(kv[1]))]
