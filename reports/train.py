"""Report context of a training run (`segtk train`): per epoch, the mean training loss (from
results.jsonl) and the validation mIoU and pixel accuracy of that epoch's checkpoint, as a
table and two charts.

The training job records no validation score, so the report scores each epoch's checkpoint on
the validation data: the run's data (or `segtk report --data`) at its `val` split, or the whole
dataset where it has no splits (then the page says the training images are among them). Scores
are kept in RUN_DIR/val_scores.json, keyed by the checkpoint's checkpoint.json hash and the
data, so a second report scores nothing again.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from segtk.core import SegtkError, load_segmenter
from segtk.core._specs import brief_spec, preferred_split, resolve_spec
from segtk.jobs.checkpoints import checkpoint_dir
from segtk.jobs.predict import predict_dataset
from segtk.jobs.train import EpochLine
from segtk.reports.common import _load_dataset, _note
from segtk.reports.svg import SERIES_COLOURS, Series, line_chart
from segtk.storage.layout import CHECKPOINT_DONE, MODEL_SPEC, RESULTS, VAL_SCORES
from segtk.storage.provenance import sha256_file
from segtk.storage.runs import atomic_write_json, read_results

VAL_SPLIT = "val"


def train_context(run: Path, meta: dict[str, Any], data_spec: str | None,
                  notes: list[dict[str, str]]) -> dict[str, Any]:
    records = sorted(EpochLine.keyed(read_results(run / RESULTS, key="key"), run / RESULTS).values(),
                     key=lambda r: int(r.epoch))
    if not records:
        raise SegtkError(f"{run}: no finished epochs in {RESULTS} yet",
                         hint="run segtk train (or continue it with --resume) first")
    config = meta.get("config") or {}
    spec = data_spec or config.get("data")
    val, split = _val_data(spec, run, notes)
    scores = _val_scores(run, records, val, f"{spec}|{split}", bool(config.get("classes_from_data")),
                         notes) if val is not None else {}
    if val is not None and split is None:
        _note(notes, f"{brief_spec(spec)} has no {VAL_SPLIT} split: the validation scores are on "
                     f"all its {len(val)} images, the training images among them.", "warn")
    rows: list[dict[str, Any]] = [
        {"epoch": int(r.epoch), "loss": float(r.loss), "steps": r.steps, "seconds": r.seconds,
         **(scores.get(int(r.epoch)) or {})} for r in records]
    augment = str(config.get("augment") or "baseline")
    return {
        "title": f"Training: {augment} on {brief_spec(config.get('model'))} / {brief_spec(spec)}",
        "rows": rows,
        "augment": augment,
        "epochs": len(rows),
        "planned": config.get("epochs"),
        "val": {"data": brief_spec(spec), "split": split, "images": len(val) if val else None},
        "loss_chart": line_chart([Series("training loss", [r["loss"] for r in rows],
                                         SERIES_COLOURS[0], width=2.2, markers=True)],
                                 xlabel="epoch", ylabel="mean training loss", width=600,
                                 height=300, unit="epochs"),
        "val_chart": line_chart(
            [Series("val mIoU %", [r["miou"] for r in rows if "miou" in r], SERIES_COLOURS[1],
                    width=2.2, markers=True),
             Series("val pixel acc. %", [r["pacc"] for r in rows if "pacc" in r],
                    SERIES_COLOURS[2], markers=True)],
            xlabel="epoch", ylabel="validation score (%)", width=600, height=300,
            unit="epochs") if scores else "",
        "files": [f for f in (MODEL_SPEC, RESULTS, VAL_SCORES) if (run / f).is_file()],
    }


def _val_data(spec: str | None, run: Path, notes: list[dict[str, str]]):
    """The validation data and its split (None: the dataset has no splits), or (None, None)
    and a note saying why not."""
    split: str | None = VAL_SPLIT
    if spec:
        try:
            split = preferred_split(spec, VAL_SPLIT)
        except SegtkError:  # e.g. a relative path: _load_dataset also tries the folders above
            pass
    dataset, why = _load_dataset(spec, split, run, notes)
    if dataset is None:
        _note(notes, f"No validation scores: the data {spec or ''} could not be loaded ({why}); "
                     "pass --data SPEC to segtk report to point at it.", "warn")
        return None, None
    return dataset, split


def _val_scores(run: Path, records: list[EpochLine], val, data_key: str,
                classes_from_data: bool, notes: list[dict[str, str]]) -> dict[int, dict[str, float]]:
    """epoch -> {"miou", "pacc"} (%) of its checkpoint on `val`; cached in val_scores.json."""
    cache = _read_cache(run / VAL_SCORES)
    scores, changed = {}, False
    for rec in records:
        epoch = int(rec.epoch)
        done = checkpoint_dir(run, epoch) / CHECKPOINT_DONE
        if not done.is_file():
            _note(notes, f"Epoch {epoch} has no complete checkpoint: no validation score.", "warn")
            continue
        key = f"{epoch}|{sha256_file(done)}|{data_key}|{len(val)}"
        if key not in cache:
            try:
                model = load_segmenter(resolve_spec(str(rec.spec), run))
                summary = predict_dataset(model, val, None, classes_from_data=classes_from_data)
            except SegtkError as exc:
                _note(notes, f"Epoch {epoch} could not be scored: {exc.message}", "warn")
                continue
            cache[key] = {"miou": 100 * float(summary["miou"]), "pacc": 100 * float(summary["pacc"])}
            changed = True
        scores[epoch] = cache[key]
    if changed:
        atomic_write_json(run / VAL_SCORES, cache)
    return scores


def _read_cache(path: Path) -> dict[str, dict[str, float]]:
    """val_scores.json's scores ({} when absent or unreadable: they are scored again)."""
    try:
        cache = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return cache if isinstance(cache, dict) else {}
