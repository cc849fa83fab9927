"""colour-blocks: coloured ±ε blocks, each block credited with its own change of the decisions.

SignHunter, DLA and colour-stripes learn one bit per query: did flipping this block lower the
proxy? A segmenter answers with a whole label map, and a flip mostly changes the labels near
it. So here one query tries many blocks at once and each block is judged by the labels inside
it. Each image goes through four phases (`Phase`):

- EXPLORE (`explore` > 0): random coloured stripe draws; the best is the start, even if it did
  not beat the clean image.
- START (no exploration): a uniform +ε start.
- TRIAL: rounds over a grid of square cells, coarse to fine (`cells` along the shorter side,
  doubled every `rounds` rounds up to `finest`, then staying there). A trial query is the kept
  signs with a random `rate` share of the cells (`fine_rate` on the finest grid; at least one)
  given a new colour (a random non-empty set of their channels flipped); on the finer grids
  (at least `texture_from` cells) a `texture` share of those cells becomes a grey texture
  instead (`block_textures`). A flipped cell whose value dropped is credited: the
  class-balanced count of its correctly labelled pixels, less `wrong_weight`·TP_c/U_c² for each
  pixel it shows as a wrong class c (`pair_values`, from the kept labels). On the finest grid
  only cells that still hold a correctly labelled pixel are flipped (`live`).
- VERIFY: if some but not all flipped cells were credited, one more query tries that mix; the
  kept signs become the best of the kept, the trial and the mix by the proxy (a strict drop),
  so the proxy of the kept signs only falls. Then TRIAL again.

Nothing depends on the budget, so the first b queries of a long run are the b-query run
(`anytime`). Every value moves by exactly ±ε, like DLA and colour-stripes.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from enum import Enum

import torch
import torch.nn.functional as F

from segtk.attackkit import CHANNELS, HORIZONTAL, stripe_count, stripe_draw, stripe_lines
from segtk.core import Attack, AttackParams, LabelConfusion, Oracle, SegtkError

FINE_RATE = 0.4
# channel set k -> which channels it flips, bit c of k for channel c
COLOUR_BITS = torch.tensor([[(k >> c) & 1 for c in range(CHANNELS)] for k in range(2**CHANNELS)],
                           dtype=torch.bool)


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


class Phase(Enum):
    """What an image's next query is (see the module docstring)."""

    EXPLORE = "explore"
    START = "start"
    TRIAL = "trial"
    VERIFY = "verify"


@dataclass
class _Signs:
    """A sign pattern (True: +ε), what the model said about it (its labels and their
    confusion, as the oracle counted it) and, once read, the (true, shown) pair index of each
    of its pixels (`LabelConfusion.pairs`)."""

    positive: torch.Tensor  # bool [3,H,W]
    score: float = math.inf
    labels: torch.Tensor | None = None  # [H,W]
    confusion: torch.Tensor | None = None  # [K,K+1]
    pairs: torch.Tensor | None = None  # int32 [H·W]


@dataclass
class _Scored:
    """The kept signs read on one grid: what each pixel is worth and what each cell holds."""

    signs: _Signs  # the kept signs these were computed for
    size: int  # cell size in pixels
    values: torch.Tensor  # [(K+1)²] a pixel's value per (true, shown) pair (`pair_values`)
    pixels: torch.Tensor  # [H,W] each pixel's value under the kept labels
    cell_values: torch.Tensor  # [gh,gw] the kept labels' value per cell
    # bool [gh,gw] on the CPU: cells holding a correctly labelled pixel (read on the finest grid
    # only, so counted when first asked for: `_live`)
    live: torch.Tensor | None = None


@dataclass
class _Trial:
    """A trial round: which channels of which cells it recoloured, on the kept signs' grid."""

    cells: torch.Tensor  # bool [3,gh,gw] on the job's device
    flipped: torch.Tensor  # bool [gh,gw] on the CPU: cells with any channel recoloured
    scored: _Scored  # the kept signs it was built from
    answer: _Signs | None = None  # its query, once answered (while its mix is verified)


@dataclass
class _Image:
    """One image's search."""

    confusion: LabelConfusion  # against its labels: the kept labels' confusion and pair index
    phase: Phase
    draws: int = 0  # exploration draws so far
    rounds: int = 0  # trial rounds so far
    kept: _Signs | None = None
    trial: _Trial | None = None
    mix: _Signs | None = None  # the kept signs plus the trial's credited cells (VERIFY)
    scored: _Scored | None = None  # the kept signs' values, cached while they survive


def cell_sums(values: torch.Tensor, size: int) -> torch.Tensor:
    """[H,W] -> [gh,gw] sums over square cells of `size` pixels (the last ones cut)."""
    h, w = values.shape
    padded = F.pad(values, (0, -w % size, 0, -h % size))
    gh, gw = padded.shape[0] // size, padded.shape[1] // size
    return padded.view(gh, size, gw, size).sum(dim=(1, 3))


