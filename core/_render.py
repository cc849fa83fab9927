"""Coloured label maps (segtk.imaging draws overlays with them)."""

from __future__ import annotations

import numpy as np

from segtk.core._data import default_palette

IGNORE_COLOUR = np.array([0, 0, 0], dtype=np.uint8)


def colourise(label: np.ndarray, palette: np.ndarray, ignore_index: int = 255) -> np.ndarray:
    """Class ids -> RGB; ids outside the palette (void, ignore, anything past 255) are black.

    One table lookup: row 0 for ids below 0, rows 1..256 for ids 0..255, row 257 above."""
    table = np.zeros((258, 3), dtype=np.uint8)
    n = min(len(palette), 256)
    table[1 : n + 1] = np.asarray(palette, dtype=np.uint8).reshape(-1, 3)[:n]
    if 0 <= ignore_index < 256:
        table[ignore_index + 1] = IGNORE_COLOUR
    rows = np.clip(np.asarray(label).astype(np.int64, copy=False), -1, 256)
    rows += 1
    return np.take(table, rows, axis=0)


def voc_colormap(n: int = 256) -> np.ndarray:
    """The VOC colour map: index i's bits interleaved into R,G,B (0 black, 255 (224,224,192))."""
    # default_palette(n) gives the colours of indices 1..n (it skips black for overlays).
    return np.concatenate([np.zeros((1, 3), dtype=np.uint8), default_palette(n - 1)])[:n]
