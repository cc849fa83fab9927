"""The oracle's cheap paths keep its guarantees: every queried image in the ε-ball and [0,1]."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from segtk.core.attack import Oracle, box, project
from segtk.core.errors import BudgetExceeded, SegtkError
from segtk.core.proxy import Proxy
from segtk.core.segmenter import QueryCounter
from segtk.testing import RecordingSegmenter, toy_batch

EPS = 8 / 255


def oracle(budget: int = 10, n: int = 2) -> tuple[Oracle, RecordingSegmenter]:
    images, labels = toy_batch(n, 6, 7)
    images[0, :, :2] = 0.0  # saturated rows exercise the [0,1] box
    images[-1, :, -2:] = 1.0
    model = RecordingSegmenter()
    counter = QueryCounter(model, budget, n)
    return Oracle(counter, images, labels, Proxy(4), EPS, list(range(n))), model


@settings(max_examples=50, deadline=None)
@given(seed=st.integers(0, 10_000), eps=st.sampled_from([1.0, 8.0, 16.0, 255.0]))
def test_clamping_to_the_box_is_project_bit_for_bit(seed: int, eps: float) -> None:
    g = torch.Generator().manual_seed(seed)
    clean = torch.rand(2, 3, 5, 4, generator=g)
    clean[0, 0] = 0.0
    clean[1, 1] = 1.0
    x = clean + (torch.rand(clean.shape, generator=g) * 2 - 1) * 3 * eps / 255
    lo, hi = box(clean, eps / 255)
    assert torch.equal(torch.clamp(x, lo, hi), project(x, clean, eps / 255))


def test_vertex_patch_and_undo_stay_in_bounds_and_are_what_they_say() -> None:
    o, model = oracle()
    clean = o.clean[0]
    v = o.vertex(0, torch.tensor([True, False, True, False, True, False])[None, :, None])
    assert torch.equal(v.image[:, 0], project(clean[:, 0] + EPS, clean[:, 0], EPS))
    assert torch.equal(v.image[:, 1], project(clean[:, 1] - EPS, clean[:, 1], EPS))
    before = v.image.clone()
    undo = o.patch(v, (..., slice(1, 3)), clean[..., 1:3] + 5 * EPS)  # far out: projected
    assert torch.equal(v.image[..., 1:3], project(clean[..., 1:3] + EPS, clean[..., 1:3], EPS))
    assert torch.equal(v.image[..., :1], before[..., :1]) and torch.equal(v.image[..., 3:], before[..., 3:])
    o.score_verified([v])
    assert torch.equal(model.seen[-1], v.image)
    undo()
    assert torch.equal(v.image, before)
    o.score_verified([v, o.verify(1, o.clean[1] - 3 * EPS)])
    assert float((model.seen[-1] - o.clean[1]).abs().max()) <= EPS + 1e-6
    assert float(model.seen[-1].min()) >= 0


def test_a_verified_image_written_outside_the_oracle_is_refused_before_the_model() -> None:
    o, model = oracle()
    v = o.verify(0, o.clean[0])
    v.image[0, 0, 0] = 2.0  # an attack scribbling on the oracle's image
    with pytest.raises(SegtkError, match="wrote to a verified image outside the oracle"):
        o.score_verified([v])
    assert model.calls == 0
    w = o.verify(1, o.clean[1])
    w.image[:, :2].add_(1.0)  # a write through a view counts too
    with pytest.raises(SegtkError):
        o.score_verified([w])


def test_verified_queries_are_charged_exactly() -> None:
    o, _ = oracle(budget=2)
    v = o.verify(0, o.clean[0])
    o.score_verified([v])
    o.score_verified([v, o.verify(1, o.clean[1])])
    assert o.counter.counts.tolist() == [2, 1]
    with pytest.raises(BudgetExceeded):
        o.score_verified([v])
    assert [len(h) for h in o.history] == [2, 1]


def test_query_refuses_nan() -> None:
    o, model = oracle()
    x = o.clean[:1].clone()
    x[0, 0, 0, 0] = float("nan")
    with pytest.raises(SegtkError, match="outside the ε-ball"):
        o.query(x, torch.tensor([0]))
    assert model.calls == 0


def test_pinned_candidates_of_consecutive_images_are_one_view_of_the_oracles_batch() -> None:
    o, model = oracle(n=3)
    vs = [o.pin(o.verify(i, o.clean[i] + EPS)) for i in range(3)]
    assert all(v.pinned for v in vs)
    undo = o.patch(vs[1], (..., slice(0, 2)), o.clean[1][..., :2] - 9 * EPS)
    o.score_verified(vs)
    assert model.sizes == [3]
    assert torch.equal(model.batches[-1][1], vs[1].image)
    assert float((model.batches[-1] - o.clean).abs().max()) <= EPS + 1e-6
    undo()
    kept = o.unpinned(vs[0])
    o.vertex(0, torch.zeros(1, 1, 1, dtype=torch.bool), pin=True)  # reuses row 0
    assert not torch.equal(kept.image, vs[0].image)  # the copy kept what row 0 showed
    o.score_verified([kept, vs[2]])  # mixed: stacked
    assert torch.equal(model.batches[-1][0], kept.image)


def test_a_write_to_the_pinned_batch_outside_the_oracle_is_refused() -> None:
    o, model = oracle(n=2)
    vs = [o.pin(o.verify(i, o.clean[i])) for i in range(2)]
    vs[1].image[0, 0, 0] = 5.0  # through image 1's row: image 0's candidate is refused too
    with pytest.raises(SegtkError, match="outside the oracle"):
        o.score_verified(vs[:1])
    assert model.calls == 0


def test_verified_images_of_another_oracle_are_refused() -> None:
    o, model = oracle()
    other, _ = oracle()
    with pytest.raises(SegtkError, match="another oracle"):
        o.score_verified([other.verify(0, other.clean[0])])
    assert model.calls == 0
    assert o.score_verified([]) == []


@pytest.mark.parametrize("side", [1.0, -1.0])
def test_a_query_one_percent_past_eps_inside_the_box_is_refused(side: float) -> None:
    """The tolerant box is float32 slack (EPS_TOLERANCE), not a share of ε: clean ± 1.01·ε on
    one value, well inside [0,1], never reaches the model; clean ± ε does, for every owner."""
    clean = torch.full((2, 3, 4, 5), 0.5)
    labels = torch.zeros(2, 4, 5, dtype=torch.long)
    model = RecordingSegmenter()
    o = Oracle(QueryCounter(model, 10, 2), clean, labels, Proxy(4), EPS, [0, 1])
    edge = clean + side * EPS
    o.query(edge, torch.tensor([0, 1]))  # exactly on the ball's surface: accepted
    assert model.calls == 1 and torch.equal(model.seen[-1], edge[1])
    past = edge.clone()
    past[1, 2, 3, 4] = 0.5 + side * 1.01 * EPS  # one value of image 1, 1% past ε
    with pytest.raises(SegtkError, match="outside the ε-ball"):
        o.query(past, torch.tensor([0, 1]))
    with pytest.raises(SegtkError, match="outside the ε-ball"):
        o.query(past[1:], torch.tensor([1]))
    assert model.calls == 1 and o.counter.counts.tolist() == [1, 1]  # refused before charging
