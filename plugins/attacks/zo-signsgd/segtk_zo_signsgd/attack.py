"""ZO-SignSGD (Liu et al. 2019): signSGD on a forward-difference zeroth-order gradient estimate.

Each step queries the current iterate x and q probes x + η·u_j (q + 1 queries, all counted),
estimates ĝ = Σ (L(x+η·u_j) − L(x)) u_j (Liu et al. Eq. 3, up to a positive factor that the
sign ignores) and steps x ← Π_ε(x − lr·sign ĝ). The first step's base query is the clean image.

`config` picks the probes and the default η and lr: `blackboxbench` (the default) draws u_j
per-pixel Gaussian, η = lr = 2.55 on the 0–255 scale, as BlackboxBench's ℓ∞ ZO-SignSGD (the
benchmark the DLA paper ran its baselines in); `signhunter` draws u_j uniform on the unit
sphere, η = 25.5 (the probe's ℓ2 length), lr = 5.1, as the SignHunter benchmark's ℓ∞ ImageNet
configuration.

The result is the iterate x (`returns = "iterate"`), as Liu et al.'s algorithm and
BlackboxBench return it: the clean image until the first step is complete (q + 1 queries).
`returns=best` credits it instead with the best candidate it queried.

When fewer than q + 1 queries remain, the image queries the first of its already drawn
candidates and stops: a shorter budget is an exact prefix of a longer one (anytime).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from segtk.core import Attack, AttackParams, Oracle, SegtkError, project


@dataclass(frozen=True)
class Config:
    """A reference's probe distribution and its step sizes (0–255 scale)."""

    probes: str  # "gaussian": N(0,1) per value; "sphere": uniform on the unit ℓ2 sphere
    fd_eta: float  # η: per-value std (gaussian) or ℓ2 length (sphere) of each probe
    lr: float  # the ℓ∞ step


CONFIGS = {
    # SCLBD/BlackboxBench, query/config-jsons/cifar10_zosignsgd_linf_config.json (fd_eta, lr)
    "blackboxbench": Config("gaussian", 2.55, 2.55),
    # SignHunter benchmark, imagenet_zosignsgd_linf_config (fd_eta 0.1, lr 0.02 on [0,1])
    "signhunter": Config("sphere", 25.5, 5.1),
}


@dataclass
class ZOSignSGDParams(AttackParams):
    """Knobs of ZO-SignSGD; image-space magnitudes are on the 0–255 scale, like eps.

    config: whose ℓ∞ settings set the probes and the defaults of fd_eta and lr:
        blackboxbench: per-pixel Gaussian probes, fd_eta 2.55 (0.01 on [0,1]), lr 2.55, from
        BlackboxBench (SCLBD/BlackboxBench, query/attacks/score/zo_sign_sgd_attack.py with
        query/config-jsons/cifar10_zosignsgd_linf_config.json), where the DLA paper ran its
        baselines; signhunter: probes uniform on the unit ℓ2 sphere, fd_eta 25.5 (0.1 on
        [0,1]) as their ℓ2 length, lr 5.1 (0.02), from the SignHunter benchmark's
        imagenet_zosignsgd_linf_config (Al-Dujaili & O'Reilly 2020).
    q: probes per estimate (q + 1 queries per step): 10, DLA paper §4.1 (BlackboxBench's
        config has 30; the paper sets q = 10 for its baselines).
    fd_eta: the probe scale η (per-pixel std for blackboxbench, ℓ2 length for signhunter);
        none: the config's.
    lr: ℓ∞ step per estimate; none: the config's.
    budget_rule: exact (the default): every query counts and an image stops at its budget;
        reference: as BlackboxBench's loop counts (a step of q + 1 queries, the first one's base
        the clean image, that starts below the budget finishes), so an image may spend up to
        q more than its budget. Never a default; the spec names it in every table.
    """

    config: str = "blackboxbench"
    q: int = 10
    fd_eta: float | None = None
    lr: float | None = None
    budget_rule: str = "exact"

    def validate(self) -> None:
        super().validate()
        if self.budget_rule not in ("exact", "reference"):
            raise SegtkError(f"unknown budget_rule={self.budget_rule!r}",
                             hint="use exact (the default) or reference (BlackboxBench's count)")
        if self.config not in CONFIGS:
            raise SegtkError(f"unknown config={self.config!r}",
                             hint=f"use one of: {', '.join(CONFIGS)} (e.g. config=signhunter)")
        if self.q < 1:
            raise SegtkError(f"q must be at least 1, got {self.q}")
        for key in ("fd_eta", "lr"):
            value = getattr(self, key)
            if value is not None and not value > 0:
                raise SegtkError(f"{key} must be positive, got {value}",
                                 hint=f"e.g. {key}=2.55, or leave it out for the config's")

    def settings(self) -> tuple[str, float, float]:
        """(probes, η, lr) in effect: the config's, with fd_eta and lr where given."""
        c = CONFIGS[self.config]
        return (c.probes, c.fd_eta if self.fd_eta is None else self.fd_eta,
                c.lr if self.lr is None else self.lr)


@dataclass
class _State:
    x: torch.Tensor  # current iterate [3,H,W]
    directions: torch.Tensor | None = None  # this step's probe directions u_j [q,3,H,W]


class ZOSignSGDAttack(Attack[ZOSignSGDParams]):
    """ZO-SignSGD (Liu et al. 2019): q forward differences, signed projected step."""

    name = "zo-signsgd"
    Params = ZOSignSGDParams
    anytime = True
    returns = "iterate"
    declares_iterate = True

    def query_allowance(self, budget: int) -> int:
        return self.stepped_allowance(budget, self.params.budget_rule, self.params.q + 1, free=0)

    def attack(self, oracle: Oracle) -> None:
        p = self.params
        probes, fd_eta, lr = p.settings()
        eta, lr = fd_eta / 255, lr / 255
        states = [_State(oracle.clean[i].clone()) for i in range(oracle.batch_size)]
        while active := oracle.active().tolist():
            steps = [self._probes(states[i], oracle, i, probes, eta) for i in active]
            stepped = []
            for i, s in zip(active, oracle.query_each(active, steps)):
                if len(s) == p.q + 1:  # a partial step only happens when the budget is spent
                    st = states[i]
                    grad = ((s[1:] - s[0]).view(-1, 1, 1, 1) * st.directions).sum(0)
                    st.x = project(st.x - lr * grad.sign(), oracle.clean[i], oracle.eps_unit)
                    stepped.append(i)
            if stepped:
                oracle.set_iterate(torch.stack([states[i].x for i in stepped]), torch.tensor(stepped))

    def _probes(self, st: _State, oracle: Oracle, i: int, probes: str, eta: float) -> torch.Tensor:
        """This step's candidates for image i: x, then x + η·u_1 … x + η·u_q."""
        shape = (self.params.q, *st.x.shape)
        u = torch.randn(shape, generator=oracle.rngs[i]).to(st.x.device)
        if probes == "sphere":
            u = u / u.flatten(1).norm(dim=1).view(-1, 1, 1, 1)
        st.directions = u
        return torch.cat((st.x[None], st.x + eta * st.directions))
