"""Per-class IoU of `segtk bench attacks` runs: which classes an attack leaves standing.

The dataset mIoU of a table cell averages eleven very different classes; this prints each
class's IoU (pooled over the run's images, like the table) per attack, ε and budget, and the
mean over all classes but the ones named with --apart (e.g. CamVid's sky), so two attacks can be
compared where they differ. Reads only the runs' results.jsonl; no model is loaded:

    python bench/per_class_iou.py runs/bench-attacks --classes camvid:../shared/data/camvid --apart sky
    python bench/per_class_iou.py RUN_A RUN_B --images-of RUN_B   # only the images both share
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path

import torch

from segtk.benchmarks.attacks import bench_records
from segtk.core import load_dataset
from segtk.core._metrics import iou_per_class
from segtk.storage.layout import RESULTS
from segtk.storage.runs import read_results

Row = tuple[str, float | None, str]  # attack spec, eps, budget ("clean" for the clean images)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", type=Path, help="segtk bench attacks output folders")
    parser.add_argument("--classes",
                        help="dataset spec whose class names head the columns (default: numbers)")
    parser.add_argument("--apart", default="",
                        help="comma-separated classes (names or numbers) left out of the 'rest' column")
    parser.add_argument("--images-of", type=Path, help="use only the images this run holds")
    args = parser.parse_args()
    keep = None
    if args.images_of is not None:
        lines = read_results(args.images_of / RESULTS, key="key").values()
        keep = {rec.image for rec in bench_records(lines, args.images_of)}
    totals: dict[Row, torch.Tensor] = {}
    images: dict[Row, set[str]] = defaultdict(set)
    seen: set[tuple[Row, str, int]] = set()  # a record in two runs (or clean in every one) once
    for run in args.runs:
        path = run / RESULTS
        for rec in bench_records(read_results(path, key="key").values(), path):
            if keep is not None and rec.image not in keep:
                continue
            for budget, counts in {"clean": rec.clean_confusion, **rec.confusions}.items():
                row = ("clean", None, "0") if budget == "clean" else (rec.attack, rec.eps, budget)
                once = (row, rec.image, 0 if budget == "clean" else rec.repeat)
                if once in seen:
                    continue
                seen.add(once)
                images[row].add(rec.image)
                totals[row] = totals.get(row, 0) + torch.tensor(counts, dtype=torch.float64)
    k = next(iter(totals.values())).shape[0]
    names = load_dataset(args.classes).classes if args.classes else [str(c) for c in range(k)]
    apart = {names.index(a) if a in names else int(a) for a in args.apart.split(",") if a}
    rest = [c for c in range(k) if c not in apart]
    print("attack | eps | budget | images | mIoU | " + " | ".join(names)
          + f" | rest ({len(rest)} classes)")
    for row in sorted(totals, key=lambda r: (r[0] != "clean", r[0], r[1] or 0, int(r[2]))):
        attack, eps, budget = row
        iou = 100 * iou_per_class(totals[row])
        per_class = " | ".join(f"{v:.1f}" for v in iou.tolist())
        print(f"{attack} | {eps if eps is not None else ''} | {budget if attack != 'clean' else ''}"
              f" | {len(images[row])} | {float(torch.nanmean(iou)):.2f} | {per_class}"
              f" | {float(torch.nanmean(iou[rest])):.2f}")


if __name__ == "__main__":
    main()
