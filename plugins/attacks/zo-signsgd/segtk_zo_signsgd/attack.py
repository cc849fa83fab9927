"""ZO-SignSGD (Liu et al. 2019): signSGD on a forward-difference zeroth-order gradient estimate.

Each step queries the current iterate x and q probes x + μu_j, u_j uniform on the unit sphere
(q + 1 queries, all counted), estimates ĝ = Σ (L(x+μu_j) − L(x)) u_j (Liu et al. Eq. 3, up to a
positive factor that the sign ignores) and steps x ← Π_ε(x − lr·sign ĝ). The first step's base
query is the clean image.

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


@dataclass
class ZOSignSGDParams(AttackParams):
    """Knobs of ZO-SignSGD; image-space magnitudes are on the 0–255 scale, like eps.

    q: random directions per estimate (q + 1 queries per step): 10, DLA paper §4.1.
    mu: smoothing radius, the ℓ2 length of each probe: 25.5 = 0.1 on [0,1]; lr: ℓ∞ step:
        5.1 = 0.02 on [0,1]. Both from the ℓ∞ ImageNet configuration of the SignHunter
        benchmark (Al-Dujaili & O'Reilly 2020, imagenet_zosignsgd_linf_config: fd_eta 0.1,
        lr 0.02), the public ℓ∞ adaptation of Liu et al.'s attack; the paper itself gives no
        ℓ∞ image-attack setting.
    """

    q: int = 10
    mu: float = 25.5
    lr: float = 5.1

    def validate(self) -> None:
        super().validate()
        if self.q < 1:
            raise SegtkError(f"q must be at least 1, got {self.q}")
        if self.mu <= 0 or self.lr <= 0:
            raise SegtkError(f"mu and lr must be positive, got {self.mu}, {self.lr}")


@dataclass
class _State:
    x: torch.Tensor  # current iterate [3,H,W]
    directions: torch.Tensor | None = None  # this step's unit directions [q,3,H,W]


class ZOSignSGDAttack(Attack[ZOSignSGDParams]):
    """ZO-SignSGD (Liu et al. 2019): q forward differences on the unit sphere, signed step."""

    name = "zo-signsgd"
    Params = ZOSignSGDParams
    anytime = True
    returns = "iterate"
    declares_iterate = True

    def attack(self, oracle: Oracle) -> None:
        p = self.params
        mu, lr = p.mu / 255, p.lr / 255
        states = [_State(oracle.clean[i].clone()) for i in range(oracle.batch_size)]
        while active := oracle.active().tolist():
            steps = [self._probes(states[i], oracle, i, mu) for i in active]
            stepped = []
            for i, s in zip(active, oracle.query_each(active, steps)):
                if len(s) == p.q + 1:  # a partial step only happens when the budget is spent
                    st = states[i]
                    grad = ((s[1:] - s[0]).view(-1, 1, 1, 1) * st.directions).sum(0)
                    st.x = project(st.x - lr * grad.sign(), oracle.clean[i], oracle.eps_unit)
                    stepped.append(i)
            if stepped:
                oracle.set_iterate(torch.stack([states[i].x for i in stepped]), torch.tensor(stepped))

    def _probes(self, st: _State, oracle: Oracle, i: int, mu: float) -> torch.Tensor:
        """This step's candidates for image i: x, then x + μu_1 … x + μu_q."""
        shape = (self.params.q, *st.x.shape)
        u = torch.randn(shape, generator=oracle.rngs[i]).to(st.x.device)
        st.directions = u / u.flatten(1).norm(dim=1).view(-1, 1, 1, 1)
        return torch.cat((st.x[None], st.x + mu * st.directions))
