"""colour-blocks: coloured ±ε blocks, each block credited with its own change of the decisions.

SignHunter, DLA and colour-stripes learn one bit per query: did flipping this block lower the
proxy? A segmenter answers with a whole label map, and a flip mostly changes the labels near
it. So here one query tries many blocks at once and each block is judged by the labels inside
it:

1. the clean query, then a uniform +ε start (or, with `explore` > 0, colour-stripes' random
   coloured stripe draws, the best of which is the start, even if it did not beat clean);
2. rounds over a grid of square cells, coarse to fine (`cells` along the shorter side, doubled
   every `rounds` rounds up to `finest`, then staying there). A round is one *trial* query: the
   kept signs with a random `rate` share of the cells (`fine_rate` on the finest grid; at
   least one) given a new colour (a random non-empty set of their channels flipped). A flipped
   cell whose value dropped is credited: the class-balanced count of its correctly labelled
   pixels, less `wrong_weight`·TP_c/U_c² for each pixel it shows as a wrong class c (from the
   kept labels: pushing pixels into a class the image still gets right, such as the sky,
   lowers that class's IoU); on the
   finest grid only cells that still hold a correctly labelled pixel are flipped (`live`: a cell
   with none has little left to lose, and its flip blurs its neighbours' credit). If some
   but not all flipped cells are credited, one more query *verifies* that mix; the kept signs
   become the best of the kept, the trial and the mix, by the proxy (a strict drop), so the
   proxy of the kept signs only falls. On the finer grids (at least `texture_from` cells) a
   `texture` share of the flipped cells becomes a grey texture (+ε on every channel here, -ε
   there) instead of a new colour: a checkerboard of `period`-px squares with one pixel of
   every square inverted (which one, and the polarity, drawn per trial; 2-px diagonal stripes
   are four of these eight). ESPNet CamVid's sky, which no uniform ±ε colour moves, gives way
   to them.

Nothing depends on the budget, so the first b queries of a long run are the b-query run
(`anytime`). Every value moves by exactly ±ε, like DLA and colour-stripes. Tuned on CamVid val
images outside the first 20 (README of this plugin)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from segtk.attackkit import CHANNELS, HORIZONTAL, stripe_count, stripe_draw, stripe_lines
from segtk.core import Attack, AttackParams, LabelConfusion, Oracle, SegtkError

FINE_RATE = 0.4


@dataclass
class ColourBlocksParams(AttackParams):
    """explore: random coloured stripe draws before the block rounds (colour-stripes'); 0: a
        uniform +ε start.
    width: stripe width of those draws, as a share of the shorter image side.
    cells: cells along the shorter side in the first round (the grid is of squares).
    finest: the most cells along the shorter side; the grid stops doubling there.
    rounds: trial rounds on a grid before it doubles.
    rate: share of the cells a trial gives a new colour while the grid is coarser than `finest`.
    fine_rate: that share once the grid is at its finest (fewer flips per trial there: fewer
        cells that change each other's labels, so the credit is surer).
    verify: query the mix of credited cells before keeping it (false: keep it unqueried, its
        labels pieced together from the trial's and the kept ones).
    texture: share of a trial's flipped cells set to a grey texture (a checkerboard of
        `period`-px squares with one pixel of each square inverted; +ε on every channel or -ε)
        instead of a new colour, on grids of `texture_from` cells or more (0: never).
    texture_from: the coarsest grid (cells along the shorter side) that gets textures.
    period: the textures' square size in pixels (2 matches a stride-2 first layer; 1 and 4
        were weaker on the tuning images).
    live: on the finest grid flip only cells holding a pixel the kept signs leave correctly
        labelled (false: any cell).
    wrong_weight: a cell's credit also counts the pixels it shows as a wrong class c, each as
        this times TP_c / U_c² (what one more such pixel takes from c's per-image IoU, from the
        kept labels): pushing pixels into a class the image still gets right, such as the sky,
        is credited too (0: only the correctly labelled pixels count).
    """

    explore: int = 0
    width: float = 0.045
    cells: int = 1
    finest: int = 16
    rounds: int = 4
    rate: float = 0.9
    fine_rate: float = FINE_RATE
    verify: bool = True
    texture: float = 0.25
    texture_from: int = 8
    period: int = 2
    live: bool = True
    wrong_weight: float = 1.0

    def validate(self) -> None:
        super().validate()
        if self.explore < 0:
            raise SegtkError(f"explore must be at least 0, got {self.explore}",
                             hint="e.g. --param explore=4 (random draws before the block rounds)")
        if not 0 < self.width <= 1:
            raise SegtkError(f"width must be in (0, 1], got {self.width}",
                             hint="it is a share of the shorter image side, e.g. --param width=0.045")
        if not 1 <= self.cells <= self.finest:
            raise SegtkError(f"need 1 <= cells <= finest, got cells={self.cells}, finest={self.finest}",
                             hint="e.g. --param cells=2 --param finest=16")
        if self.rounds < 1:
            raise SegtkError(f"rounds must be at least 1, got {self.rounds}", hint="e.g. --param rounds=4")
        if self.wrong_weight < 0:
            raise SegtkError(f"wrong_weight must be at least 0, got {self.wrong_weight}",
                             hint="e.g. --param wrong_weight=1 (0: credit from correct pixels only)")
        if not 0 <= self.texture <= 1:
            raise SegtkError(f"texture must be in [0, 1], got {self.texture}",
                             hint="e.g. --param texture=0.25 (0: uniform colours only)")
        if self.texture_from < 1 or self.period < 1:
            raise SegtkError(f"texture_from and period must be at least 1, got "
                             f"texture_from={self.texture_from}, period={self.period}",
                             hint="e.g. --param texture_from=8 --param period=2")
        for key in ("rate", "fine_rate"):
            if not 0 < getattr(self, key) <= 1:
                raise SegtkError(f"{key} must be in (0, 1], got {getattr(self, key)}",
                                 hint=f"e.g. --param {key}=0.5")


@dataclass
class _Signs:
    """A sign pattern (True: +ε) and what the model said about it."""

    positive: torch.Tensor  # bool [3,H,W]
    score: float = math.inf
    labels: torch.Tensor | None = None  # [H,W]


@dataclass
class _State:
    kept: _Signs | None = None
    trial: _Signs | None = None  # queried, waiting for its mix to be verified
    mix: _Signs | None = None  # the kept signs plus the trial's credited cells: query next
    rounds: int = 0  # trial rounds so far
    # the kept signs and grid size scored, with their pair values, value per cell and live cells
    scored: tuple[_Signs, int, torch.Tensor, torch.Tensor, torch.Tensor] | None = None


def cell_sums(values: torch.Tensor, size: int) -> torch.Tensor:
    """[H,W] -> [gh,gw] sums over square cells of `size` pixels (the last ones cut)."""
    h, w = values.shape
    padded = F.pad(values, (0, -w % size, 0, -h % size))
    gh, gw = padded.shape[0] // size, padded.shape[1] // size
    return padded.view(gh, size, gw, size).sum(dim=(1, 3))


def expand_cells(cells: torch.Tensor, size: int, height: int, width: int) -> torch.Tensor:
    """[..., gh, gw] -> [..., H, W]: each cell's value over its pixels."""
    return cells.repeat_interleave(size, dim=-2).repeat_interleave(size, dim=-1)[..., :height, :width]


def block_textures(height: int, width: int, period: int) -> torch.Tensor:
    """bool [2·period², H, W] (True: +ε): a checkerboard of `period`-px squares with the same
    one pixel of every square inverted, for each pixel of the square, then the same inverted.
    With period 2 the 2-px diagonal stripes are four of the eight (a stride-2 layer sees them
    as its own checkerboard)."""
    rows = torch.arange(height).view(height, 1)
    cols = torch.arange(width).view(1, width)
    checker = (rows // period + cols // period) % 2 == 1
    pixel = (rows % period) * period + cols % period  # which pixel of its square
    odd_one = torch.stack([pixel == k for k in range(period * period)])
    textures = checker ^ odd_one
    return torch.cat([textures, ~textures])


class ColourBlocks(Attack[ColourBlocksParams]):
    """Coloured ±ε blocks; one query tries many, each judged by the labels inside it."""

    name = "colour-blocks"
    Params = ColourBlocksParams
    anytime = True

    def attack(self, oracle: Oracle) -> None:
        b, _, h, w = oracle.clean.shape
        oracle.query(oracle.clean)  # first: with reference=prediction, it fills oracle.labels
        self._rows = [self._truth_rows(oracle, i) for i in range(b)]
        k, ignore = oracle.proxy.num_classes, oracle.proxy.ignore_index
        self._confusions = [LabelConfusion(oracle.labels[i : i + 1], k, ignore) for i in range(b)]
        self._textures = block_textures(h, w, self.params.period).to(oracle.clean.device)
        states = [_State() for _ in range(b)]
        t = 0
        while active := oracle.active().tolist():
            t += 1
            masks = [self._propose(states[i], oracle, i, t) for i in active]
            answer = oracle.verified.answer([oracle.verified.vertex(i, m, pin=True) for i, m in zip(active, masks)])
            for i, score, labels, mask in zip(active, answer.scores.tolist(), answer.labels, masks):
                self._learn(states[i], oracle, i, t, _Signs(mask, score, labels))

    def _propose(self, st: _State, oracle: Oracle, i: int, t: int) -> torch.Tensor:
        """Image i's next candidate as a bool [3,H,W] (+ε where True): a stripe draw, the
        uniform start, a mix to verify or a trial."""
        p = self.params
        _, _, h, w = oracle.clean.shape
        if t <= p.explore:
            k = t % 2
            stripes = stripe_count(h if k == HORIZONTAL else w, min(h, w), p.width)
            signs = stripe_draw(stripes, oracle.rngs[i], oracle.clean.device)
            return stripe_lines(signs, k, h, w).expand(CHANNELS, h, w) > 0
        if st.kept is None:  # no exploration: a uniform +ε is the start
            return torch.ones(CHANNELS, h, w, dtype=torch.bool, device=oracle.clean.device)
        if st.mix is not None:
            return st.mix.positive
        size = self._cell_size(st, h, w)
        gh, gw = math.ceil(h / size), math.ceil(w / size)
        rng = oracle.rngs[i]
        rate = p.fine_rate if self._cells(st) == p.finest else p.rate
        chosen = torch.rand(gh, gw, generator=rng) < rate
        live = self._score_kept(st, oracle, i, size)[2]
        if p.live and self._cells(st) == p.finest and bool(live.any()):
            chosen &= live.cpu()
        if not bool(chosen.any()):  # a trial that flips nothing would waste its query
            chosen.view(-1)[int(torch.randint(gh * gw, (1,), generator=rng))] = True
        colour = torch.randint(1, 2**CHANNELS, (gh, gw), generator=rng)  # a non-empty channel set
        bits = torch.stack([(colour >> c) & 1 for c in range(CHANNELS)]).bool() & chosen
        st.trial = _Signs(bits.to(oracle.clean.device))  # the flipped cells, until answered
        flip = expand_cells(st.trial.positive, size, h, w)
        signs = st.kept.positive ^ flip
        if p.texture > 0 and self._cells(st) >= p.texture_from:
            signs = self._textured(signs, chosen, size, rng)
        return signs

    def _textured(self, signs: torch.Tensor, chosen: torch.Tensor, size: int,
                  rng: torch.Generator) -> torch.Tensor:
        """`signs` with a `texture` share of the chosen cells set to one grey texture (drawn
        per trial from `block_textures`) instead of a new colour."""
        p = self.params
        _, h, w = signs.shape
        textured = chosen & (torch.rand(chosen.shape, generator=rng) < p.texture)
        pick = int(torch.randint(len(self._textures), (1,), generator=rng))
        cells = expand_cells(textured, size, h, w).to(signs.device)
        return torch.where(cells, self._textures[pick], signs)

    def _score_kept(self, st: _State, oracle: Oracle, i: int,
                    size: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The pair values of the kept labels, their value per cell and which cells hold a
        correctly labelled pixel; the kept signs often survive a round, so kept for the next."""
        if st.scored is not None and st.scored[0] is st.kept and st.scored[1] == size:
            return st.scored[2:]
        assert st.kept is not None and st.kept.labels is not None
        pairs = self._pairs(st.kept.labels, oracle, i)
        values = self._pair_values(self._confusions[i](st.kept.labels[None])[0])
        correct = values.clamp(min=0)  # only a correct pixel is worth more than 0
        scored = values, cell_sums(values[pairs], size), cell_sums(correct[pairs], size) > 0
        st.scored = (st.kept, size, *scored)
        return scored

    def _truth_rows(self, oracle: Oracle, i: int) -> torch.Tensor:
        """Per pixel, its true class times K+1 (ignored pixels: row K): adding a shown label (past
        the classes: column K) gives the pixel's (true, shown) pair as one index."""
        labels, k = oracle.labels[i], oracle.proxy.num_classes
        return torch.where(labels == oracle.proxy.ignore_index, k, labels) * (k + 1)

    def _pairs(self, labels: torch.Tensor, oracle: Oracle, i: int) -> torch.Tensor:
        return self._rows[i] + labels.clamp(max=oracle.proxy.num_classes)

    def _pair_values(self, conf: torch.Tensor) -> torch.Tensor:
        """[(K+1)²]: what a pixel adds to its cell's value, per (true, shown) pair of the labels
        whose confusion [K, K+1] is `conf`.
        Correctly shown class c: 1 / (pixels of c), a class-balanced count that tracks mIoU.
        Wrongly shown as c: -wrong_weight · TP_c / U_c², the first-order drop of c's per-image
        IoU. Ignored pixels and labels past the classes (a model's void): 0."""
        k = conf.shape[0]
        area = conf.sum(dim=1)
        values = torch.zeros(k + 1, k + 1, device=conf.device)
        if self.params.wrong_weight > 0:
            tp = conf.diagonal().float()
            union = (area + conf[:, :k].sum(dim=0)) - tp
            values[:k, :k] = -(self.params.wrong_weight * tp / union.clamp(min=1) ** 2)
        values[:k, :k].diagonal().copy_(1.0 / area.clamp(min=1).float())
        return values.flatten()

    def _learn(self, st: _State, oracle: Oracle, i: int, t: int, got: _Signs) -> None:
        """Fold one answer into image i's state."""
        p = self.params
        _, _, h, w = oracle.clean.shape
        if t <= p.explore or st.kept is None:
            if st.kept is None or got.score < st.kept.score:
                st.kept = got
            return
        kept, trial, scored = st.kept, st.trial, st.scored
        assert trial is not None and scored is not None
        assert kept.labels is not None and got.labels is not None
        if st.mix is not None:  # the verification: keep the best of kept, trial and mix
            st.kept = min((got, trial, kept), key=lambda s: s.score)
            st.trial, st.mix = None, None
            return
        size = self._cell_size(st, h, w)
        st.rounds += 1
        flipped = trial.positive.any(dim=0)  # a trial's `positive` holds its flipped cells
        st.trial = None
        _, _, values, before, _ = scored  # the kept signs' (the trial was built from them)
        after = cell_sums(values[self._pairs(got.labels, oracle, i)], size)
        credited = flipped & (after < before)
        if bool(credited.equal(flipped)) or not bool(credited.any()):
            if got.score < kept.score:
                st.kept = got
            return
        keep = expand_cells(credited, size, h, w)
        mix = _Signs(torch.where(keep, got.positive, kept.positive))
        if p.verify:
            st.trial, st.mix = got, mix
            return
        mix.labels = torch.where(keep[0], got.labels, kept.labels)
        mix.score = min(got.score, kept.score)
        st.kept = mix

    def _cells(self, st: _State) -> int:
        """Cells along the shorter side in the current round."""
        p = self.params
        return min(p.finest, p.cells * 2 ** (st.rounds // p.rounds))

    def _cell_size(self, st: _State, h: int, w: int) -> int:
        return math.ceil(min(h, w) / self._cells(st))
