"""Random attack of the DLA paper, in two variants: the baseline every segmentation black-box
attack must beat.

`variant=eq2` (the default) is Eq. 2 as the paper prints it:

    x⁰ = x,   x^{t+1} = Π_ε(x_best + rand[−ε/16, +ε/16]),   kept only when the proxy drops.

Query 1 is the clean image itself (x⁰ = x, counted); every later query is one uniform step
around the best image so far.

`variant=released` is what the authors' released code (`random_attack.py`) runs: after the
clean query, a random walk that starts from a random ±ε vertex (one sign per value and
channel, never queried itself), adds U[−1, 1] noise clamped to ±ε/16 (on the [0,1] scale, so
nearly every value moves by exactly ε/16), clips to the ε-ball and [0,1] and queries the
result. When that scores worse than the best query so far, it queries the antithetic point
x − δ (one more query) and walks on from there whatever its score. The result is the best
query of the run (the reference reports the minimum over all its queries).

Both variants make one query at a time, each decided from earlier queries only, so the attack
is anytime; the antithetic query is a query like any other and is not made when the budget is
spent.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from segtk.core import Attack, AttackParams, Oracle, SegtkError, project, uniform_noise

VARIANTS = ("eq2", "released")


@dataclass
class RandomParams(AttackParams):
    """Knobs of the Random attack.

    variant: eq2 (the paper's Eq. 2: clean start, uniform steps around the best image, kept
        when the proxy drops) or released (the authors' random_attack.py: a random walk from a
        random ±ε vertex with an antithetic query after each failed step).
    noise_fraction: the step's bound as a fraction of ε. 1/16 is Eq. 2 of the DLA paper
        (rand[−ε/16, +ε/16]) and the released code's clamp.
    """

    variant: str = "eq2"
    noise_fraction: float = 1 / 16

    def validate(self) -> None:
        super().validate()
        if self.variant not in VARIANTS:
            raise SegtkError(f"unknown Random variant {self.variant!r}",
                             hint=f"use --param variant={'|'.join(VARIANTS)}")
        if not 0 < self.noise_fraction <= 2:
            raise SegtkError(f"noise_fraction must be in (0, 2], got {self.noise_fraction}")


class RandomAttack(Attack[RandomParams]):
    """Random search (DLA Eq. 2, or the authors' released random walk with antithetic steps)."""

    name = "random"
    Params = RandomParams
    anytime = True

    def attack(self, oracle: Oracle) -> None:
        if self.params.variant == "released":
            self._released(oracle)
        else:
            self._eq2(oracle)

    def _eq2(self, oracle: Oracle) -> None:
        """Eq. 2: uniform ±ε/16 steps around the best image, kept if the proxy drops."""
        half = self.params.noise_fraction * oracle.eps_unit
        best = oracle.clean.clone()
        best_score = [float("inf")] * oracle.batch_size  # inf: the clean image is not queried yet
        while active := oracle.active().tolist():
            steps = []
            for i in active:
                if best_score[i] == float("inf"):
                    steps.append(oracle.clean[i])
                else:
                    noise = uniform_noise(tuple(best[i].shape), half, oracle.rngs[i])
                    steps.append(best[i] + noise.to(best.device))
            owners = torch.tensor(active)
            candidates = project(torch.stack(steps), oracle.clean[owners], oracle.eps_unit)
            scores = oracle.query(candidates, owners).scores.tolist()
            for i, candidate, score in zip(active, candidates, scores):
                if score < best_score[i]:
                    best[i], best_score[i] = candidate, score

    def _released(self, oracle: Oracle) -> None:
        """The released code's walk: each image queries its clean image, then steps; a step
        that scores worse than its best query is followed by its antithetic query."""
        walks = [_Walk(oracle.clean[i], oracle.eps_unit, self.params.noise_fraction,
                       oracle.rngs[i]) for i in range(oracle.batch_size)]
        while active := oracle.active().tolist():
            owners = torch.tensor(active)
            wanted = torch.stack([walks[i].next_query() for i in active])
            candidates = project(wanted, oracle.clean[owners], oracle.eps_unit)
            scores = oracle.query(candidates, owners).scores.tolist()
            for i, candidate, score in zip(active, candidates, scores):
                walks[i].answered(candidate, score)


class _Walk:
    """One image's state in the released Random attack: where the walk is (δ from the clean
    image), the best score queried so far and, after a failed step, its antithetic query."""

    def __init__(self, clean: torch.Tensor, eps: float, fraction: float,
                 rng: torch.Generator) -> None:
        self.clean, self.eps, self.half, self.rng = clean, eps, fraction * eps, rng
        signs = torch.randint(0, 2, tuple(clean.shape), generator=rng).float() * 2 - 1
        self.delta = (signs * eps).to(clean.device, clean.dtype)  # the ±ε vertex, never queried
        self.best = float("inf")  # inf: the clean image is not queried yet
        self.step = torch.zeros_like(self.delta)  # δ of the last step, ε-clipped, before [0,1]
        self.antithetic: torch.Tensor | None = None  # the next query after a failed step

    def next_query(self) -> torch.Tensor:
        """The image to query next (the caller projects it onto the ε-ball and [0,1])."""
        if self.best == float("inf"):
            return self.clean
        if self.antithetic is not None:
            return self.antithetic
        noise = uniform_noise(tuple(self.clean.shape), 1.0, self.rng).clamp_(-self.half, self.half)
        self.step = (self.delta + noise.to(self.delta.device)).clamp_(-self.eps, self.eps)
        return self.clean + self.step

    def answered(self, candidate: torch.Tensor, score: float) -> None:
        """Take the proxy of the query `next_query` gave (`candidate`: it, as projected)."""
        if self.best == float("inf"):  # the clean query
            self.best = score
            return
        failed_step = self.antithetic is None and score > self.best
        self.antithetic = self.clean - self.step if failed_step else None
        self.delta = candidate - self.clean  # the walk goes on from the point just queried
        self.best = min(self.best, score)
