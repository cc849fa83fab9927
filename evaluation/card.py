"""card.json: the typed, versioned record of one `segtk evaluate` run.

Everything in it is computed from the sub-runs' records (OUT/black-box, OUT/white-box,
OUT/edits) and the data, never from time or the machine's state beyond the device name, so
a run resumed after a kill, or sharded over other workers, writes the same bytes.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from segtk.benchmarks.attacks import BenchAttackRecord
from segtk.core import Dataset, SegtkError
from segtk.core._metrics import mean_iou
from segtk.evaluation.ensemble import class_ious, members_at, percent, total, worst_case
from segtk.evaluation.protocol import PROTOCOL, VERSION, Profile
from segtk.storage.provenance import spec_file_hashes
from segtk.storage.runs import atomic_write_json

KIND = "segtk robustness card"
CARD_VERSION = 1
CARD_JSON = "card.json"


def model_identity(spec: str) -> dict[str, Any]:
    """The model spec, the sha256 of every file it names, and one sha256 over both."""
    files = dict(sorted(spec_file_hashes([spec]).items()))
    digest = hashlib.sha256(json.dumps({"spec": spec, "files": sorted(files.values())}).encode())
    return {"spec": spec, "files": files, "sha256": digest.hexdigest()}


def data_sha256(dataset: Dataset) -> str:
    """sha256 over every image's name, decoded pixels and label ids, in order: the same data
    read from PNG or JPEG files or another folder hashes the same when it decodes the same."""
    h = hashlib.sha256()
    for item in dataset:
        h.update(item.name.encode() + b"\0")
        h.update(item.image.tobytes())
        h.update(item.label.astype("int64").tobytes())
    return h.hexdigest()


def clean_section(records: Iterable[BenchAttackRecord], images: Sequence[str]) -> dict[str, Any]:
    """Clean scores from the records' clean confusions (one per image, the same in each)."""
    by_image: dict[str, torch.Tensor] = {}
    for rec in records:
        by_image.setdefault(rec.image, torch.tensor(rec.clean_confusion))
    missing = [i for i in images if i not in by_image]
    if missing:
        raise SegtkError(f"no clean score of image {missing[0]!r} in the black-box records",
                         hint="finish the run: segtk evaluate ... --resume")
    scores = [percent(mean_iou(by_image[i])) for i in images]
    scored = [v for v in scores if v is not None]
    summed = total(by_image[i] for i in images)
    return {"miou": percent(mean_iou(summed)),
            "image_miou": round(sum(scored) / len(scored), 4) if scored else None,
            "class_iou": class_ious(summed),
            "per_image": [{"image": i, "miou": v} for i, v in zip(images, scores)]}


def attack_section(records: Sequence[BenchAttackRecord], attacks: Sequence[str],
                   eps_grid: Sequence[float], budgets: Sequence[int],
                   images: Sequence[str]) -> list[dict[str, Any]]:
    """One entry per ε and budget: the ensemble's worst case and each member's numbers."""
    return [{"eps": e, "budget": b, **worst_case(members_at(records, attacks, e, b), images)}
            for e in eps_grid for b in budgets]


def edits_section(table: Mapping[str, Any], model: str,
                  attributes: Sequence[str]) -> dict[str, Any]:
    """mIoU per edited subset, mR per attribute (its subsets' mean mIoU over its group's
    reference) and per group (Gen4Seg Eq. 11), and overall mR: the mean of the groups'."""
    miou = {s: (None if v is None else round(float(v), 4))
            for s, v in table["miou"].get(model, {}).items()}
    groups = [g for g in table["groups"] if g["model"] == model]
    per_attr = {}
    for attr in attributes:
        group = next((g for g in groups if any(s == attr or s.startswith(attr + "-")
                                               for s in g["subsets"])), None)
        if group is None:
            continue
        subsets = [s for s in group["subsets"] if s == attr or s.startswith(attr + "-")]
        values = [v for s in subsets if (v := miou.get(s)) is not None]
        ref = group["reference_miou"]
        per_attr[attr] = {"group": group["group"], "subsets": subsets,
                          "miou": round(sum(values) / len(values), 4) if values else None,
                          "mr": round(sum(values) / len(values) / ref, 4)
                          if values and ref else None}
    group_rows = [{"group": g["group"], "reference": g["reference"],
                   "reference_miou": round(g["reference_miou"], 4), "rmiou": round(g["rmiou"], 4),
                   "mr": None if g["mr"] is None else round(g["mr"], 4), "subsets": g["subsets"]}
                  for g in groups]
    mrs = [g["mr"] for g in group_rows if g["mr"] is not None]
    return {"ran": True, "subsets": miou, "attributes": per_attr, "groups": group_rows,
            "images": table["images"].get(model, {}),
            "mr": round(sum(mrs) / len(mrs), 4) if mrs else None}


def headline(card: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The card's one number per ε and budget: the ensemble's worst-case dataset mIoU, next
    to clean, the white-box floor (at its own passes) and mR."""
    floor = {r["eps"]: r["miou"] for r in card["white_box"].get("results", [])}
    return [{"eps": r["eps"], "budget": r["budget"], "clean_miou": card["clean"]["miou"],
             "robust_miou": r["miou"], "robust_image_miou": r["image_miou"],
             "queries": r["queries"], "white_box_floor": floor.get(r["eps"]),
             "mr": card["edits"].get("mr")} for r in card["black_box"]]


def write_card(card: dict[str, Any], out: Path) -> Path:
    atomic_write_json(out / CARD_JSON, card, indent=1)
    return out / CARD_JSON


def read_card(path: Path) -> dict[str, Any]:
    """A card.json (or the card.json in a run folder), refused unless it is one."""
    file = path / CARD_JSON if path.is_dir() else path
    try:
        card = json.loads(file.read_text())
    except FileNotFoundError:
        raise SegtkError(f"{file}: no robustness card there",
                         hint="pass a card.json or the --out folder of segtk evaluate") from None
    except ValueError as exc:
        raise SegtkError(f"{file} is not valid JSON ({exc})",
                         hint="rerun segtk evaluate --resume on its folder to rewrite it") from None
    if not isinstance(card, dict) or card.get("kind") != KIND:
        raise SegtkError(f"{file} is not a segtk robustness card",
                         hint="pass a card.json or the --out folder of segtk evaluate")
    return card


def protocol_record(profile: Profile) -> dict[str, Any]:
    return {"name": PROTOCOL, "version": VERSION, "profile": profile.record()}


__all__ = ["CARD_JSON", "CARD_VERSION", "KIND", "attack_section", "clean_section", "data_sha256",
           "edits_section", "headline", "model_identity", "protocol_record",
           "read_card", "write_card"]
