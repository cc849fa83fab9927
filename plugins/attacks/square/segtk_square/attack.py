"""Square Attack, L∞ (Andriushchenko et al. 2020): random search over squares of ±ε colour.

Initialisation: vertical stripes, a ±ε value per channel and column. Each iteration picks a
square of side s = round(√(p·H·W)) at a uniformly random position, gives it a fresh ±ε colour
per channel (redrawn until the square actually changes) and keeps the result only when the
proxy drops. p starts at p_init and is halved at fixed fractions of the budget (the paper's
schedule, rescaled from 10 000 queries), so a run depends on its budget: not anytime.

Queries: the clean image (so a result is never worse than doing nothing), the stripes, then
one per iteration. As in the authors' code s is capped at min(H,W) − 1; unlike it, the square's
corner may also fall on the last row/column (their randint excludes it; the paper says uniform).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from segtk.core import Attack, AttackParams, Oracle, SegtkError, project

# p is halved when iteration / budget · 10 000 passes each of these (the paper's schedule).
_HALVINGS = (10, 50, 200, 500, 1000, 2000, 4000, 6000, 8000)


@dataclass
class SquareParams(AttackParams):
    """Knobs of the Square Attack.

    p_init: initial fraction of pixels a square covers: 0.05, DLA paper §4.1 (also the Square
        Attack paper's ℓ∞ default).
    """

    p_init: float = 0.05

    def validate(self) -> None:
        super().validate()
        if not 0 < self.p_init <= 1:
            raise SegtkError(f"p_init must be in (0, 1], got {self.p_init}")


def p_selection(p_init: float, iteration: int, budget: int) -> float:
    """The paper's piecewise-constant schedule of the square size, rescaled to `budget`."""
    it = int(iteration / budget * 10000)
    return p_init / 2 ** sum(it > h for h in _HALVINGS)


@dataclass
class _State:
    queried: int = 0  # queries made by this image
    best: torch.Tensor | None = None  # x_best [3,H,W]
    best_score: float = float("inf")


class SquareAttack(Attack[SquareParams]):
    """Square Attack L∞ (Andriushchenko et al. 2020): stripe init, random ±ε squares, p schedule."""

    name = "square"
    Params = SquareParams
    anytime = False

    def attack(self, oracle: Oracle) -> None:
        states = [_State() for _ in range(oracle.batch_size)]
        while active := oracle.active().tolist():
            steps = [self._propose(states[i], oracle, i) for i in active]
            owners = torch.tensor(active)
            candidates = project(torch.stack(steps), oracle.clean[owners], oracle.eps_unit)
            scores = oracle.query(candidates, owners).scores.tolist()
            for i, candidate, score in zip(active, candidates, scores):
                st = states[i]
                st.queried += 1
                # The stripes become x_best whatever their score, as in the paper.
                if st.queried == 2 or (st.queried > 2 and score < st.best_score):
                    st.best, st.best_score = candidate, score

    def _propose(self, st: _State, oracle: Oracle, i: int) -> torch.Tensor:
        """Image i's next candidate: clean, then the stripes, then x_best with one new square."""
        clean, eps, rng = oracle.clean[i], oracle.eps_unit, oracle.rngs[i]
        c, h, w = clean.shape
        if st.queried == 0:
            return clean
        if st.queried == 1:
            return clean + eps * _signs((c, 1, w), rng).to(clean.device)
        p = p_selection(self.params.p_init, st.queried - 2, oracle.budget)
        s = min(max(round(math.sqrt(p * h * w)), 1), max(min(h, w) - 1, 1))
        top = int(torch.randint(h - s + 1, (1,), generator=rng))
        left = int(torch.randint(w - s + 1, (1,), generator=rng))
        window = (slice(None), slice(top, top + s), slice(left, left + s))
        best = st.best
        assert best is not None, "the stripes (query 2) are x_best from then on"
        delta = best - clean
        for _ in range(100):  # redraw a colour that leaves the square as it is (wasted query)
            delta[window] = eps * _signs((c, 1, 1), rng).to(clean.device)
            if (project(clean + delta, clean, eps)[window] - best[window]).abs().max() >= 1e-7:
                break
        return clean + delta


def _signs(shape: tuple[int, ...], rng: torch.Generator) -> torch.Tensor:
    """Uniform ±1 of `shape` from the image's own random stream."""
    return torch.randint(0, 2, shape, generator=rng).float() * 2 - 1
