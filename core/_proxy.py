"""The proxy index an attack minimises: per-image mIoU (DLA) or pixel accuracy."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from segtk.core._metrics import confusion, mean_iou, pixel_accuracy

PROXIES = ("miou", "pacc")


@dataclass(frozen=True)
class Proxy:
    """Scores predictions against labels, one float per image, batched with bincount.

    An image without any labelled pixel scores 0: there is nothing left to attack.
    """

    num_classes: int
    ignore_index: int = 255
    kind: str = "miou"

    def __post_init__(self) -> None:
        if self.kind not in PROXIES:
            raise ValueError(f"unknown proxy {self.kind!r}; choose one of {', '.join(PROXIES)}")

    def __call__(self, pred: torch.Tensor, label: torch.Tensor) -> torch.Tensor:
        return self.score(confusion(pred, label, self.num_classes, self.ignore_index))

    def score(self, conf: torch.Tensor) -> torch.Tensor:
        """The proxy of confusions [N,K,K+1] (the oracle counts them once per query)."""
        score = mean_iou(conf) if self.kind == "miou" else pixel_accuracy(conf)
        return torch.nan_to_num(score, nan=0.0).float()
