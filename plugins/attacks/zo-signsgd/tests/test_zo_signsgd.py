"""ZO-SignSGD: the shared suite under both configs, the query pattern (q + 1 per step, the
base first), BlackboxBench's ℓ∞ settings as the default, and `config=signhunter` reproducing
the numbers segtk's earlier default (unit-sphere probes, μ = 25.5, lr = 5.1) gave."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from segtk.core import SegtkError
from segtk.testing import AttackSuite, TinySegmenter, toy_batch
from segtk.testing import RecordingSegmenter as Recorder
from segtk_zo_signsgd import ZOSignSGDAttack


class TestZOSignSGD(AttackSuite):
    attack_cls = ZOSignSGDAttack


class TestZOSignSGDSignHunter(AttackSuite):
    attack_cls = ZOSignSGDAttack
    params = {"config": "signhunter"}


def test_q_plus_one_queries_per_step_base_first() -> None:
    images, labels = toy_batch(1, 12, 12)
    model = Recorder()
    ZOSignSGDAttack(budget=2 * 5 + 3, q=4, returns="best").run(model, images, labels)
    assert [len(c) for c in model.batches] == [5, 5, 3]
    assert torch.equal(model.batches[0][0], images[0])  # the first base is the clean image


def probes_of(model: Recorder, q: int) -> torch.Tensor:
    """The first step's probes minus its base: [q, values]."""
    first = model.batches[0]
    assert len(first) == q + 1
    return (first[1:] - first[0]).flatten(1)


def test_default_probes_are_per_pixel_gaussian_with_blackboxbench_fd_eta() -> None:
    """BlackboxBench's ℓ∞ ZO-SignSGD adds fd_eta·N(0,1) to every value, fd_eta = 2.55 on 0–255
    (0.01 on [0,1]); ε = 255 and a mid-grey image keep the oracle's projection out of it."""
    images = torch.full((1, 3, 40, 40), 0.5)
    labels = TinySegmenter().predict(images)
    model = Recorder()
    ZOSignSGDAttack(budget=11, eps=255).run(model, images, labels)
    z = probes_of(model, 10) / 0.01
    assert z.mean().abs() < 0.05
    assert torch.allclose(z.std(dim=1), torch.ones(10), atol=0.05)  # each probe, per value
    within_one = (z.abs() < 1).double().mean()
    assert abs(float(within_one) - 0.6827) < 0.02  # Gaussian, not uniform or ±1
    norms = z.norm(dim=1) * 0.01
    assert norms.min() > 0.9 * 0.01 * 4800 ** 0.5  # ℓ2 length ≈ 0.01·√d, not 0.1


def test_signhunter_probes_are_unit_sphere_of_length_mu() -> None:
    images = torch.full((1, 3, 40, 40), 0.5)
    labels = TinySegmenter().predict(images)
    model = Recorder()
    ZOSignSGDAttack(budget=11, eps=255, config="signhunter").run(model, images, labels)
    assert torch.allclose(probes_of(model, 10).norm(dim=1), torch.full((10,), 25.5 / 255), atol=1e-5)


def test_fd_eta_overrides_the_configs_probe_scale() -> None:
    images = torch.full((1, 3, 40, 40), 0.5)
    labels = TinySegmenter().predict(images)
    model = Recorder()
    ZOSignSGDAttack(budget=11, eps=255, fd_eta=5.1).run(model, images, labels)
    assert torch.allclose(probes_of(model, 10).std(dim=1), torch.full((10,), 0.02), rtol=0.05)


@pytest.mark.parametrize(("config", "lr"), [("blackboxbench", 2.55), ("signhunter", 5.1)])
def test_each_step_moves_every_value_by_lr(config: str, lr: float) -> None:
    """One step from the clean image: x₁ = clean − lr·sign ĝ, lr = 2.55 (BlackboxBench's ℓ∞
    lr, 0.01 on [0,1]) by default; ε = 255 and mid-range values keep projection out of it."""
    images, labels = toy_batch(1, 16, 16, seed=3)
    images = 0.25 + 0.5 * images
    model = Recorder()
    result = ZOSignSGDAttack(budget=22, eps=255, config=config).run(model, images, labels)
    x1 = model.batches[1][0]  # the second step's base is the first iterate
    moved = (x1 - images[0]).abs()
    assert moved.amax() > 0, "the first step changed nothing: the toy proxy gave no signal"
    assert torch.allclose(moved[moved > 0], torch.tensor(lr / 255), atol=1e-6)
    assert result.queries.tolist() == [22]


def test_signhunter_config_reproduces_the_earlier_default() -> None:
    """Numbers of this run made with segtk's earlier default (unit-sphere probes, mu 25.5,
    lr 5.1) before BlackboxBench's settings became the default: `config=signhunter` must give
    them exactly, so the results documented under that name stay reproducible."""
    images, labels = toy_batch(2, 16, 16, seed=7)
    iterate = ZOSignSGDAttack(budget=40, seed=5, config="signhunter").run(TinySegmenter(), images, labels)
    best = ZOSignSGDAttack(budget=40, seed=5, config="signhunter", returns="best").run(
        TinySegmenter(), images, labels)
    assert iterate.scores.tolist() == pytest.approx([0.803892195224762, 0.7976270318031311], abs=1e-7)
    sums = iterate.images.double().sum((1, 2, 3)).tolist()
    assert sums == pytest.approx([412.159155, 371.066264], abs=2e-6)
    assert best.scores.tolist() == pytest.approx([0.7798405289649963, 0.7821103930473328], abs=1e-7)
    assert [[round(v, 6) for v in h] for h in best.history] == [
        [1.0, 0.948897, 0.942205, *[0.942205] * 7, 0.933786, 0.81171, *[0.805484] * 6, 0.79301,
         *[0.787754] * 3, *[0.784971] * 10, *[0.779841] * 8],
        [1.0, 0.975037, *[0.968114] * 2, *[0.952332] * 7, *[0.841762] * 3, *[0.828592] * 8,
         *[0.808403] * 3, 0.802272, *[0.796254] * 2, *[0.78211] * 12],
    ]
    assert [[round(v, 6) for v in h][9:12] for h in iterate.history] == [
        [1.0, 0.81171, 0.81171], [1.0, 0.841762, 0.841762]]  # the iterate after step 1 (query 11)


def test_default_differs_from_signhunter() -> None:
    images, labels = toy_batch(2, 16, 16, seed=7)
    default = ZOSignSGDAttack(budget=40, seed=5).run(TinySegmenter(), images, labels)
    old = ZOSignSGDAttack(budget=40, seed=5, config="signhunter").run(TinySegmenter(), images, labels)
    assert not torch.equal(default.images, old.images)


@pytest.mark.parametrize("bad", [{"config": "madry"}, {"fd_eta": 0.0}, {"lr": -1.0}, {"q": 0}])
def test_bad_settings_are_refused(bad: dict[str, Any]) -> None:
    with pytest.raises(SegtkError):
        ZOSignSGDAttack(**bad)