def expand_cells(cells: torch.Tensor, size: int, height: int, width: int) -> torch.Tensor:
    """[..., gh, gw] -> [..., H, W]: each cell's value over its pixels. One row of cells is
    widened first, then whole image rows are gathered from it (copies of contiguous rows: 4x
    faster than expanding both sides at once)."""
    *lead, gh, gw = cells.shape
    rows = cells[..., None].expand(*lead, gh, gw, size).reshape(*lead, gh, gw * size)[..., :width]
    return rows.index_select(-2, cell_rows(height, size, cells.device))


@functools.cache
def cell_rows(height: int, size: int, device: torch.device) -> torch.Tensor:
    """Each image row's row of cells (a handful of grids per run, asked for at every query)."""
    return torch.arange(height, device=device) // size


def select(mask: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """`torch.where(mask, a, b)` for bool tensors, in bit operations (many times faster)."""
    return b ^ ((a ^ b) & mask)


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


def pair_values(conf: torch.Tensor, wrong_weight: float) -> torch.Tensor:
    """[(K+1)²]: what a pixel adds to its cell's value, per (true, shown) pair of the labels
    whose confusion [K, K+1] is `conf`.
    Correctly shown class c: 1 / (pixels of c), a class-balanced count that tracks mIoU.
    Wrongly shown as c: -wrong_weight · TP_c / U_c², the first-order drop of c's per-image
    IoU. Ignored pixels and labels past the classes (a model's void): 0."""
    k = conf.shape[0]
    area = conf.sum(dim=1)
    values = torch.zeros(k + 1, k + 1, device=conf.device)
    if wrong_weight > 0:
        tp = conf.diagonal().float()
        union = (area + conf[:, :k].sum(dim=0)) - tp
        values[:k, :k] = -(wrong_weight * tp / union.clamp(min=1) ** 2)
    values[:k, :k].diagonal().copy_(1.0 / area.clamp(min=1).float())
    return values.flatten()


class ColourBlocks(Attack[ColourBlocksParams]):
    """Coloured ±ε blocks; one query tries many, each judged by the labels inside it."""

    name = "colour-blocks"
    Params = ColourBlocksParams
    anytime = True

    def attack(self, oracle: Oracle) -> None:
        oracle.query(oracle.clean)  # first: with reference=prediction, it fills oracle.labels
        run = _Run(self.params, oracle)
        while active := oracle.active().tolist():
            masks = [run.propose(i) for i in active]
            verified = oracle.verified
            answer = verified.answer([verified.vertex(i, m, pin=True) for i, m in zip(active, masks)])
            assert answer.confusions is not None
            for i, score, labels, conf, mask in zip(active, answer.scores.tolist(), answer.labels,
                                                    answer.confusions, masks):
                run.learn(i, _Signs(mask, score, labels, conf))


class _Run:
    """One batch's attack: each image's phase and signs, and what all images share."""

    def __init__(self, params: ColourBlocksParams, oracle: Oracle) -> None:
        b, _, self.height, self.width = oracle.clean.shape
        self.params, self.oracle, self.device = params, oracle, oracle.clean.device
        k, ignore = oracle.proxy.num_classes, oracle.proxy.ignore_index
        first = Phase.EXPLORE if params.explore > 0 else Phase.START
        self.images = [_Image(LabelConfusion(oracle.labels[i : i + 1], k, ignore), first)
                       for i in range(b)]
        self.textures = block_textures(self.height, self.width, params.period).to(self.device)

    def propose(self, i: int) -> torch.Tensor:
        """Image i's next candidate as a bool [3,H,W] (+ε where True), by its phase."""
        image = self.images[i]
        if image.phase is Phase.EXPLORE:
            return self._draw(image, self.oracle.rngs[i])
        if image.phase is Phase.START:
            return torch.ones(CHANNELS, self.height, self.width, dtype=torch.bool, device=self.device)
        if image.phase is Phase.VERIFY:
            assert image.mix is not None
            return image.mix.positive
        return self._trial(image, self.oracle.rngs[i])

    def learn(self, i: int, got: _Signs) -> None:
        """Fold image i's answer into its search, and move it to its next phase."""
        image = self.images[i]
        if image.phase is Phase.EXPLORE:
            self._keep_if_lower(image, got)
            if image.draws == self.params.explore:
                image.phase = Phase.TRIAL if image.kept is not None else Phase.START
        elif image.phase is Phase.START:
            self._keep_if_lower(image, got)
            image.phase = Phase.TRIAL
        elif image.phase is Phase.TRIAL:
            self._credit(image, got)
        else:
            self._verified(image, got)

    @staticmethod
    def _keep_if_lower(image: _Image, got: _Signs) -> None:
        if image.kept is None or got.score < image.kept.score:
            image.kept = got

    # EXPLORE

    def _draw(self, image: _Image, rng: torch.Generator) -> torch.Tensor:
        """A random coloured stripe pattern, alternating vertical and horizontal stripes."""
        h, w = self.height, self.width
        image.draws += 1
        k = image.draws % 2
        stripes = stripe_count(h if k == HORIZONTAL else w, min(h, w), self.params.width)
        signs = stripe_draw(stripes, rng, self.device)
        return stripe_lines(signs, k, h, w).expand(CHANNELS, h, w) > 0

    # TRIAL

    def _trial(self, image: _Image, rng: torch.Generator) -> torch.Tensor:
        """The kept signs with a share of the current grid's cells given a new colour (or a
        texture); the random draws come from the image's CPU generator."""
        p, h, w = self.params, self.height, self.width
        assert image.kept is not None
        cells = self._cells(image)
        size = math.ceil(min(h, w) / cells)
        gh, gw = math.ceil(h / size), math.ceil(w / size)
        chosen = torch.rand(gh, gw, generator=rng) < (p.fine_rate if cells == p.finest else p.rate)
        scored = self._score_kept(image, size)
        if p.live and cells == p.finest and bool((live := self._live(scored)).any()):
            chosen &= live
        if not bool(chosen.any()):  # a trial that flips nothing would waste its query
            chosen.view(-1)[int(torch.randint(gh * gw, (1,), generator=rng))] = True
        colour = torch.randint(1, 2**CHANNELS, (gh, gw), generator=rng)  # a non-empty channel set
        bits = COLOUR_BITS[colour].permute(2, 0, 1) & chosen
        image.trial = _Trial(bits.to(self.device), chosen, scored)  # every chosen cell flips
        signs = image.kept.positive ^ expand_cells(image.trial.cells, size, h, w)
        if p.texture > 0 and cells >= p.texture_from:
            signs = self._textured(signs, chosen, size, rng)
        return signs

    def _textured(self, signs: torch.Tensor, chosen: torch.Tensor, size: int,
                  rng: torch.Generator) -> torch.Tensor:
        """`signs` with a `texture` share of the chosen cells set to one grey texture (drawn
        per trial from `block_textures`) instead of a new colour."""
        textured = chosen & (torch.rand(chosen.shape, generator=rng) < self.params.texture)
        pick = int(torch.randint(len(self.textures), (1,), generator=rng))
        where = expand_cells(textured.to(self.device), size, self.height, self.width)
        return select(where, self.textures[pick], signs)

    def _credit(self, image: _Image, got: _Signs) -> None:
        """A trial's answer: credit each flipped cell whose value dropped; keep the trial if
        all or none were, else verify the mix of credited cells (or keep it unqueried)."""
        kept, trial = image.kept, image.trial
        assert kept is not None and kept.labels is not None and trial is not None
        image.rounds += 1
        image.trial = None
        scored = trial.scored
        after = cell_sums(self._pixel_values(image, got, scored.values), scored.size)
        credited = trial.flipped & (after < scored.cell_values).cpu()
        if bool(credited.equal(trial.flipped)) or not bool(credited.any()):
            self._keep_if_lower(image, got)
            return
        keep = expand_cells(credited.to(self.device), scored.size, self.height, self.width)
        mix = _Signs(select(keep, got.positive, kept.positive))
        if self.params.verify:
            trial.answer, image.mix, image.trial = got, mix, trial
            image.phase = Phase.VERIFY
            return
        assert got.labels is not None
        mix.labels = torch.where(keep, got.labels, kept.labels)
        mix.score = min(got.score, kept.score)
        image.kept = mix

    # VERIFY

    def _verified(self, image: _Image, got: _Signs) -> None:
        """The mix's answer: keep the best of the kept signs, the trial and the mix."""
        assert image.kept is not None and image.trial is not None and image.trial.answer is not None
        image.kept = min((got, image.trial.answer, image.kept), key=lambda s: s.score)
        image.trial, image.mix = None, None
        image.phase = Phase.TRIAL

    # the kept signs' values

    def _score_kept(self, image: _Image, size: int) -> _Scored:
        """The kept labels' pair values, their value per cell and which cells hold a correctly
        labelled pixel; the kept signs often survive a round, so cached for the next."""
        kept = image.kept
        if image.scored is not None and image.scored.signs is kept and image.scored.size == size:
            return image.scored
        assert kept is not None and kept.labels is not None
        if kept.confusion is None:  # an unverified mix: labels pieced together, never queried
            kept.confusion = image.confusion(kept.labels[None])[0]
        values = pair_values(kept.confusion, self.params.wrong_weight)
        pixels = self._pixel_values(image, kept, values)
        image.scored = _Scored(kept, size, values, pixels, cell_sums(pixels, size))
        return image.scored

    @staticmethod
    def _live(scored: _Scored) -> torch.Tensor:
        """Which cells hold a pixel the kept signs leave correctly labelled (only a correct
        pixel is worth more than 0)."""
        if scored.live is None:
            scored.live = (cell_sums(scored.pixels.clamp(min=0), scored.size) > 0).cpu()
        return scored.live

    def _pixel_values(self, image: _Image, signs: _Signs, values: torch.Tensor) -> torch.Tensor:
        """[H,W]: each pixel's value under `signs`' labels (its pair index read once)."""
        if signs.pairs is None:
            assert signs.labels is not None
            signs.pairs = image.confusion.pairs(signs.labels)
        return values.index_select(0, signs.pairs).view(self.height, self.width)

    def _cells(self, image: _Image) -> int:
        """Cells along the shorter side in the current round."""
        p = self.params
        return min(p.finest, p.cells * 2 ** (image.rounds // p.rounds))
