"""DLA's default configuration is Algorithm 1, query for query: a reference written from the
paper in this file (its own stripe draws from the image's stream, its own block schedule, its
own per-image mIoU) must ask the model for exactly the images DLA asks for. The model and image
are chosen so that calibration keeps some flips, rejects others and meets ties (a flip that
leaves the proxy where it was), so a wrong flip order, a wrong acceptance rule (`<=` for `<`) or a
wrong exploration length changes the sequence."""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np
import torch

from segtk.testing import TinySegmenter, toy_batch
from segtk_dla import DLA

EPS = 8 / 255
BUDGET = 40
CLASSES = 4


class Recording(TinySegmenter):
    """The tiny model, remembering every image it was asked about."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[torch.Tensor] = []

    def predict(self, images: torch.Tensor) -> torch.Tensor:
        self.seen.extend(images.clone())
        return super().predict(images)


def miou(pred: np.ndarray, label: np.ndarray) -> float:
    """Per-image mIoU over the classes present in the label or the prediction."""
    ious = []
    for c in range(CLASSES):
        union = np.logical_or(pred == c, label == c).sum()
        if union:
            ious.append(np.logical_and(pred == c, label == c).sum() / union)
    return float(np.mean(ious))


def blocks(lines: int) -> Iterator[tuple[int, int]]:
    """Lines 12 and 19-25: the whole image, its halves, quarters, ... single lines, again."""
    levels = math.ceil(math.log2(lines)) + 1 if lines > 1 else 1
    while True:
        for n in range(levels):
            size = math.ceil(lines / 2**n)
            for i in range(2**n):
                if i * size < lines:
                    yield i * size, min((i + 1) * size, lines)


def algorithm_1(x: torch.Tensor, y: torch.Tensor, seed: int) -> tuple[list[torch.Tensor], int, int, int]:
    """The images Algorithm 1 queries for one image, and how many flips it kept, rejected, and
    found level with the best proxy (rejected too: only a drop is kept)."""
    model, rng = TinySegmenter(), torch.Generator().manual_seed(seed)
    _, h, w = x.shape

    def loss(image: torch.Tensor) -> float:
        return miou(model.predict(image[None])[0].numpy(), y.numpy())

    queries = [x]
    l_min = loss(x)  # line 1
    kept: tuple[torch.Tensor, bool] | None = None
    best: tuple[float, torch.Tensor, bool] | None = None
    for t in range(1, math.floor(0.2 * BUDGET) + 1):  # lines 4-9: T/5 exploration steps
        rows = t % 2 == 1
        signs = torch.randint(0, 2, (h if rows else w,), generator=rng).float() * 2 - 1
        delta = EPS * signs.view((1, h, 1) if rows else (1, 1, w))
        image = (x + delta).clamp(0, 1)
        queries.append(image)
        score = loss(image)
        if best is None or score < best[0]:
            best = (score, delta, rows)
        if score < l_min:
            l_min, kept = score, (delta, rows)
    assert best is not None, "the budget leaves no exploration step"
    delta, rows = kept if kept is not None else best[1:]
    schedule = blocks(h if rows else w)
    accepted = rejected = ties = 0
    for _ in range(len(queries), BUDGET):  # lines 10-26: flip blocks, keep a drop only
        start, stop = next(schedule)
        trial = delta.clone()
        if rows:
            trial[:, start:stop, :] *= -1
        else:
            trial[:, :, start:stop] *= -1
        image = (x + trial).clamp(0, 1)
        queries.append(image)
        score = loss(image)
        if score < l_min:
            l_min, delta, accepted = score, trial, accepted + 1
        else:
            rejected, ties = rejected + 1, ties + (score == l_min)
    return queries, accepted, rejected, ties


def test_dla_defaults_query_what_algorithm_1_queries() -> None:
    images, labels = toy_batch(1, 12, 16, seed=0)
    seed = 11
    model = Recording()
    result = DLA(budget=BUDGET, eps=8.0).run(model, images, labels, seeds=[seed])
    expected, accepted, rejected, ties = algorithm_1(images[0], labels[0], seed)
    assert accepted >= 2 and rejected >= 2 and ties >= 1, "the case no longer tells the rules apart"
    assert len(model.seen) == len(expected) == BUDGET
    for q, (got, want) in enumerate(zip(model.seen, expected, strict=True)):
        assert torch.allclose(got, want, atol=1e-6), f"query {q} differs from Algorithm 1"
    assert int(result.queries[0]) == BUDGET
