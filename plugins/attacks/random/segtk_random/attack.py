"""Random attack (DLA paper, Eq. 2): the baseline every segmentation black-box attack must beat.

    x⁰ = x,   x^{t+1} = Π_ε(x_best + rand[−ε/16, +ε/16]),   kept only when the proxy drops.

Query 1 is the clean image itself (x⁰ = x, counted); every later query is one uniform step
around the best image so far. One query per step, decided from earlier queries only, so the
attack is anytime.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from segtk.core import Attack, AttackParams, Oracle, SegtkError, project, uniform_noise


@dataclass
class RandomParams(AttackParams):
    """Knobs of the Random attack.

    noise_fraction: half-width of the uniform step as a fraction of ε. 1/16 is Eq. 2 of the DLA
        paper (rand[−ε/16, +ε/16]).
    """

    noise_fraction: float = 1 / 16

    def validate(self) -> None:
        super().validate()
        if not 0 < self.noise_fraction <= 2:
            raise SegtkError(f"noise_fraction must be in (0, 2], got {self.noise_fraction}")


class RandomAttack(Attack[RandomParams]):
    """Random search (DLA Eq. 2): uniform ±ε/16 steps around the best image, kept if the proxy drops."""

    name = "random"
    Params = RandomParams
    anytime = True

    def attack(self, oracle: Oracle) -> None:
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
