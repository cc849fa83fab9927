"""The per-image worst case over an attack ensemble, from `bench attacks` records.

For each image, ε and budget the ensemble's result is the member whose stored 8-bit image
scored the lowest per-image mIoU (ties: the first member in the profile's order), as
AutoAttack takes the per-example worst case. The dataset number is the lowest dataset mIoU
among the per-image selection and each member alone, so it is at or below every member's
dataset mIoU too (a per-image choice need not lower an IoU summed over images).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from segtk.benchmarks.attacks import BenchAttackRecord
from segtk.core._metrics import iou_per_class, mean_iou

PER_IMAGE = "per-image worst case"


def percent(value: torch.Tensor | float) -> float | None:
    """A score in % rounded to 4 decimals (None for NaN: nothing scored)."""
    v = 100 * float(value)
    return None if math.isnan(v) else round(v, 4)


def class_ious(conf: torch.Tensor) -> list[float | None]:
    return [percent(v) for v in iou_per_class(conf)]


@dataclass(frozen=True)
class Member:
    """One attack's stored-image confusion and queries per image at one ε and budget."""

    attack: str
    confusions: dict[str, torch.Tensor]
    queries: dict[str, int]


def members_at(records: Iterable[BenchAttackRecord], attacks: Sequence[str], eps: float,
               budget: int, repeat: int = 0) -> list[Member]:
    """Each attack's images at `budget`: from the run given that budget, or else the smallest
    run whose checkpoints include it (an anytime attack runs once, at the largest budget).
    Queries at a checkpoint are min(budget, the run's queries)."""
    best: dict[tuple[str, str], BenchAttackRecord] = {}
    for rec in records:
        if rec.repeat != repeat or rec.eps != eps or str(budget) not in rec.confusions:
            continue
        key = (rec.attack, rec.image)
        if key not in best or rec.run_budget < best[key].run_budget:
            best[key] = rec
    out = []
    for attack in attacks:
        mine = {img: r for (a, img), r in best.items() if a == attack}
        out.append(Member(attack, {img: torch.tensor(r.confusions[str(budget)]) for img, r in mine.items()},
                          {img: min(budget, r.queries) for img, r in mine.items()}))
    return out


def image_miou(conf: torch.Tensor) -> float:
    """An image's mIoU in %, +inf where nothing is scored (never the worst)."""
    v = percent(mean_iou(conf))
    return math.inf if v is None else v


def total(confusions: Iterable[torch.Tensor]) -> torch.Tensor:
    """The sum of confusion matrices (at least one)."""
    return torch.stack(list(confusions)).sum(0)


def worst_case(members: Sequence[Member], images: Sequence[str]) -> dict[str, Any]:
    """The ensemble's result at one ε and budget: per image each member's mIoU and the worst;
    the dataset mIoU, per-class IoU and mean per-image mIoU of the worst case; each member's
    dataset mIoU; the queries the ensemble spent."""
    per_image: list[dict[str, Any]] = []
    chosen: dict[str, torch.Tensor] = {}
    for img in images:
        scores = {m.attack: image_miou(m.confusions[img]) for m in members}
        worst = min(scores, key=lambda a: scores[a])  # first of equal ones: profile order
        chosen[img] = next(m.confusions[img] for m in members if m.attack == worst)
        per_image.append({"image": img, "worst": _finite(scores[worst]), "by": worst,
                          "members": {a: _finite(v) for a, v in scores.items()}})
    totals = {m.attack: total(m.confusions[i] for i in images) for m in members}
    selection = total(chosen[i] for i in images)
    candidates = [(PER_IMAGE, selection), *totals.items()]
    name, lowest = min(candidates, key=lambda kv: image_miou(kv[1]))  # first of equal: per image
    finite: list[float] = [p["worst"] for p in per_image if p["worst"] is not None]
    return {
        "miou": percent(mean_iou(lowest)),
        "selection": name,
        "image_miou": round(sum(finite) / len(finite), 4) if finite else None,
        "class_iou": class_ious(lowest),
        "members": {a: {"miou": percent(mean_iou(t)),
                        "image_miou": _mean([p["members"][a] for p in per_image])}
                    for a, t in totals.items()},
        "queries": sum(sum(m.queries[i] for i in images) for m in members),
        "per_image": per_image,
    }


def _finite(v: float) -> float | None:
    return None if math.isinf(v) else v


def _mean(values: Sequence[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return round(sum(kept) / len(kept), 4) if kept else None
