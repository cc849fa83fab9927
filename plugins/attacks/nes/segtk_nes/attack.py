"""NES (Ilyas et al. 2018): estimate the proxy's gradient from Gaussian probes, take signed steps.

Each step draws q Gaussian directions δ and queries the antithetic probes x ± σδ (2q queries,
all counted, as BlackboxBench's NES counts them); the estimate ĝ = Σ (L(x+σδ) − L(x−σδ)) δ
drives a projected ℓ∞ step x ← Π_ε(x − lr·sign ĝ). The proxy is piecewise constant, so probes
that change no pixel give a zero estimate and no step.

The result is the iterate x (`returns = "iterate"`), as NES (Ilyas et al. 2018) and
BlackboxBench return it: the clean image until the first step is complete, so a budget below
1 + 2q queries leaves the image clean. `returns=best` credits it instead with the best probe it
queried. Query 1 is the clean image. When fewer than 2q queries remain, the image queries the
first of its already drawn probes and stops, so a shorter budget is an exact prefix of a
longer one (anytime).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from segtk.core import Attack, AttackParams, Oracle, SegtkError, project


@dataclass
class NESParams(AttackParams):
    """Knobs of NES; image-space magnitudes are on the 0–255 scale, like eps.

    q: Gaussian samples per gradient estimate, each queried as an antithetic pair x ± σδ, so a
        step costs 2q queries: 10, DLA paper §4.1, whose baselines ran in BlackboxBench, where
        NES's q is "number of noise samples per NES step" and a step counts 2·q queries.
    sigma: per-pixel std of the Gaussian probes: 2.55 = 0.01 on [0,1], BlackboxBench's NES
        config (fd_eta), which the DLA paper did not change.
    lr: ℓ∞ step per estimate: 2.55 = 0.01 on [0,1], BlackboxBench's NES config and Ilyas et
        al. 2018 (η = 0.01). Momentum and plateau schedule are left out, as in BlackboxBench.
    budget_rule: exact (the default): every query counts, the clean one included, and an image
        stops at its budget; reference: as BlackboxBench's loop counts (the clean query free, a
        step of 2q queries that starts below the budget finishes), so an image may spend up to
        2q more than its budget. Never a default; the spec names it in every table.
    """

    q: int = 10
    sigma: float = 2.55
    lr: float = 2.55
    budget_rule: str = "exact"

    def validate(self) -> None:
        super().validate()
        if self.budget_rule not in ("exact", "reference"):
            raise SegtkError(f"unknown budget_rule={self.budget_rule!r}",
                             hint="use exact (the default) or reference (BlackboxBench's count)")
        if self.q < 1:
            raise SegtkError(f"q must be at least 1 (Gaussian samples per step), got {self.q}",
                             hint="e.g. --param q=10 (each sample costs 2 queries)")
        if self.sigma <= 0 or self.lr <= 0:
            raise SegtkError(f"sigma and lr must be positive, got {self.sigma}, {self.lr}")


@dataclass
class _State:
    x: torch.Tensor  # current iterate [3,H,W]
    started: bool = False  # clean image queried
    noise: torch.Tensor | None = None  # this step's directions [q,3,H,W]


class NESAttack(Attack[NESParams]):
    """NES gradient estimation (Ilyas et al. 2018): q antithetic Gaussian pairs, signed PGD step."""

    name = "nes"
    Params = NESParams
    anytime = True
    returns = "iterate"
    declares_iterate = True

    def query_allowance(self, budget: int) -> int:
        return self.stepped_allowance(budget, self.params.budget_rule, 2 * self.params.q, free=1)

    def attack(self, oracle: Oracle) -> None:
        p = self.params
        sigma, lr = p.sigma / 255, p.lr / 255
        states = [_State(oracle.clean[i].clone()) for i in range(oracle.batch_size)]
        while active := oracle.active().tolist():
            steps = [self._probes(states[i], oracle, i, sigma) for i in active]
            stepped = []
            for i, s in zip(active, oracle.query_each(active, steps)):
                st = states[i]
                if not st.started:
                    st.started = True
                elif len(s) == 2 * p.q:  # a partial step only happens when the budget is spent
                    grad = ((s[0::2] - s[1::2]).view(-1, 1, 1, 1) * st.noise).sum(0)
                    st.x = project(st.x - lr * grad.sign(), oracle.clean[i], oracle.eps_unit)
                    stepped.append(i)
            if stepped:
                oracle.set_iterate(torch.stack([states[i].x for i in stepped]), torch.tensor(stepped))

    def _probes(self, st: _State, oracle: Oracle, i: int, sigma: float) -> torch.Tensor:
        """This step's candidates for image i: the clean image first, then x+σδ₁, x−σδ₁, …"""
        if not st.started:
            return oracle.clean[i][None]
        shape = (self.params.q, *st.x.shape)
        st.noise = torch.randn(shape, generator=oracle.rngs[i]).to(st.x.device)
        pairs = torch.stack((st.x + sigma * st.noise, st.x - sigma * st.noise), dim=1)
        return pairs.flatten(0, 1)
