"""SimBA (Guo et al. 2019): try one orthonormal direction at a time, +α then −α, keep what helps.

Directions come from a random order over a fixed orthonormal basis: single pixels ("pixel",
SimBA) or the low-frequency corner of the image's 2-D DCT ("dct", SimBA-DCT). For direction q
the image tries x + αq; only if that does not lower the proxy does it try x − αq (the second
query is spent only then). Every candidate is projected to the ε-ball, so for pixels the
α = 50/255 step of the DLA paper lands on ±ε. The default is the pixel basis with α = 50 on
the 0–255 scale, as the DLA paper ran SimBA (BlackboxBench's SimpleAttack: a random order
over the C·H·W pixel values, delta = 50); BlackboxBench queries the unprojected x ± α and
projects only what it keeps, which would leave the ε-ball, so here the candidate itself is
projected before it is queried.

Query 1 is the clean image (SimBA's starting score). Each query depends only on earlier ones,
so the attack is anytime. When the basis is exhausted a new random order starts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from segtk.core import Attack, AttackParams, Oracle, SegtkError, project


@dataclass
class SimBAParams(AttackParams):
    """Knobs of SimBA; image-space magnitudes are on the 0–255 scale, like eps.

    basis: "pixel" (SimBA, as the DLA paper ran it in BlackboxBench) or "dct" (SimBA-DCT, the
        default of the SimBA authors' run_simba.py; at 480×360 a unit DCT vector times 50/255
        moves pixels by less than one grey level).
    step: α, the coefficient added along a unit basis vector: 50, DLA paper §4.1 ("magnitude
        of the perturbation delta 50", BlackboxBench's SimBA default); with ε = 8 a pixel
        step is projected to ±ε.
    freq_ratio: fraction of each image side kept as DCT frequencies: 1/8, Guo et al. 2019
        (28 of 224 frequencies, the authors' README for SimBA-DCT).
    """

    basis: str = "pixel"
    step: float = 50.0
    freq_ratio: float = 1 / 8

    def validate(self) -> None:
        super().validate()
        if self.basis not in ("pixel", "dct"):
            raise SegtkError(f"unknown basis {self.basis!r}", hint="use pixel or dct")
        if self.step <= 0:
            raise SegtkError(f"step must be positive, got {self.step}")
        if not 0 < self.freq_ratio <= 1:
            raise SegtkError(f"freq_ratio must be in (0, 1], got {self.freq_ratio}")


@dataclass
class _State:
    x: torch.Tensor  # current image [3,H,W]
    best: float = float("inf")  # its proxy; inf until the clean image is queried
    order: torch.Tensor | None = None  # random order of basis indices
    used: int = 0  # indices of `order` consumed
    direction: torch.Tensor | None = None  # αq of the pending trial
    negative: bool = False  # the pending trial is x − αq


class SimBAAttack(Attack[SimBAParams]):
    """SimBA (Guo et al. 2019): random orthonormal pixel/DCT directions, ±α, kept if the proxy drops."""

    name = "simba"
    Params = SimBAParams
    anytime = True

    def attack(self, oracle: Oracle) -> None:
        basis = _Basis(oracle.clean.shape[1:], self.params, oracle.clean.device)
        alpha = self.params.step / 255
        states = [_State(oracle.clean[i].clone()) for i in range(oracle.batch_size)]
        while active := oracle.active().tolist():
            steps = []
            for i in active:
                st = states[i]
                if st.best == float("inf"):
                    steps.append(st.x)
                    continue
                if not st.negative:
                    st.direction = alpha * basis.vector(
                        self._next_index(st, basis.size, oracle.rngs[i])
                    )
                steps.append(st.x - st.direction if st.negative else st.x + st.direction)
            owners = torch.tensor(active)
            candidates = project(torch.stack(steps), oracle.clean[owners], oracle.eps_unit)
            scores = oracle.query(candidates, owners).scores.tolist()
            for i, candidate, score in zip(active, candidates, scores):
                st = states[i]
                if score < st.best:  # always true for the clean image (best is inf)
                    st.x, st.best, st.negative = candidate, score, False
                else:
                    st.negative = not st.negative  # after +α try −α; after −α a new direction

    @staticmethod
    def _next_index(st: _State, size: int, rng: torch.Generator) -> int:
        if st.order is None or st.used == size:
            st.order, st.used = torch.randperm(size, generator=rng), 0
        st.used += 1
        return int(st.order[st.used - 1])


class _Basis:
    """Unit basis vectors by index: pixels (C·H·W of them) or low-frequency DCT (C·fh·fw)."""

    def __init__(self, shape: torch.Size, p: SimBAParams, device: torch.device) -> None:
        self.shape, self.device, self.pixel = shape, device, p.basis == "pixel"
        c, h, w = shape
        if self.pixel:
            self.size = c * h * w
        else:
            fh, fw = (max(1, round(n * p.freq_ratio)) for n in (h, w))
            self.rows, self.cols = _dct_basis(h, fh).to(device), _dct_basis(w, fw).to(device)
            self.size = c * fh * fw

    def vector(self, index: int) -> torch.Tensor:
        v = torch.zeros(self.shape, device=self.device)
        if self.pixel:
            v.view(-1)[index] = 1.0
        else:
            fh, fw = len(self.rows), len(self.cols)
            ch, u, k = index // (fh * fw), index // fw % fh, index % fw
            v[ch] = torch.outer(self.rows[u], self.cols[k])
        return v


def _dct_basis(n: int, k: int) -> torch.Tensor:
    """The first k orthonormal DCT-II basis vectors of length n, as rows [k, n]."""
    pos = torch.arange(n, dtype=torch.float64)
    freq = torch.arange(k, dtype=torch.float64)[:, None]
    rows = torch.cos(math.pi * (2 * pos + 1) * freq / (2 * n)) * math.sqrt(2 / n)
    rows[0] /= math.sqrt(2)
    return rows.float()
