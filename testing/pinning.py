"""Pin an attack's short run: the bundled demo images as tensors, and one digest of everything
a run produced, so a refactor or a speed-up is proven bit-identical by one string."""

from __future__ import annotations

import hashlib

import torch

from segtk.core import AttackResult, load_dataset

__all__ = ["demo_batch", "result_digest"]


def demo_batch(n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The first n images of the bundled demo dataset as [n,3,H,W] floats in [0,1] and
    [n,H,W] labels."""
    data = load_dataset("demo", limit=n)
    items = [data[i] for i in range(n)]
    images = torch.stack([torch.from_numpy(it.image).permute(2, 0, 1).float() / 255 for it in items])
    return images, torch.stack([torch.from_numpy(it.label).long() for it in items])


def result_digest(result: AttackResult) -> str:
    """sha256 of a run's images, scores, labels, query counts and per-query history."""
    digest = hashlib.sha256()
    for t in (result.images, result.scores, result.predictions, result.queries):
        digest.update(t.contiguous().numpy().tobytes())
    digest.update(repr(result.history).encode())
    return digest.hexdigest()
