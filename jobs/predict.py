"""`segtk predict`: labels and overlays for a dataset, and its dataset mIoU."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from segtk.class_names import check_compatible
from segtk.core import (
    ConfusionAccumulator,
    Dataset,
    ModelError,
    Segmenter,
    check_prediction,
    to_tensor,
    write_png,
)
from segtk.core._data import default_palette
from segtk.core._errors import naming
from segtk.imaging import overlay
from segtk.jobs.batching import same_size_batches
from segtk.storage.layout import LABELS, OVERLAYS, SUMMARY
from segtk.storage.runs import atomic_write_json


def predict_dataset(
    segmenter: Segmenter,
    dataset: Dataset,
    out: str | Path | None,
    batch_size: int = 8,
    on_batch: Callable[[int], None] | None = None,
    classes_from_data: bool = False,
) -> dict[str, Any]:
    """Predict every image (batched); write label PNGs and overlays under `out` if given.
    Refuses a model whose class list differs from the dataset's: its mIoU would be noise
    (unless `classes_from_data`: see check_compatible)."""
    check_compatible(segmenter, dataset, classes_from_data)
    acc = ConfusionAccumulator(len(dataset.classes), dataset.ignore_index)
    palette = dataset.palette if dataset.palette is not None else default_palette(len(dataset.classes))
    for batch in same_size_batches(dataset, range(len(dataset)), batch_size):
        x = to_tensor([it.image for it in batch]).to(segmenter.device)
        with naming(f"while predicting {batch[0].name}", ModelError, "the model"), torch.inference_mode():
            pred = check_prediction(x, segmenter.predict(x), segmenter).cpu()
        acc.add(pred, torch.from_numpy(np.stack([it.label for it in batch])))
        if out is not None:
            for item, labels in zip(batch, pred.numpy()):
                write_png(Path(out) / LABELS / f"{item.name}.png", labels.clip(0, 255), palette)
                write_png(Path(out) / OVERLAYS / f"{item.name}.png",
                          overlay(item.image, labels, palette, ignore_index=dataset.ignore_index))
        if on_batch:
            on_batch(len(batch))
    summary = {
        "model": segmenter.name,
        "dataset": dataset.name,
        "images": len(dataset),
        "miou": acc.miou,
        "pacc": acc.pacc,
        "iou": dict(zip(dataset.classes, acc.iou())),
    }
    if out is not None:
        atomic_write_json(Path(out) / SUMMARY, summary)  # strict: a NaN becomes null
    return summary
