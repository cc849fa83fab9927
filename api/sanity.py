"""The checks a user expects before an attack or a benchmark: a clean mIoU so low that the
numbers after it would mean nothing (wrong preprocessing, class order or label encoding) is
said once, before the run, instead of being attacked without a word."""

from __future__ import annotations

import math
import sys
import warnings
from collections.abc import Callable

from segtk.core import Dataset, Segmenter
from segtk.core._metrics import confusion, mean_iou
from segtk.jobs import attack as attack_job
from segtk.jobs.batching import batch_tensors, same_size_batches

__all__ = ["LOW_CLEAN_MIOU", "check_clean_miou", "warn"]

LOW_CLEAN_MIOU = 5.0  # % : below it, a model and its data almost surely do not fit each other


def warn(message: str) -> None:
    """The API's default for `warn=`: a Python warning, pointing at the first caller outside
    segtk (the user's `segtk.attack(...)` line)."""
    frame, level = sys._getframe(1), 2
    while frame.f_back is not None and _in_segtk(frame.f_globals.get("__name__", "")):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, UserWarning, stacklevel=level)


def _in_segtk(module: str) -> bool:
    return module == "segtk" or module.startswith("segtk.")


def check_clean_miou(model: Segmenter, data: Dataset, batch_size: int,
                     warn: Callable[[str], None] = warn) -> float | None:
    """The model's clean mIoU (%) on the first batch of `data` (its labelled pixels), with one
    warning through `warn` if it is under LOW_CLEAN_MIOU; None where nothing is labelled.
    Reads one batch and asks the model once outside any attack's budget: results do not
    change."""
    if not len(data):
        return None
    batch = next(same_size_batches(data, range(min(len(data), batch_size)), batch_size))
    images, labels = batch_tensors(batch, model.device)
    predicted = attack_job.evaluate(model, images)  # the job's one uncounted pass, looked up now
    conf = confusion(predicted, labels, len(data.classes), data.ignore_index).sum(0)
    miou = float(mean_iou(conf)) * 100
    if math.isnan(miou):
        return None
    if miou < LOW_CLEAN_MIOU:
        warn(f"model {model.name} scores a clean mIoU of {miou:.2f}% on the first "
             f"{len(batch)} image(s) of {data.name}: likely causes are the model's preprocessing "
             "(mean/std, 0-1 or 0-255 inputs, RGB or BGR), its class order against the data's, "
             "or the label encoding (class ids, 255 = ignore)")
    return miou
