"""Verified images: the oracle's fast path for candidates that differ from the last in a few lines.

`Oracle.query` checks every value of every candidate against the ε-ball and [0,1]. An attack
whose candidates differ from the last one in a few lines (DLA's and colour-stripes' flips,
colour-blocks' cells) should pay for those lines only, so each oracle has a `VerifiedImages`
(`oracle.verified`) that makes images it knows are in bounds (`project`, `vertex`), changes them
projecting only what it writes (`patch`, `flip`, `pin`) and queries them (`score`, `answer`)
after PyTorch's version counter shows that nothing else wrote to them. A write the counter
cannot see (through `.data` or `.numpy()`) is still caught: the oracle checks the values of
every batch it sends to the model, one clamp per batch.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import NamedTuple

import torch

from segtk.core._errors import SegtkError


class Answer(NamedTuple):
    """What the model answered to queried candidates (`Oracle.query`, `VerifiedImages.answer`)."""

    scores: torch.Tensor  # [N] proxy per queried candidate
    labels: torch.Tensor  # [N,H,W] the model's decision
    # [N,K,K+1] each decision's confusion against the labels the proxy scores against (what
    # the scores were computed from: an attack that weighs pixels by class need not count again)
    confusions: torch.Tensor | None = None


# ask(images [N,3,H,W], owners [N]) -> the model's answer, charged and recorded by the oracle
Ask = Callable[[torch.Tensor, torch.Tensor], Answer]


class Verified:
    """An image the oracle knows is inside image `owner`'s ε-ball and [0,1]: made by
    `VerifiedImages.project` or `.vertex` (built from the box's corners) and changed only by
    `.patch`, which projects just the lines it writes, or `.flip`, which swaps corners. Attacks
    may read `image`, never write it, and never construct a Verified themselves. A pinned image
    (`VerifiedImages.pin`) lives in the oracle's own batch tensor; its version and whether it
    holds only corners are kept there, per row."""

    __slots__ = ("_issuer", "_owner", "_image", "_version", "_pinned", "_corners")

    def __init__(self, issuer: VerifiedImages, owner: int, image: torch.Tensor,
                 pinned: bool = False, corners: bool = False) -> None:
        self._issuer, self._owner, self._image, self._pinned = issuer, owner, image, pinned
        self._version = image._version
        self._corners = corners  # every value is its lo or hi (unpinned images only)

    @property
    def owner(self) -> int:
        """The source image whose ε-ball this image is in."""
        return self._owner

    @property
    def image(self) -> torch.Tensor:
        """The image [3,H,W]: read it, never write it (the next query would be refused)."""
        return self._image

    @property
    def pinned(self) -> bool:
        """Whether it lives in the oracle's batch tensor (see `VerifiedImages.pin`)."""
        return self._pinned


class VerifiedImages:
    """One oracle's verified images (`oracle.verified`): made, changed and queried without a
    full-image projection or check. Bounds are the oracle's own box; queries are charged and
    recorded by the oracle exactly like `Oracle.query`."""

    def __init__(self, lo: torch.Tensor, hi: torch.Tensor, labels: torch.Tensor, classes: int,
                 ask: Ask) -> None:
        self._lo, self._hi = lo, hi  # the oracle's box, never shown to the attack
        self._labels, self._k = labels, classes  # the shape of an answer of no rows
        # Held weakly: the oracle owns this object, and a reference cycle would keep both, and
        # every image they hold, alive until a full garbage collection.
        self._ask = weakref.WeakMethod(ask)
        self._corner_bits: tuple[torch.Tensor, torch.Tensor] | None = None  # lo, lo ^ hi
        self._pinned: torch.Tensor | None = None  # [B,3,H,W]: one pinned image per source image
        self._pinned_version = 0
        self._pinned_corners = [False] * lo.shape[0]  # per pinned row: only corners?

    def project(self, image: int, x: torch.Tensor) -> Verified:
        """`x` ([3,H,W]) projected onto image `image`'s ε-ball and [0,1] (a new tensor)."""
        return Verified(self, image, torch.clamp(x, self._lo[image], self._hi[image]))

    def vertex(self, image: int, positive: torch.Tensor, pin: bool = False) -> Verified:
        """The ε-box corner of image `image`: clean + ε where `positive` (a bool tensor that
        broadcasts to [3,H,W]), clean − ε elsewhere, cut to [0,1]. In bounds by construction.
        With `pin`, it is built straight into the image's pinned row (see `pin`)."""
        if not pin:
            out = torch.empty_like(self._lo[image])
            return Verified(self, image, self._corner(image, positive, out), corners=True)
        row = self._corner(image, positive, self._pinned_row(image))
        self._pinned_version = self._pinned_batch()._version
        self._pinned_corners[image] = True
        return Verified(self, image, row, pinned=True)

    def _bits(self) -> tuple[torch.Tensor, torch.Tensor]:
        """lo's bit pattern and lo ^ hi as integers: a corner is lo ^ (lo ^ hi & mask), and
        x ^ (lo ^ hi) swaps a corner x for the opposite one. Allocated on first use."""
        if self._corner_bits is None:
            bits = {2: torch.int16, 4: torch.int32, 8: torch.int64}[self._lo.element_size()]
            lo = self._lo.view(bits)
            self._corner_bits = lo, lo ^ self._hi.view(bits)
        return self._corner_bits

    def _corner(self, image: int, positive: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        """`where(positive, hi, lo)` into `out`, as a select of bit patterns: bit-identical to
        `torch.where` by construction, and several times faster on CPU."""
        if positive.dtype != torch.bool:
            raise SegtkError(f"a corner mask must be a bool tensor, got {positive.dtype}",
                             hint="pass e.g. delta > 0")
        lo, swap = self._bits()
        target = out.view(lo.dtype)
        torch.mul(swap[image], positive, out=target)  # swap where True, 0 elsewhere: one pass
        target.bitwise_xor_(lo[image])
        return out

    def pin(self, v: Verified) -> Verified:
        """`v` copied into the oracle's own row for its source image, so that pinned
        candidates of consecutive images are queried as one slice of that batch tensor,
        without stacking (for attacks that patch one working image per source image, query
        after query). One row per image: pinning again replaces what `v.image` of an earlier
        pinned image shows; keep a candidate with `unpinned` first."""
        self._check(v)
        row = self._pinned_row(v.owner)
        corners = self._corners(v)
        row.copy_(v.image)
        self._pinned_version = self._pinned_batch()._version
        self._pinned_corners[v.owner] = corners
        return Verified(self, v.owner, row, pinned=True)

    def unpinned(self, v: Verified) -> Verified:
        """`v` itself, or a copy of a pinned `v` that later pins cannot overwrite."""
        self._check(v)
        if not v.pinned:
            return v
        return Verified(self, v.owner, v.image.clone(), corners=self._corners(v))

    def _corners(self, v: Verified) -> bool:
        return self._pinned_corners[v.owner] if v.pinned else v._corners

    def _pinned_batch(self) -> torch.Tensor:
        """The pinned rows, allocated on first use (most attacks never pin)."""
        if self._pinned is None:
            self._pinned = torch.empty_like(self._lo)
        return self._pinned

    def _pinned_row(self, image: int) -> torch.Tensor:
        return self._pinned_batch()[image]

    def patch(self, v: Verified, at: tuple, values: torch.Tensor) -> Callable[[], None]:
        """Write `values`, projected, into `v.image[at]` in place; returns the undo.

        Only the written part is projected, so a candidate that differs from the last one in
        a few lines costs a few lines, not a full image."""
        self._check(v)
        block = v.image[at]
        before = block.clone()
        torch.clamp(values, self._lo[v.owner][at], self._hi[v.owner][at], out=block)
        self._written(v, corners=False)

        def undo() -> None:
            self._check(v)
            block.copy_(before)
            self._written(v, corners=False)

        return undo

    def flip(self, v: Verified, at: tuple) -> Callable[[], None]:
        """Swap every value of `v.image[at]` (`at`: slices and ints) for the opposite corner of
        the box, in place; returns the undo (the same swap). `v` must hold only corners (made by
        `vertex`, changed only by `flip`). Bit-identical to patching clean[at] with the signs of
        its ±ε flipped, at one integer xor over the lines (DLA's and colour-stripes' flips)."""
        self._check(v)
        if not self._corners(v):
            raise SegtkError("flip needs an image of box corners",
                             hint="make it with oracle.verified.vertex; change it with flip, "
                                  "not patch")
        lo, swap = self._bits()
        block, bits = v.image[at].view(lo.dtype), swap[v.owner][at]

        def swap_corners() -> None:
            self._check(v)
            if not self._corners(v):  # a patch since: xor would leave the box
                raise SegtkError("flip undone after a patch of the same image",
                                 hint="undo patches and flips in reverse order")
            block.bitwise_xor_(bits)
            self._written(v)

        swap_corners()
        return swap_corners

    def _written(self, v: Verified, corners: bool = True) -> None:
        """Accept this object's own write to `v`; `corners=False`: it may no longer hold only
        corners."""
        if v.pinned:
            self._pinned_version = self._pinned_batch()._version
            self._pinned_corners[v.owner] &= corners
        else:
            v._version = v.image._version
            v._corners &= corners

    def _check(self, v: Verified) -> None:
        if v._issuer is not self:
            raise SegtkError("a verified image from another oracle (or made by hand)",
                             hint="make candidates with this oracle's verified.project, vertex "
                                  "or pin")
        expected = self._pinned_version if v.pinned else v._version
        if (self._pinned_batch() if v.pinned else v.image)._version != expected:
            raise SegtkError(
                "an attack wrote to a verified image outside the oracle",
                hint="change verified images only with oracle.verified.patch or flip",
            )

    def score(self, candidates: list[Verified]) -> list[float]:
        """One model call for verified candidates (each owner with a query left); proxies."""
        if not candidates:
            return []
        return self.answer(candidates).scores.tolist()

    def answer(self, candidates: list[Verified]) -> Answer:
        """`score` with the model's decisions too (for attacks that read the label map, e.g. to
        credit each region of a candidate with its own change)."""
        if not candidates:
            h, w = self._labels.shape[1:]
            return Answer(torch.empty(0), self._labels.new_empty((0, h, w)),
                          torch.empty(0, self._k, self._k + 1, dtype=torch.long))
        for v in candidates:
            self._check(v)
        owners = [v.owner for v in candidates]
        first, n = owners[0], len(owners)
        if all(v.pinned for v in candidates) and owners == list(range(first, first + n)):
            batch = self._pinned_batch()[first : first + n]  # a view: no copy
        elif n == 1:
            batch = candidates[0].image[None]
        else:
            batch = torch.stack([v.image for v in candidates])
        ask = self._ask()
        if ask is None:
            raise SegtkError("verified images queried after their oracle's attack ended",
                             hint="query only during Attack.attack, through its oracle")
        return ask(batch, torch.tensor(owners, dtype=torch.long))
