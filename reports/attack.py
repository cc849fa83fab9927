"""Report context of an attack run (`segtk attack`): summary recomputed from the confusions,
proxy-vs-queries curve, per-image rows (clean | adversarial | perturbation | predictions | label)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from segtk.core import Dataset, SegtkError, read_image
from segtk.core._metrics import iou_per_class
from segtk.core._specs import brief_spec
from segtk.imaging import amplify, overlay
from segtk.jobs.attack import AttackRecord, summarise
from segtk.reports.common import (
    _classes_and_palette,
    _derived,
    _href,
    _legend,
    _load_dataset,
    _note,
    _picture,
    _spread,
)
from segtk.reports.svg import SERIES_COLOURS, Series, line_chart
from segtk.storage import layout
from segtk.storage.runs import read_results


def attack_context(run: Path, meta: dict[str, Any], data_spec: str | None,
                    notes: list[dict[str, str]]) -> dict[str, Any]:

    path = run / layout.RESULTS
    records = list(AttackRecord.keyed(read_results(path), path).values())
    if not records:
        raise SegtkError(f"{run}: no finished images in {layout.RESULTS} yet",
                         hint="run the attack (or continue it with --resume) first")
    config = meta.get("config") or {}
    params = config.get("params") or {}
    k = len(records[0].clean_confusion)
    summary = summarise(records, k)
    table = summary.table
    reference_notes(params.get("reference"), [r.scored_against for r in records], notes)
    spec = data_spec or config.get("data")
    dataset, why = _load_dataset(spec, config.get("split"), run, notes)
    if dataset is not None and len(dataset.classes) != k:
        why = f"it has {len(dataset.classes)} classes but the run's confusions have {k}"
        dataset = None
    if dataset is None:
        _note(notes, f"The dataset {spec or ''} could not be loaded ({why}), so clean images, "
                     f"perturbations and labels are not shown and classes are numbered; "
                     f"pass --data SPEC to segtk report to point at it.", "warn")
    classes, palette = _classes_and_palette(dataset, k)
    ignore = dataset.ignore_index if dataset is not None else 255
    items = _items(dataset, [r.image for r in records], notes)

    saved = (run / layout.IMAGES).is_dir() and any((run / layout.IMAGES).iterdir())
    if not saved:
        _note(notes, "This run stored no adversarial images (it was made with --no-save-images), "
                     "so the per-image rows show numbers and, where the dataset loads, the clean "
                     "image and label only.", "warn")
    rows = []
    for rec in records:
        rows.append(_attack_row(run, rec, items.get(rec.image), palette, ignore))
    rows.sort(key=lambda r: -r["drop"])
    missing = sum(1 for r in rows if saved and r["pictures"]["adv"] is None)
    if missing:
        _note(notes, f"{missing} of {len(rows)} adversarial images are missing from "
                     f"{layout.IMAGES}/.", "warn")

    curve = _spread([rec.history for rec in records])
    chart = ""
    if curve:
        name = str(config.get("attack") or "attack")
        chart = line_chart(
            [Series(f"{name} (mean)", curve["mean"], SERIES_COLOURS[0],
                    bands=((curve["min"], curve["max"]), (curve["q25"], curve["q75"])), width=2.2)],
            xlabel="queries", ylabel="best proxy so far (%)", width=600, height=330)
    eps = params.get("eps")
    return {
        "title": f"{config.get('attack', 'attack')} attack on {brief_spec(config.get('model'))} / "
                 f"{brief_spec(config.get('data'))}",
        "summary": {
            "images": table["images"],
            "rows": [
                ("dataset mIoU %", 100 * table["clean_miou"], 100 * table["adv_miou"]),
                ("mean per-image mIoU %", 100 * table["clean_image_miou"], 100 * table["adv_image_miou"]),
                ("pixel accuracy %", 100 * table["clean_pacc"], 100 * table["adv_pacc"]),
            ],
            "clean_miou": 100 * table["clean_miou"],
            "adv_miou": 100 * table["adv_miou"],
            "clean_pacc": 100 * table["clean_pacc"],
            "adv_pacc": 100 * table["adv_pacc"],
            "mean_queries": table["mean_queries"],
            "budget": params.get("budget"),
            "max_linf": table["max_linf"],
            "eps": eps,
        },
        "chart": chart,
        "curve_final": curve["mean"][-1] if curve else None,
        "curve_start": curve["mean"][0] if curve else None,
        "rows": rows,
        "legend": _legend(classes, palette, iou_per_class(summary.clean.total).tolist(),
                          iou_per_class(summary.adv.total).tolist()),
        "has_dataset": dataset is not None,
    }


def _items(dataset: Dataset | None, names: list[str], notes: list[dict[str, str]]) -> dict[str, Any]:
    if dataset is None:
        return {}
    sub = dataset.subset(names=names)
    items = {}
    for i in range(len(sub)):
        try:
            item = sub[i]
        except SegtkError as exc:
            _note(notes, f"Could not read {sub.names[i]} from the dataset: {exc.message}", "warn")
            continue
        items[item.name] = item
    if len(items) < len(names):
        absent = len(names) - len(items)
        _note(notes, f"{absent} of {len(names)} images of the run were not found in the dataset.",
              "warn")
    return items


def _attack_row(run: Path, rec: AttackRecord, item, palette: np.ndarray, ignore: int) -> dict[str, Any]:
    name = rec.image
    adv_file = run / layout.IMAGES / f"{name}.png"
    adv = read_image(adv_file) if adv_file.is_file() else None
    pics: dict[str, dict[str, Any] | None] = dict.fromkeys(
        ("clean", "adv", "perturbation", "clean_pred", "adv_pred", "label"))
    shape = adv.shape if adv is not None else (item.image.shape if item is not None else None)
    if adv is not None:
        pics["adv"] = _picture(_href(f"{layout.IMAGES}/{name}.png"), shape)
    for key, suffix in (("clean_pred", "clean"), ("adv_pred", "adv")):
        if (run / layout.OVERLAYS / f"{name}_{suffix}.png").is_file():
            pics[key] = _picture(_href(f"{layout.OVERLAYS}/{name}_{suffix}.png"), shape)
    if item is not None:
        pics["clean"] = _picture(_derived(run, "clean", name, item.image), item.image.shape)
        pics["label"] = _picture(
            _derived(run, "label", name, overlay(item.image, item.label, palette, ignore_index=ignore)),
            item.image.shape)
        if adv is not None and adv.shape == item.image.shape:
            pics["perturbation"] = _picture(
                _derived(run, "perturbation", name, amplify(item.image, adv)), adv.shape,
                f"±{rec.linf} stretched to full range")
    clean, adv_miou = 100 * rec.clean_miou, 100 * rec.adv_miou
    return {
        "image": name,
        "clean_miou": clean,
        "adv_miou": adv_miou,
        "drop": clean - adv_miou,
        "clean_pacc": 100 * rec.clean_pacc,
        "adv_pacc": 100 * rec.adv_pacc,
        "queries": rec.queries,
        "linf": rec.linf,
        "pictures": pics,
    }


def reference_notes(reference: str | None, scored: list[str], notes: list[dict[str, str]]) -> None:
    """Say what a label-free run scored: its queries, and the images without labels."""
    if reference == "prediction":
        _note(notes, "Label-free attack (--reference prediction): its queries were scored "
                     "against the model's clean prediction, not the ground truth.")
    unlabelled = scored.count("prediction")
    if unlabelled:
        _note(notes, f"{unlabelled} of {len(scored)} images have no labels: their mIoU is against "
                     "their clean prediction (100% clean, the agreement kept under attack).")
