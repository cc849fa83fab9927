"""Discrete Linear Attack (DLA), Algorithm 1 of "Delving into Decision-based Black-box Attacks
on Semantic Segmentation".

The perturbation is always ±ε, constant along rows (horizontal stripes) or columns (vertical
stripes) and identical across colour channels, so its state is one sign per row or column.
Exploration samples random stripe patterns, alternating direction, and keeps the best.
Calibration flips the sign of contiguous blocks of lines — the whole image, halves, quarters,
… single lines, then again from the whole image — keeping a flip only when the proxy drops.
(The official code's acceptance test is inverted and it always flips rows; we follow the
paper as written.)

The paper's ablations are parameters whose defaults are the method above: `direction`
(Table 3's exploration: iterative, horizontal, vertical, or random = the Random attack's
noise), `calibration` (Table 3: flip, or random = the Random attack's update), and segtk's own
`values` ablation (discrete ±ε, or continuous values in [−ε, ε]; the paper's Table 1 compares
Random, NES and Discrete search, whose Discrete column is `direction=random, exploration=1`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from segtk.attackkit import HORIZONTAL, VERTICAL, next_flip
from segtk.core import Attack, AttackParams, Oracle, SegtkError, Verified, uniform_noise

DIRECTIONS = ("iterative", "horizontal", "vertical", "random")
CALIBRATIONS = ("flip", "random")
VALUES = ("discrete", "continuous")
RANDOM_STEP = 1 / 16  # the Random attack's step, DLA Eq. 2: rand[−ε/16, +ε/16]


@dataclass
class DLAParams(AttackParams):
    """exploration: share of the budget spent on stripe exploration (T/5 in the paper).
    direction: exploration noise (Table 3): iterative (alternating horizontal and vertical
        stripes), horizontal, vertical, or random (the Random attack's noise, not stripes).
    calibration: flip (sign flips of blocks of lines) or random (the Random attack's update).
    values: discrete (±ε, Eq. 3) or continuous (uniform in [−ε, ε]) exploration values (segtk's
        ablation; the paper's Table 1 compares Random, NES and Discrete search instead).
    """

    exploration: float = 0.2
    direction: str = "iterative"
    calibration: str = "flip"
    values: str = "discrete"

    def validate(self) -> None:
        super().validate()
        if not 0 <= self.exploration <= 1:
            raise SegtkError(f"exploration must be in [0,1], got {self.exploration}",
                             hint="it is a share of the budget, e.g. --param exploration=0.2")
        for key, choices in (("direction", DIRECTIONS), ("calibration", CALIBRATIONS),
                             ("values", VALUES)):
            if getattr(self, key) not in choices:
                raise SegtkError(f"unknown DLA {key} {getattr(self, key)!r}",
                                 hint=f"use --param {key}={'|'.join(choices)}")


@dataclass
class _Draw:
    """A candidate: its image (verified by the oracle), its perturbation δ (absolute units,
    broadcastable to [3,H,W]: [1,H,1] per row, [1,1,W] per column, [3,H,W] per value) and its
    flip direction d."""

    image: Verified
    delta: torch.Tensor
    direction: int


@dataclass
class _State:
    """One image's search state: the kept perturbation and the calibration cursor (a
    `segtk.attackkit.BlockCursor`)."""

    kept: _Draw | None = None  # δ̂ with the lowest proxy so far (line 8 / 15)
    best_draw: tuple[float, _Draw] | None = None  # best exploration draw, even if not a drop
    level: int = 0  # n: blocks of ceil(lines / 2^n) lines
    block: int = 0  # i: which block of the current level


class DLA(Attack[DLAParams]):
    """Discrete Linear Attack: ±ε stripe exploration, then hierarchical sign-flip calibration.

    Parameters: eps (0–255, default 8), budget (default 50; the clean query counts), seed,
    exploration (default 0.2 = the paper's T/5), proxy (miou | pacc), and the ablations of
    Tables 1 and 3: direction, calibration, values (see DLAParams).
    The exploration length depends on the budget, so runs with different budgets differ
    from their first queries on (`anytime = False`).
    """

    name = "dla"
    Params = DLAParams
    anytime = False

    def attack(self, oracle: Oracle) -> None:
        p = self.params
        explore_until = math.floor(p.exploration * p.budget)
        states = [_State() for _ in range(oracle.batch_size)]

        # Line 1: l_min = L(x); the clean query is part of the budget.
        l_min = oracle.query(oracle.clean).scores.tolist()

        for t in range(1, p.budget):
            active = oracle.active().tolist()
            if not active:
                return
            exploring = t <= explore_until
            k = {"horizontal": HORIZONTAL, "vertical": VERTICAL}.get(p.direction, t % 2)
            draws: list[_Draw] = []
            undo: list[Callable[[], None] | None] = []
            for i in active:
                if exploring:
                    draws.append(self._explore(oracle, i, states[i], k))
                    undo.append(None)
                else:
                    self._start_calibration(oracle, i, states[i])
                    draw, restore = self._calibrate(oracle, i, states[i])
                    draws.append(draw)
                    undo.append(restore)
            scores = oracle.verified.score([d.image for d in draws])
            for i, draw, restore, score in zip(active, draws, undo, scores):
                st = states[i]
                best = exploring and (st.best_draw is None or score < st.best_draw[0])
                drop = score < l_min[i]  # lines 7 and 14: keep only a drop of the proxy
                if exploring and (best or drop):  # the next draw reuses the pinned row
                    draw = _Draw(oracle.verified.unpinned(draw.image), draw.delta, draw.direction)
                if best:
                    st.best_draw = (score, draw)
                if drop:
                    l_min[i], st.kept = score, draw
                elif restore is not None:  # line 17: flip back
                    restore()

    def _explore(self, oracle: Oracle, i: int, st: _State, k: int) -> _Draw:
        """Line 6: a fresh stripe pattern along k, or a Random-attack draw (direction=random)."""
        p, rng, eps = self.params, oracle.rngs[i], oracle.eps_unit
        clean = oracle.clean[i]
        if p.direction == "random":
            if p.values == "discrete":  # fresh ±ε per value
                bits = torch.randint(0, 2, clean.shape, generator=rng).to(clean.device).bool()
                return _Draw(oracle.verified.vertex(i, bits, pin=True), (bits.float() * 2 - 1) * eps, k)
            base = st.kept.image.image if st.kept is not None else clean  # Eq. 2, from the best
            noise = uniform_noise(tuple(clean.shape), RANDOM_STEP * eps, rng).to(clean.device)
            image = oracle.verified.project(i, base + noise)
            return _Draw(image, image.image - clean, k)
        _, h, w = clean.shape
        n_lines = h if k == HORIZONTAL else w
        shape = (1, h, 1) if k == HORIZONTAL else (1, 1, w)
        if p.values == "discrete":
            signs = torch.randint(0, 2, (n_lines,), generator=rng).float() * 2 - 1
            delta = eps * signs.to(clean.device).view(shape)
            return _Draw(oracle.verified.vertex(i, delta > 0, pin=True), delta, k)
        values = torch.rand(n_lines, generator=rng) * 2 - 1
        delta = eps * values.to(clean.device).view(shape)
        return _Draw(oracle.verified.project(i, clean + delta), delta, k)

    def _calibrate(self, oracle: Oracle, i: int,
                   st: _State) -> tuple[_Draw, Callable[[], None] | None]:
        """Lines 12–13: flip the next block of the kept δ̂ (or take a Random-attack step from it).

        A flip rewrites only the flipped lines of the kept image, in place (no full-image copy
        per query); the returned callable puts them back if the flip is not kept.
        """
        kept, clean = st.kept, oracle.clean[i]
        assert kept is not None, "_start_calibration keeps a draw before any calibration step"
        if self.params.calibration == "random":
            noise = uniform_noise(tuple(clean.shape), RANDOM_STEP * oracle.eps_unit,
                                  oracle.rngs[i]).to(clean.device)
            image = oracle.verified.project(i, kept.image.image + noise)
            return _Draw(image, image.image - clean, kept.direction), None
        d = kept.direction
        start, stop = next_flip(st, clean.shape[1 if d == HORIZONTAL else 2])
        at = (..., slice(start, stop), slice(None)) if d == HORIZONTAL else (..., slice(start, stop))
        delta = kept.delta.clone()
        flipped = delta[at].neg_()
        if self.params.values == "discrete":  # δ is ±ε: the image is box corners, swap them
            undo = oracle.verified.flip(kept.image, at)
        else:
            undo = oracle.verified.patch(kept.image, at, clean[at] + flipped)
        return _Draw(kept.image, delta, d), undo

    def _start_calibration(self, oracle: Oracle, i: int, st: _State) -> None:
        """Enter calibration. If no exploration draw beat the clean image, Algorithm 1 would
        flip a zero perturbation forever; we calibrate the best draw instead. (The Random
        attack's update needs no such help: it starts from the clean image, δ̂ = 0.)
        Flips patch the kept image pinned in the oracle's batch tensor (no copy per query)."""
        if self.params.calibration == "random":
            if st.kept is None:
                clean = oracle.clean[i]
                st.kept = _Draw(oracle.verified.project(i, clean), torch.zeros_like(clean), HORIZONTAL)
            return
        if st.kept is not None and st.kept.image.pinned:
            return
        kept = st.kept or (st.best_draw[1] if st.best_draw else None)
        if kept is None:  # budget too small for any exploration: a uniform +ε, flipped by rows
            h = oracle.clean.shape[2]
            delta = oracle.eps_unit * torch.ones(h, device=oracle.clean.device).view(1, h, 1)
            kept = _Draw(oracle.verified.vertex(i, delta > 0), delta, HORIZONTAL)
        st.kept = _Draw(oracle.verified.pin(kept.image), kept.delta, kept.direction)
