"""SimBA: the shared suite for both bases, plus the basis and the +α-then-−α query pattern."""

from __future__ import annotations

import pytest
import torch

from segtk.testing import AttackSuite, TinySegmenter, toy_batch
from segtk.testing import RecordingSegmenter as Recorder
from segtk_simba import SimBAAttack
from segtk_simba.attack import _dct_basis


class TestSimBA(AttackSuite):
    attack_cls = SimBAAttack


class TestSimBADCT(AttackSuite):
    attack_cls = SimBAAttack
    params = {"basis": "dct"}


@pytest.mark.parametrize(("eps", "moved"), [(8.0, 8 / 255), (255.0, 50 / 255)])
def test_default_moves_one_pixel_value_by_fifty_grey_levels_cut_to_eps(eps, moved) -> None:
    """The DLA paper's SimBA: pixel basis, delta 50 on the 0–255 scale, then the ε-ball."""
    images, labels = toy_batch(1, 10, 12, seed=1)
    images = images * 0.5 + 0.25  # 50 grey levels from either end of [0,1]: no box clipping
    model = Recorder()
    SimBAAttack(budget=12, eps=eps).run(model, images, labels)
    for candidate in model.seen[1:]:
        delta = candidate - images[0]
        changed = delta.nonzero()
        assert len(changed) >= 1
        # one new coordinate per trial, moved by exactly min(50/255, ε)
        assert torch.allclose(delta[delta != 0].abs(), torch.tensor(moved), atol=1e-6)
    first = model.seen[1] - images[0]
    assert len(first.nonzero()) == 1


def test_dct_default_was_below_one_grey_level_at_camvid_size() -> None:
    """Why pixel is the default: a unit DCT direction times 50/255 barely moves a pixel."""
    from segtk_simba.attack import SimBAParams, _Basis

    basis = _Basis(torch.Size((3, 360, 480)), SimBAParams(basis="dct"), torch.device("cpu"))
    gen = torch.Generator().manual_seed(0)
    for index in torch.randint(0, basis.size, (20,), generator=gen).tolist():
        assert float((50 / 255 * basis.vector(index)).abs().max()) < 1 / 255


def test_dct_basis_is_orthonormal() -> None:
    rows = _dct_basis(13, 13).double()
    assert torch.allclose(rows @ rows.T, torch.eye(13, dtype=torch.float64), atol=1e-5)


def test_pixel_trials_change_one_value_and_minus_follows_a_failed_plus() -> None:
    images, labels = toy_batch(1, 12, 12, seed=2)
    model = Recorder()
    SimBAAttack(budget=25, basis="pixel", eps=8).run(model, images, labels)
    assert torch.equal(model.seen[0], images[0])
    scores = [float(s) for s in _proxy(model.seen, labels)]
    best, best_score, plus = model.seen[0], scores[0], None
    for candidate, score in zip(model.seen[1:], scores[1:]):
        changed = (candidate != best).nonzero()
        assert len(changed) == 1  # one coordinate, moved to ±ε (α = 50/255 is projected)
        gap = float((candidate - images[0]).abs().max())
        assert abs(gap - 8 / 255) < 1e-6 or candidate.min() == 0 or candidate.max() == 1
        if plus is not None:  # the previous trial failed: this is its mirror image
            assert torch.equal(changed, (plus != best).nonzero())
            plus = None
        elif score >= best_score:
            plus = candidate
        if score < best_score:
            best, best_score = candidate, score


def _proxy(images: list[torch.Tensor], labels: torch.Tensor) -> torch.Tensor:
    from segtk.core import Proxy

    preds = TinySegmenter().predict(torch.stack(images))
    return Proxy(4)(preds, labels.expand_as(preds))
