"""Pictures people look at: coloured label maps and overlays."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from segtk.core.data import default_palette

IGNORE_COLOUR = np.array([0, 0, 0], dtype=np.uint8)


def colourise(label: np.ndarray, palette: np.ndarray, ignore_index: int = 255) -> np.ndarray:
    """Class ids -> RGB; ids outside the palette (void, ignore) are black."""
    pal = np.zeros((256, 3), dtype=np.uint8)
    pal[: len(palette)] = palette[:256]
    lab = np.clip(label, 0, 255).astype(np.int64)
    out = pal[lab]
    out[(label >= len(palette)) | (label == ignore_index) | (label < 0)] = IGNORE_COLOUR
    return out


def overlay(image: np.ndarray, label: np.ndarray, palette: np.ndarray, alpha: float = 0.5,
            ignore_index: int = 255) -> np.ndarray:
    """Blend the coloured label over the image so both stay visible."""
    colour = colourise(label, palette, ignore_index).astype(np.float32)
    mixed = (1 - alpha) * image.astype(np.float32) + alpha * colour
    return mixed.round().clip(0, 255).astype(np.uint8)


def amplify(clean: np.ndarray, adv: np.ndarray) -> np.ndarray:
    """The perturbation stretched to the full grey range, for looking at it."""
    diff = adv.astype(np.float32) - clean.astype(np.float32)
    scale = max(float(np.abs(diff).max()), 1.0)
    return ((diff / scale) * 127.5 + 127.5).round().clip(0, 255).astype(np.uint8)


def save_figure(fig, path) -> None:
    """Save a matplotlib figure atomically (temp file, then rename) and close it."""

    import matplotlib.pyplot as plt

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.png")
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    tmp.replace(path)


def voc_colormap(n: int = 256) -> np.ndarray:
    """The VOC colour map: index i's bits interleaved into R,G,B (0 black, 255 (224,224,192))."""
    # default_palette(n) gives the colours of indices 1..n (it skips black for overlays).
    return np.concatenate([np.zeros((1, 3), dtype=np.uint8), default_palette(n - 1)])[:n]
