"""Bandits_TD (Ilyas et al. 2019): a tiled gradient prior, learned online, drives signed steps.

The prior v lives on a coarse prior_size × prior_size grid per channel and is upsampled
(nearest, i.e. tiles) to the image. Each step draws Gaussian exploration noise u on that grid,
queries the two probes x + η·q/‖q‖₂ with q = up(v ± δu) (2 queries, all counted), turns their
proxy difference into a directional derivative d = ΔL/(η·δ), updates v with the
exponentiated-gradient (ℓ∞) step v ← EG(v, d·u, prior_lr) and moves the image:
x ← Π_ε(x + h·sign(up(v))). The loss maximised is −proxy. This is the ℓ∞ Bandits of
BlackboxBench, the benchmark the DLA paper ran its baselines in: u is not divided by √dim
(BlackboxBench leaves the paper's normalisation out) and η, h are on the 0–255 scale of its
configurations.

The result is the iterate x (`returns = "iterate"`), as Bandits and BlackboxBench return it:
the clean image until the first step is complete. `returns=best` credits it instead with the
best probe it queried. Query 1 is the clean image. With one query left, an image queries its
first probe and stops: a shorter budget is an exact prefix of a longer one (anytime).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from segtk.core import Attack, AttackParams, Oracle, SegtkError, project


@dataclass
class BanditsParams(AttackParams):
    """Knobs of Bandits_TD; image-space magnitudes are on the 0–255 scale, like eps.

    prior_size: side of the prior grid, upsampled to the image (tile = image side / 20):
        20, DLA paper §4.1 ("prior size 20") and BlackboxBench's ℓ∞ Bandits configuration
        (SCLBD/BlackboxBench, query/config-jsons/cifar10_bandit_linf_config.json: prior_size).
    exploration: δ, the exploration noise around the prior: 0.1, DLA paper §4.1 and the same
        BlackboxBench configuration (prior_exploration).
    fd_eta: η, ℓ2 length of each finite-difference probe and the derivative's divisor:
        2.55 = 0.01 on [0,1], BlackboxBench's ℓ∞ configuration (fd_eta), which the DLA paper
        does not set.
    prior_lr: learning rate of the prior's exponentiated-gradient step: 0.1, BlackboxBench's ℓ∞
        configuration (prior_lr).
    image_lr: h, the image's ℓ∞ step: 2.55 = 0.01 on [0,1], BlackboxBench's ℓ∞ configuration
        (lr) and Ilyas et al. 2019's released ℓ∞ setting alike.
    budget_rule: exact (the default): every query counts, the clean one included, and an image
        stops at its budget; reference: as BlackboxBench's loop counts (the clean query free, a
        step of 2 queries that starts below the budget finishes), so an image may spend one or
        two queries more than its budget. Never a default; the spec names it in every table.
    """

    prior_size: int = 20
    exploration: float = 0.1
    fd_eta: float = 2.55
    prior_lr: float = 0.1
    image_lr: float = 2.55
    budget_rule: str = "exact"

    def validate(self) -> None:
        super().validate()
        if self.budget_rule not in ("exact", "reference"):
            raise SegtkError(f"unknown budget_rule={self.budget_rule!r}",
                             hint="use exact (the default) or reference (BlackboxBench's count)")
        if self.prior_size < 1:
            raise SegtkError(f"prior_size must be at least 1, got {self.prior_size}")
        knobs = (self.exploration, self.fd_eta, self.prior_lr, self.image_lr)
        if min(knobs) <= 0:
            raise SegtkError(
                f"exploration, fd_eta, prior_lr and image_lr must be positive: {knobs}"
            )


@dataclass
class _State:
    x: torch.Tensor  # current iterate [3,H,W]
    prior: torch.Tensor  # v in (−1,1), [3,P,P]
    started: bool = False  # clean image queried
    noise: torch.Tensor | None = None  # this step's exploration noise u [3,P,P]


class BanditsAttack(Attack[BanditsParams]):
    """Bandits_TD (Ilyas et al. 2019): tiled prior learned by bandit feedback, 2 queries per step."""

    name = "bandits"
    Params = BanditsParams
    anytime = True
    returns = "iterate"
    declares_iterate = True

    def query_allowance(self, budget: int) -> int:
        return self.stepped_allowance(budget, self.params.budget_rule, 2, free=1)

    def attack(self, oracle: Oracle) -> None:
        p = self.params
        grid = (3, p.prior_size, p.prior_size)
        zeros = torch.zeros(grid, device=oracle.clean.device)
        states = [_State(oracle.clean[i].clone(), zeros.clone()) for i in range(oracle.batch_size)]
        while active := oracle.active().tolist():
            steps = [self._probes(states[i], oracle, i) for i in active]
            stepped = []
            for i, s in zip(active, oracle.query_each(active, steps)):
                st = states[i]
                if not st.started:
                    st.started = True
                elif len(s) == 2:  # a partial step only happens when the budget is spent
                    self._update(st, float(s[1] - s[0]), oracle, i)
                    stepped.append(i)
            if stepped:
                oracle.set_iterate(torch.stack([states[i].x for i in stepped]), torch.tensor(stepped))

    def _probes(self, st: _State, oracle: Oracle, i: int) -> torch.Tensor:
        """This step's candidates for image i: the clean image first, then x + η·q±/‖q±‖₂."""
        if not st.started:
            return oracle.clean[i][None]
        p = self.params
        st.noise = torch.randn(st.prior.shape, generator=oracle.rngs[i]).to(st.x.device)
        explore = p.exploration * st.noise
        q = _upsample(torch.stack((st.prior + explore, st.prior - explore)), st.x.shape[1:])
        q = q / q.flatten(1).norm(dim=1).clamp_min(1e-12).view(-1, 1, 1, 1)
        return st.x + p.fd_eta / 255 * q

    def _update(self, st: _State, gain: float, oracle: Oracle, i: int) -> None:
        """Bandit feedback: `gain` = L(q+) − L(q−) with L = −proxy (proxy(q−) − proxy(q+))."""
        p = self.params
        derivative = gain / (p.fd_eta * p.exploration)  # η on BlackboxBench's 0–255 scale
        assert st.noise is not None, "an update follows the step that drew its noise"
        # Exponentiated gradient on (v+1)/2 (the paper's ℓ∞ prior step) is tanh(atanh(v) + lr·g).
        v = torch.atanh(st.prior.clamp(-1 + 1e-6, 1 - 1e-6))
        st.prior = torch.tanh(v + p.prior_lr * derivative * st.noise)
        step = p.image_lr / 255 * _upsample(st.prior[None], st.x.shape[1:])[0].sign()
        st.x = project(st.x + step, oracle.clean[i], oracle.eps_unit)


def _upsample(grid: torch.Tensor, size: torch.Size) -> torch.Tensor:
    """Tile a [N,3,P,P] grid to [N,3,H,W] (nearest neighbour, as the paper's tiling prior)."""
    return F.interpolate(grid, size=tuple(size), mode="nearest")
