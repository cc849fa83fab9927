"""segtk's attack kit: building blocks that several attacks share, for attack plugins to import.

Stripe attacks (DLA and its coloured variants) perturb every pixel by exactly ±ε, constant
along rows or columns; this kit holds their shared vocabulary:

- `HORIZONTAL`, `VERTICAL`: the stripe direction (one sign per row, or per column);
- `CHANNELS`: colour channels an independent sign may be drawn for;
- `stripe_count`, `stripe_draw`, `stripe_lines`: how many stripes a pattern has when a stripe
  is a share of the shorter image side, a random coloured pattern, and its per-line signs;
- `next_flip`: DLA's hierarchical calibration order — the whole image, halves, quarters, …
  single lines, then again — read off a cursor (any object with integer fields `level` and
  `block`, both starting at 0).

Like `segtk.core`, this is a door for plugins: a plugin imports these names from
`segtk.attackkit`, never from another plugin.
"""

from __future__ import annotations

import math
from typing import Protocol

import torch

__all__ = ["CHANNELS", "HORIZONTAL", "VERTICAL", "next_flip", "stripe_count", "stripe_draw",
           "stripe_lines"]

HORIZONTAL, VERTICAL = 1, 0  # k = t % 2 in DLA's Algorithm 1: 1 = one sign per row
CHANNELS = 3


class BlockCursor(Protocol):
    """Where hierarchical calibration is: level n (blocks of ceil(lines / 2^n) lines) and block
    i of that level. Any object with these two integer fields will do (start both at 0)."""

    level: int
    block: int


def next_flip(cursor: BlockCursor, lines: int) -> tuple[int, int]:
    """The next non-empty block [start, stop) of `lines` lines, advancing `cursor`: sizes
    ceil(lines/2^n) for n = 0..⌈log2 lines⌉, then from the whole image again (DLA, Algorithm 1,
    lines 12 and 19–25)."""
    last_level = math.ceil(math.log2(lines)) if lines > 1 else 0
    while True:
        size = math.ceil(lines / 2**cursor.level)
        start = cursor.block * size
        stop = min(start + size, lines)
        cursor.block += 1
        if cursor.block == 2**cursor.level:
            cursor.block, cursor.level = 0, cursor.level + 1
        if cursor.level == last_level + 1:
            cursor.block, cursor.level = 0, 0  # line 24: restart from the whole image
        if start < stop:
            return start, stop


def stripe_count(lines: int, shorter_side: int, width: float) -> int:
    """Signs along `lines` when a stripe is `width` × the shorter side (so patterns scale)."""
    return math.ceil(lines / max(1, round(width * shorter_side)))


def stripe_draw(stripes: int, rng: torch.Generator, device: torch.device) -> torch.Tensor:
    """A random coloured stripe pattern: [CHANNELS, stripes] of ±1 (float), drawn from `rng`
    on the CPU (the same draws on every device) and moved to `device`."""
    draw = torch.randint(0, 2, (CHANNELS, stripes), generator=rng)
    return (draw.float() * 2 - 1).to(device)


def stripe_lines(signs: torch.Tensor, direction: int, height: int, width: int) -> torch.Tensor:
    """[CHANNELS, stripes] signs -> per-line signs [CHANNELS,H,1] or [CHANNELS,1,W] (stripes of
    equal width, the last one cut), which broadcast to the image."""
    lines = height if direction == HORIZONTAL else width
    stripe = math.ceil(lines / signs.shape[1])
    signs = signs.repeat_interleave(stripe, dim=1)[:, :lines]
    return signs.view(CHANNELS, height, 1) if direction == HORIZONTAL else signs.view(CHANNELS, 1, width)
