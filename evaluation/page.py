"""card.html: one page per card, in the look of segtk's reports (reports/templates/base).

Built from card.json and the sub-runs' stored images only (plus the model's predictions on
the few images it shows), with no time stamp or command line of the invocation in it, so a
resumed run writes the same page. Pictures go to OUT/card_files/.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
from jinja2 import Environment, FileSystemLoader, StrictUndefined

from segtk.benchmarks.attacks import sheet_path
from segtk.core import Dataset, atomic_write_bytes, read_image, to_tensor, write_png
from segtk.core._specs import brief_spec, cached_segmenter
from segtk.imaging import amplify, overlay
from segtk.jobs.attack import evaluate as predict_labels
from segtk.reports.common import TEMPLATES, _classes_and_palette, _href, _legend, _num, _picture
from segtk.reports.svg import SERIES_COLOURS, Series, bar_chart
from segtk.storage import layout

CARD_HTML = "card.html"
FILES = "card_files"
WORST_IMAGES = 4


@lru_cache(maxsize=1)
def _environment() -> Environment:
    here = Path(__file__).resolve().parent / "templates"
    env = Environment(loader=FileSystemLoader([str(here), str(TEMPLATES)]), autoescape=True,
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters["num"] = _num
    return env


def page_context(card: Mapping[str, Any]) -> dict[str, Any]:
    """What base.html.j2 needs, from the card alone (no time, no command of this process)."""
    proto = card["protocol"]
    command = (f"segtk evaluate --model {card['model']['spec']} --data {card['data']['spec']} "
               f"--profile {proto['profile']['name'].split('+')[0]}")
    config = [("protocol", f"{proto['name']} {proto['version']}"),
              ("profile", proto["profile"]["name"]),
              ("model sha256", card["model"]["sha256"]), ("data sha256", card["data"]["sha256"]),
              ("images", str(card["data"]["images"])), ("device", card["device"]),
              ("scored against", card["data"]["scored_against"])]
    return {"kind": "robustness", "run_name": "card", "run_dir": "",
            "generated": f"{proto['name']} {proto['version']} · {proto['profile']['name']}",
            "command": command, "command_full": command,
            "versions": sorted(card["versions"].items()), "plugin_versions": [],
            "config": config, "notes": []}


def write_card_page(card: Mapping[str, Any], out: Path, dataset: Dataset) -> Path:
    """OUT/card.html and the pictures it shows in OUT/card_files/."""
    shutil.rmtree(out / FILES, ignore_errors=True)
    ctx = page_context(card)
    k = len(card["data"]["classes"])
    classes, palette = _classes_and_palette(dataset, k)
    if card["label_free"]:
        ctx["notes"].append({"level": "warn", "text": "Label-free: the data have no labels, so "
                             "every score on this page is against the model's clean prediction "
                             "(clean mIoU is 100 by definition); no white-box floor, no edits."})
    last = max(card["black_box"], key=lambda r: (r["eps"], r["budget"]))
    ctx.update({
        "title": f"Robustness card · {brief_spec(card['model']['spec'])} on "
                 f"{brief_spec(card['data']['spec'])}",
        "card": card, "last": last,
        "chart": _budget_chart(card),
        "curves": f"black-box/{layout.CURVES_PNG}" if (out / "black-box" / layout.CURVES_PNG).exists()
        else None,
        "classes": _legend(classes, palette,
                           [_frac(v) for v in card["clean"]["class_iou"]],
                           [_frac(v) for v in last["class_iou"]]),
        "worst": _worst_images(card, last, out, dataset, palette),
        "edit_pictures": _edit_pictures(card, out),
    })
    html = _environment().get_template("card.html.j2").render(**ctx)
    atomic_write_bytes(out / CARD_HTML, html.encode())
    return out / CARD_HTML


def _frac(v: float | None) -> float:
    return float("nan") if v is None else v / 100


def _budget_chart(card: Mapping[str, Any]) -> str:
    """Dataset mIoU per budget: each member, and the ensemble's worst case (one chart per ε
    folded into the categories)."""
    rows = card["black_box"]
    cats = [f"{r['budget']} q" + (f", ε={r['eps']:g}" if len(card["protocol"]["profile"]["eps"]) > 1
                                 else "") for r in rows]
    members = list(rows[0]["members"])
    series = [Series(a, [_nan(r["members"][a]["miou"]) for r in rows],
                     SERIES_COLOURS[(i + 1) % len(SERIES_COLOURS)]) for i, a in enumerate(members)]
    series.append(Series("worst case", [_nan(r["miou"]) for r in rows], "#17212f"))
    return bar_chart(cats, series, ylabel="dataset mIoU %")


def _nan(v: float | None) -> float:
    return float("nan") if v is None else v


def _worst_images(card: Mapping[str, Any], last: Mapping[str, Any], out: Path, dataset: Dataset,
                  palette: np.ndarray) -> list[dict[str, Any]]:
    """The images the ensemble hurt most at the largest ε and budget: clean and adversarial
    image, perturbation, and the model's labels on both over the image."""
    clean = {p["image"]: p["miou"] for p in card["clean"]["per_image"]}
    ranked = sorted((p for p in last["per_image"] if p["worst"] is not None),
                    key=lambda p: (p["worst"] - (clean.get(p["image"]) or 0), p["image"]))
    shown = []
    model = cached_segmenter(card["model"]["spec"], card["device"])
    for p in ranked[:WORST_IMAGES]:
        path = sheet_path(out / "black-box" / layout.SHEET_DIR, p["by"], last["eps"],
                          last["budget"], p["image"])
        if not path.exists():
            continue
        item = dataset.subset(names=[p["image"]])[0]
        adv = read_image(path)
        labels = predict_labels(model, to_tensor([item.image, adv]).to(model.device)).cpu().numpy()
        name = p["image"]
        shape = item.image.shape
        shown.append({
            "image": name, "clean_miou": clean.get(name), "worst": p["worst"], "by": p["by"],
            "pictures": [
                _picture(_derived(out, f"{name}_clean", item.image), shape, "clean"),
                _picture(_derived(out, f"{name}_adv", adv), shape, f"adversarial ({p['by']})"),
                _picture(_derived(out, f"{name}_delta", amplify(item.image, adv)), shape,
                         "perturbation, amplified"),
                _picture(_derived(out, f"{name}_clean_pred",
                                  overlay(item.image, labels[0], palette)), shape, "clean prediction"),
                _picture(_derived(out, f"{name}_adv_pred", overlay(adv, labels[1], palette)),
                         shape, "adversarial prediction"),
            ]})
    return shown


def _edit_pictures(card: Mapping[str, Any], out: Path, per_subset: int = 2) -> list[dict[str, Any]]:
    """A few edited images of each subset, linked where the edit run stored them."""
    found: list[dict[str, Any]] = []
    for subset in card["edits"].get("subsets", {}):
        folder = out / "edits" / "edits" / subset / "images"
        files = sorted(folder.glob("*.png"))[:per_subset] if folder.is_dir() else []
        for f in files:
            shape = read_image(f).shape
            found.append({"subset": subset, "name": f.stem,
                          "picture": _picture(f.relative_to(out).as_posix(), shape, subset)})
    return found


def _derived(out: Path, name: str, array: np.ndarray) -> str:
    """Write OUT/card_files/NAME.png; return its link relative to card.html."""
    rel = f"{FILES}/{name}.png"
    write_png(out / rel, array)
    return _href(rel)
