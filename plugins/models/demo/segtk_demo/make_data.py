"""Regenerate the shipped demo images and labels (deterministic: same seeds, same files).

    python -m segtk_demo.make_data [--out DIR]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from segtk.core import write_png
from segtk_demo.datasets import DATA_DIR, SHIPPED_SEEDS, scene_name
from segtk_demo.scenes import PALETTE, make_scene


def make_data(root: Path = DATA_DIR, seeds: tuple[int, ...] = SHIPPED_SEEDS) -> list[str]:
    """Write images/NAME.png (RGB) and labels/NAME.png (palette PNG of class ids)."""
    names = [scene_name(s) for s in seeds]
    for sub in ("images", "labels"):  # stale scenes from an older seed list would linger
        for old in (root / sub).glob("*.png"):
            if old.stem not in names:
                old.unlink()
    for seed, name in zip(seeds, names):
        image, label = make_scene(seed)
        write_png(root / "images" / f"{name}.png", image)
        write_png(root / "labels" / f"{name}.png", label, palette=PALETTE)
        for sub in ("images", "labels"):  # write_png's temp files are 0600; package data is not
            (root / sub / f"{name}.png").chmod(0o644)
    return names


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=DATA_DIR)
    args = ap.parse_args(argv)
    names = make_data(args.out)
    print(f"wrote {len(names)} scenes to {args.out}")


if __name__ == "__main__":
    main()
