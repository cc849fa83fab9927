"""Batches of equal-sized items, as segtk's jobs and benchmarks feed models (one tensor a batch)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import torch

from segtk.core import Dataset, Item, to_tensor


def batch_tensors(batch: Sequence[Item], device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Items of one size -> images [B,3,H,W] in [0,1] and labels [B,H,W] on `device`."""
    images = to_tensor([item.image for item in batch]).to(device)
    labels = torch.from_numpy(np.stack([item.label for item in batch])).to(device)
    return images, labels


def same_size_batches(dataset: Dataset, indices: Sequence[int], batch_size: int) -> Iterator[list[Item]]:
    """Read items in order and yield batches of equal-sized images (a batch is one tensor)."""
    pending: dict[tuple[int, int], list[Item]] = {}
    for index in indices:
        item = dataset[index]
        key = item.image.shape[:2]
        group = pending.setdefault(key, [])
        group.append(item)
        if len(group) == batch_size:
            yield pending.pop(key)
    yield from pending.values()
