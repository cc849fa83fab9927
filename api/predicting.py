"""`segtk.predict` and `segtk.report`: the code paths of `segtk predict` and `segtk report`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from segtk.api.loading import data_of, model_of, pixel_limited
from segtk.api.models import ModelKeywords
from segtk.core import Segmenter
from segtk.jobs.predict import predict_dataset
from segtk.reports.writer import write_report


@pixel_limited
def predict(model: str | Segmenter | torch.nn.Module, data: Any = "demo",
            out: str | Path | None = None, *, split: str | None = None,
            limit: int | None = None, batch_size: int = 8, device: str | None = None,
            classes_from_data: bool = False, on_batch: Callable[[int], None] | None = None,
            max_pixels: int | None = None, classes: Sequence[str] | None = None,
            mean: Sequence[float] | None = None, std: Sequence[float] | None = None,
            size: tuple[int, int] | None = None) -> dict[str, Any]:
    """Predict every image of `data` (batched) and score it: {"images", "miou", "pacc" (the
    dataset's, as fractions), "iou" (class name -> IoU)}, what `segtk predict --json` prints. With `out`, label PNGs and overlays are
    written there as `segtk predict --out` writes them. `model`, `data`, `device`: as
    `segtk.attack` takes them (a torch module with `classes`, `mean`, `std`, `size`; tensors,
    pairs or a DataLoader as data); `on_batch(n)` follows the progress."""
    segmenter = model_of(model, device, ModelKeywords(classes, mean, std, size))
    dataset = data_of(data, split, limit, model=segmenter)
    return predict_dataset(segmenter, dataset, out, batch_size, on_batch,
                           classes_from_data=classes_from_data)


@pixel_limited
def report(run_dir: str | Path, data: str | None = None,
           on_page: Callable[[Path], None] | None = None, *,
           max_pixels: int | None = None) -> Path:
    """Write RUN_DIR/report.html for a run folder of any segtk job (run.json says which) and
    return its path, as `segtk report` does. `data`: a dataset spec overriding the one in
    run.json (e.g. the data moved since the run). `on_page(run)` is called before each page is
    built, sub-runs' first (a train run's page scores each epoch's checkpoint once)."""
    return write_report(run_dir, data, on_page)
