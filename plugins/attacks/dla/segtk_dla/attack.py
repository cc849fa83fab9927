"""Discrete Linear Attack (DLA), Algorithm 1 of "Delving into Decision-based Black-box Attacks
on Semantic Segmentation".

The perturbation is always ±ε, constant along rows (horizontal stripes) or columns (vertical
stripes) and identical across colour channels, so its state is one sign per row or column.
Exploration samples random stripe patterns, alternating direction, and keeps the best.
Calibration flips the sign of contiguous blocks of lines — the whole image, halves, quarters,
… single lines, then again from the whole image — keeping a flip only when the proxy drops.
(The official code's acceptance test is inverted and it always flips rows; we follow the
paper as written.)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from segtk.core.attack import Attack, AttackParams, Oracle

HORIZONTAL, VERTICAL = 1, 0  # k = t % 2 in Algorithm 1: 1 = one sign per row


@dataclass
class DLAParams(AttackParams):
    """exploration: share of the budget spent on stripe exploration (T/5 in the paper)."""

    exploration: float = 0.2

    def validate(self) -> None:
        super().validate()
        if not 0 <= self.exploration <= 1:
            raise ValueError(f"exploration must be in [0,1], got {self.exploration}")


@dataclass
class _State:
    """One image's search state: the kept stripe signs and the calibration cursor."""

    direction: int = HORIZONTAL
    signs: torch.Tensor | None = None  # kept perturbation: ±1 per line along `direction`
    best_candidate: tuple[float, int, torch.Tensor] | None = None  # best exploration draw
    improved: bool = False
    level: int = 0  # n: blocks of ceil(lines / 2^n) lines
    block: int = 0  # i: which block of the current level


def stripes(signs: torch.Tensor, direction: int, height: int, width: int) -> torch.Tensor:
    """±1 signs per line -> a [1,H,W] sign map (broadcast over colour channels)."""
    if direction == HORIZONTAL:
        return signs.view(1, height, 1).expand(1, height, width)
    return signs.view(1, 1, width).expand(1, height, width)


class DLA(Attack):
    """Discrete Linear Attack: ±ε stripe exploration, then hierarchical sign-flip calibration.

    Parameters: eps (0–255, default 8), budget (default 50; the clean query counts), seed,
    exploration (default 0.2 = the paper's T/5), proxy (miou | pacc).
    The exploration length depends on the budget, so runs with different budgets differ
    from their first queries on (`anytime = False`).
    """

    name = "dla"
    Params = DLAParams
    anytime = False

    def attack(self, oracle: Oracle) -> None:
        p = self.params
        clean = oracle.clean
        b, _, h, w = clean.shape
        explore_until = math.floor(p.exploration * p.budget)
        states = [_State() for _ in range(b)]

        # Line 1: l_min = L(x); the clean query is part of the budget.
        l_min = oracle.query(clean).scores.clone()

        for t in range(1, p.budget):
            active = oracle.active().tolist()
            if not active:
                return
            if t <= explore_until:
                k = t % 2
                n_lines = h if k == HORIZONTAL else w
                draws = [
                    torch.randint(0, 2, (n_lines,), generator=oracle.rngs[i]).float() * 2 - 1
                    for i in active
                ]
                deltas = [stripes(s, k, h, w) for s in draws]
                scores = self._query(oracle, active, deltas, p.eps_unit)
                for i, sign, score in zip(active, draws, scores.tolist()):
                    st = states[i]
                    if st.best_candidate is None or score < st.best_candidate[0]:
                        st.best_candidate = (score, k, sign)
                    if score < float(l_min[i]):  # line 7: keep only a drop
                        l_min[i], st.signs, st.direction, st.improved = score, sign, k, True
            else:
                flips = []
                for i in active:
                    st = states[i]
                    self._start_calibration(st, h)
                    flips.append(self._next_flip(st, h if st.direction == HORIZONTAL else w))
                candidates = []
                for i, (start, stop) in zip(active, flips):
                    sign = states[i].signs.clone()
                    sign[start:stop] *= -1
                    candidates.append(sign)
                deltas = [stripes(s, states[i].direction, h, w) for i, s in zip(active, candidates)]
                scores = self._query(oracle, active, deltas, p.eps_unit)
                for i, sign, score in zip(active, candidates, scores.tolist()):
                    if score < float(l_min[i]):  # line 14: keep the flip only if the proxy drops
                        l_min[i], states[i].signs = score, sign

    @staticmethod
    def _query(oracle: Oracle, owners: list[int], deltas: list[torch.Tensor], eps: float):
        candidates = [(oracle.clean[i] + eps * d)[None] for i, d in zip(owners, deltas)]
        return torch.cat(oracle.query_each(owners, candidates))

    @staticmethod
    def _start_calibration(st: _State, h: int) -> None:
        """Enter calibration. If no exploration draw beat the clean image, Algorithm 1 would
        flip a zero perturbation forever; we calibrate the best draw instead."""
        if st.signs is None:
            if st.best_candidate is None:  # budget too small for any exploration
                st.signs, st.direction = torch.ones(h), HORIZONTAL
            else:
                _, st.direction, st.signs = st.best_candidate

    @staticmethod
    def _next_flip(st: _State, lines: int) -> tuple[int, int]:
        """The next non-empty block (lines 12, 19–25): sizes ceil(lines/2^n), n = 0..⌈log2⌉."""
        last_level = math.ceil(math.log2(lines)) if lines > 1 else 0
        while True:
            size = math.ceil(lines / 2**st.level)
            start = st.block * size
            stop = min(start + size, lines)
            st.block += 1
            if st.block == 2**st.level:
                st.block, st.level = 0, st.level + 1
            if st.level == last_level + 1:
                st.block, st.level = 0, 0  # line 24: restart from the whole image
            if start < stop:
                return start, stop
