"""Visibility of the adversarial images a `segtk bench attacks` run stored for its contact sheet.

The bench keeps repeat 0's 8-bit adversarial PNGs under OUT/sheet/ATTACK/BUDGET_IMAGE.png.
This re-measures them with the current `segtk.benchmarks.visibility` (e.g. the OKLab colour
difference, for runs recorded before it existed) and prints one row per attack:

    python bench/sheet_visibility.py OUT --data camvid:../shared/data/camvid --budget 200
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from segtk.benchmarks.visibility import visibility
from segtk.core import load_dataset, read_image


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path, help="the bench's --out folder")
    parser.add_argument("--data", required=True, help="the bench's --data spec")
    parser.add_argument("--split", default=None)
    parser.add_argument("--budget", type=int, required=True)
    args = parser.parse_args()
    data = load_dataset(args.data, args.split)
    clean = {name: data[i].image for i, name in enumerate(data.names)}
    print("attack,images,psnr_db,ssim,changed_pct,delta_e_oklab,delta_chroma_oklab")
    for folder in sorted(p for p in (args.out / "sheet").iterdir() if p.is_dir()):
        rows = []
        for name, image in clean.items():
            path = folder / f"{args.budget}_{name}.png"
            if path.exists():
                rows.append(visibility(image, read_image(path)))
        if rows:
            m = {key: statistics.fmean(r[key] for r in rows) for key in rows[0]}
            print(f"{folder.name},{len(rows)},{m['psnr']:.2f},{m['ssim']:.4f},{100 * m['changed']:.2f},"
                  f"{m['delta_e']:.3f},{m['delta_chroma']:.3f}")


if __name__ == "__main__":
    main()
