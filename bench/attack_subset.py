"""Quick attack comparisons on a fixed CamVid val subset (the README's ablation rows).

One run per attack spec at BUDGET, with the dataset mIoU read off at 10 / 50 / 200 queries and
BUDGET (exact for `anytime` attacks; a budget-dependent one is run at BUDGET only). Every 13th val
image by default; `--start 20 --step 10` picks nine outside the first 20 (the tuning images),
`--start 20 --step 1 --limit 20` the next 20 consecutive frames (less seed noise). Seed 0:

    OMP_NUM_THREADS=1 python bench/attack_subset.py 200 colour-stripes colour-stripes:explore=6 dla
    OMP_NUM_THREADS=1 python bench/attack_subset.py 200 colour-blocks --start 20 --step 10 --cls sky
    OMP_NUM_THREADS=1 python bench/attack_subset.py 200 colour-blocks --start 20 --step 1 --limit 20
"""

from __future__ import annotations

import argparse
import time

from val_subset import add_subset_options, build_spec, class_index, load_subset

from segtk.core._metrics import iou_per_class, mean_iou
from segtk.jobs.attack import image_seed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("budget", type=int)
    parser.add_argument("specs", nargs="+", help="ATTACK[:key=value...]")
    add_subset_options(parser, start=0, step=13)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cls", help="also print this class's IoU at the last checkpoint (e.g. sky)")
    args = parser.parse_args()
    attacks = [build_spec(parser, spec, args.budget, 8, args.seed) for spec in args.specs]
    model, data, x, y = load_subset(args)
    cls = class_index(parser, data, args.cls) if args.cls else None
    checkpoints = tuple(sorted({c for c in (10, 50, 200) if c <= args.budget} | {args.budget}))
    for spec, attack in zip(args.specs, attacks):
        checkpoints_run = checkpoints if attack.anytime else (args.budget,)
        start = time.time()
        result = attack.run(model, x, y, seeds=[image_seed(args.seed, n) for n in data.names],
                            checkpoints=checkpoints_run, num_classes=len(data.classes),
                            ignore_index=data.ignore_index)
        cells = " ".join(f"@{c}: {100 * float(mean_iou(result.checkpoints[c].sum(0))):6.2f}"
                         for c in checkpoints_run)
        if cls is not None:
            last = result.checkpoints[checkpoints_run[-1]].sum(0)
            cells += f"  {args.cls} {100 * float(iou_per_class(last)[cls]):.1f}"
        print(f"{spec:40s} {len(data)} images  {cells}  ({time.time() - start:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
