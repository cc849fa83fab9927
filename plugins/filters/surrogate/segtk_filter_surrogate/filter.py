"""Gen4Seg pixel filter (Eq. 10): per-class mean cross-entropy of a surrogate segmenter over
the real source images, l_g; an edited pixel of class g becomes ignore when its loss

- `upper` (default): exceeds alpha*l_g, the paper's upper bound with its alpha = 2;
- `paper`: leaves [l_g/alpha, alpha*l_g], both bounds as printed;
- `code`: exceeds margin*l_g (the authors' released code, margin 1.25).

Why `upper` is the default: the per-class mean is dominated by a few hard pixels, so most
correctly segmented pixels lie far below l_g/alpha and the printed lower bound drops them; on
unedited CamVid val images (ESPNet) `paper` keeps 5% of the labelled pixels, `upper` 92%."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np
import torch

from segtk.core import (
    Dataset,
    EditedSample,
    Filter,
    FilterResult,
    PluginError,
    Sample,
    Segmenter,
    atomic_write_bytes,
    load_segmenter,
    to_tensor,
)

MODES = ("upper", "paper", "code")


def loss_map(logits: torch.Tensor, label: torch.Tensor, num_classes: int,
             ignore_index: int = 255) -> torch.Tensor:
    """Per-pixel cross-entropy [B,H,W] (float64) of logits [B,C,H,W]; NaN where unlabelled."""
    logp = torch.log_softmax(logits.double(), dim=1)
    valid = (label >= 0) & (label < num_classes) & (label != ignore_index)
    safe = torch.where(valid, label, torch.zeros_like(label)).long()
    loss = -logp.gather(1, safe[:, None])[:, 0]
    return torch.where(valid, loss, torch.full_like(loss, float("nan")))


def class_losses(sums: np.ndarray, counts: np.ndarray) -> list[float | None]:
    """l_g = sum of losses / number of pixels of class g (None where g never occurs)."""
    return [float(s / c) if c > 0 else None for s, c in zip(sums, counts)]


def filter_label(loss: np.ndarray, label: np.ndarray, lg: list[float | None], alpha: float = 2.0,
                 mode: str = "upper", margin: float = 1.25,
                 ignore_index: int = 255) -> tuple[np.ndarray, float]:
    """The label with noisy pixels set to ignore, and the kept share of labelled pixels."""
    k = len(lg)
    table = np.array([np.nan if v is None else v for v in lg] + [np.nan], dtype=np.float64)
    valid = (label >= 0) & (label < k) & (label != ignore_index)
    ref = table[np.where(valid, label, k)]
    with np.errstate(invalid="ignore"):
        if mode == "code":
            noisy = loss > margin * ref
        elif mode == "upper":
            noisy = loss > alpha * ref
        elif mode == "paper":
            noisy = (loss > alpha * ref) | (loss < ref / alpha)
        else:
            raise ValueError(f"mode {mode!r} is not one of {', '.join(MODES)}")
    noisy &= valid & ~np.isnan(ref)
    out = label.copy()
    out[noisy] = ignore_index
    labelled = int(valid.sum())
    kept = 1.0 if labelled == 0 else float((valid & ~noisy).sum()) / labelled
    return out, kept


class SurrogateFilter(Filter):
    name: ClassVar[str] = "surrogate"
    stage: ClassVar[Literal["sample", "pixel"]] = "pixel"
    requires: ClassVar[tuple[str, ...]] = ("torch",)
    description: ClassVar[str] = "Gen4Seg Eq. 10: surrogate segmenter loss vs per-class mean"

    def __init__(self, model: str | Segmenter | None = None, alpha: float | str = 2.0,
                 mode: str = "upper", margin: float | str = 1.25) -> None:
        if model is None or model == "":
            # No default: the surrogate must not be the model that is scored on the edits
            # (its own errors would be filtered away), and segtk edit does not know that model.
            raise PluginError("filter surrogate needs a surrogate model: add --filter-param "
                              "surrogate.model=SPEC",
                              hint="SPEC is a segmenter with logits for the data's classes, other "
                                   "than the model you will score, e.g. --filter-param "
                                   "surrogate.model=demo on the demo data or --filter-param "
                                   "surrogate.model=espnet:camvid=PATH.safetensors on CamVid")
        if mode not in MODES:
            raise PluginError(f"filter surrogate: mode {mode!r} is not one of {', '.join(MODES)}",
                              hint="upper (default: loss > alpha*l_g), paper (also < l_g/alpha) "
                                   "or code (loss > margin*l_g); see the plugin's README")
        self.alpha, self.margin, self.mode = float(alpha), float(margin), mode
        if self.alpha <= 1 or self.margin <= 0:
            raise PluginError("filter surrogate: alpha must be > 1 and margin > 0")
        self.spec = model if isinstance(model, str) else getattr(model, "name", "segmenter")
        self._model = model if isinstance(model, Segmenter) else None
        self.lg: list[float | None] | None = None

    def parameters(self) -> dict[str, Any]:
        return {"model": self.spec, "alpha": self.alpha, "mode": self.mode, "margin": self.margin}

    @property
    def model(self) -> Segmenter:
        if self._model is None:

            self._model = load_segmenter(self.spec)
        if not self._model.has_logits:
            raise PluginError(f"filter surrogate: model {self.spec} gives no logits",
                              hint="use a model adapter that implements logits()")
        return self._model

    def losses(self, image: np.ndarray, label: np.ndarray, num_classes: int,
               ignore_index: int = 255) -> np.ndarray:
        model = self.model
        x = to_tensor([image]).to(model.device)
        with torch.no_grad():
            logits = model.logits(x)
        y = torch.from_numpy(np.asarray(label, dtype=np.int64))[None].to(logits.device)
        return loss_map(logits, y, num_classes, ignore_index)[0].cpu().numpy()

    def prepare(self, dataset: Dataset, cache_dir: str | Path | None = None) -> list[float | None]:
        """l_g over the real source images (Eq. 10), cached in cache_dir/surrogate_lg.json."""
        key = hashlib.sha256(json.dumps([self.spec, dataset.name, dataset.names]).encode()).hexdigest()
        path = Path(cache_dir) / "surrogate_lg.json" if cache_dir else None
        if path is not None and path.exists():
            cached = json.loads(path.read_text())
            if cached.get("key") == key:
                self.lg = cached["lg"]
                return self.lg
        k = len(dataset.classes)
        sums, counts = np.zeros(k), np.zeros(k, dtype=np.int64)
        for item in dataset:
            loss = self.losses(item.image, item.label, k, dataset.ignore_index)
            valid = ~np.isnan(loss)
            lab = item.label[valid]
            sums += np.bincount(lab, weights=loss[valid], minlength=k)[:k]
            counts += np.bincount(lab, minlength=k)[:k]
        self.lg = class_losses(sums, counts)
        if path is not None:
            record = {"key": key, "model": self.spec, "dataset": dataset.name,
                      "images": len(dataset), "classes": dataset.classes, "lg": self.lg,
                      "pixels": counts.tolist()}
            atomic_write_bytes(path, json.dumps(record, indent=1).encode())
        return self.lg

    def apply(self, original: Sample, edited: EditedSample) -> FilterResult:
        if self.lg is None:
            raise PluginError("filter surrogate: prepare(dataset) must run before apply()")
        k = len(original.classes)
        loss = self.losses(edited.image, edited.label, k, original.ignore_index)
        label, kept = filter_label(loss, edited.label, self.lg, self.alpha, self.mode,
                                   self.margin, original.ignore_index)
        return FilterResult(keep=True, scores={"kept_fraction": round(kept, 6)}, label=label)
