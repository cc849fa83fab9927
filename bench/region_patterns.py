"""Can a ±ε pattern inside one class's region change that class? (A diagnostic for attacks.)

Decision-based attacks on ESPNet CamVid leave the sky standing (IoU above 80% after 200
queries) while gradients remove it. This applies fixed ±ε pattern families (uniform colours,
stripes, checkerboards, diagonals, random blocks) only on the pixels whose true label is
--cls, and prints that class's IoU over the images; with --white-box ATTACK it also splits a
white-box attack's perturbation into the part inside the region, the part outside it and the
region grown by a few pixels; with --attacked SPEC it also puts each pattern in the region of a
decision-based attack's images, in place of what the attack found there. It measures what
patterns can do, not an attack (no query budget for the patterns):

    OMP_NUM_THREADS=1 python bench/region_patterns.py --cls sky --start 20 --step 10 --white-box cospgd
    OMP_NUM_THREADS=1 python bench/region_patterns.py --cls sky --attacked colour-blocks --budget 200
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator

import torch
import torch.nn.functional as F
from val_subset import add_subset_options, build_spec, class_index, load_subset

from segtk.core import confusion
from segtk.core._metrics import iou_per_class
from segtk.jobs.attack import image_seed


def patterns(shape: tuple[int, ...], generator: torch.Generator) -> Iterator[tuple[str, torch.Tensor]]:
    """(name, signs in {-1, 0, 1} of shape [B,3,H,W]) for each pattern family."""
    b, _, h, w = shape
    yy, xx = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
    yield "uniform +eps", torch.ones(shape)
    yield "uniform -eps", -torch.ones(shape)
    yield "i.i.d. coloured", torch.randint(0, 2, shape, generator=generator).float() * 2 - 1
    waves = {"vertical stripes": xx, "horizontal stripes": yy, "diagonal stripes": xx + yy}
    colours = {"grey": (1.0, 1.0, 1.0), "red only": (1.0, 0.0, 0.0), "red vs green-blue": (1.0, -1.0, -1.0)}
    for period in (1, 2, 4, 8):
        for kind, coord in waves.items():
            for colour, rgb in colours.items():
                wave = (coord // period) % 2 * 2.0 - 1
                yield f"{kind} {period} px, {colour}", torch.tensor(rgb).view(1, 3, 1, 1) * wave
            if kind == "diagonal stripes" and period in (2, 4):  # the phase against a stride-2 layer
                shifted = ((coord + 1) // period) % 2 * 2.0 - 1
                yield f"{kind} {period} px, grey, shifted 1 px", shifted.expand(shape)
        checker = ((xx // period + yy // period) % 2) * 2.0 - 1
        yield f"checkerboard {period} px", checker.expand(shape)
    for size in (2, 4, 8, 16):
        draw = torch.randint(0, 2, (b, 3, h // size + 1, w // size + 1), generator=generator)
        blocks = (draw.float() * 2 - 1).repeat_interleave(size, 2).repeat_interleave(size, 3)
        yield f"random coloured blocks {size} px", blocks[..., :h, :w]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_subset_options(parser, start=20, step=10)
    parser.add_argument("--cls", default="sky", help="the class whose region is perturbed and scored")
    parser.add_argument("--eps", type=float, default=8, help="on the 0-255 scale")
    parser.add_argument("--white-box",
                        help="also split this white-box attack's perturbation (e.g. cospgd)")
    parser.add_argument("--iterations", type=int, default=50, help="the white-box attack's passes")
    parser.add_argument("--attacked", metavar="SPEC",
                        help="also put each pattern in the region of this attack's images, in place "
                             "of its perturbation there (e.g. colour-blocks)")
    parser.add_argument("--budget", type=int, default=200, help="queries of the --attacked attack")
    args = parser.parse_args()
    attacks = {spec: build_spec(parser, spec, budget, args.eps, seed=0)
               for spec, budget in ((args.attacked, args.budget), (args.white_box, args.iterations)) if spec}
    model, data, x, y = load_subset(args)
    c = class_index(parser, data, args.cls)
    region = (y == c).unsqueeze(1).float()
    eps = args.eps / 255

    def score(image: torch.Tensor, name: str) -> None:
        with torch.no_grad():
            pred = model.predict(image.clamp(0, 1))
        iou = iou_per_class(confusion(pred, y, len(data.classes), data.ignore_index).sum(0))[c]
        print(f"{name:45s} {args.cls} IoU {100 * float(iou):6.2f} %", flush=True)

    def attacked(spec: str) -> torch.Tensor:
        """The attack's perturbation of the images (seed 0)."""
        result = attacks[spec].run(model, x, y, seeds=[image_seed(0, n) for n in data.names],
                            num_classes=len(data.classes), ignore_index=data.ignore_index)
        return result.images - x

    print(f"{len(data)} images, {args.cls}: {100 * float(region.mean()):.1f}% of the pixels, eps {args.eps:g}/255")
    score(x, "clean")
    contexts = [("in the region", torch.zeros_like(x))]
    if args.attacked:
        delta = attacked(args.attacked)
        score(x + delta, f"{args.attacked} ({args.budget} queries)")
        score(x + delta * (1 - region), "its region clean")
        contexts.append(("in its region", delta * (1 - region)))
    for where, outside in contexts:
        for name, signs in patterns(tuple(x.shape), torch.Generator().manual_seed(0)):
            score(x + outside + eps * signs * region, f"{where}: {name}")
    if args.white_box:
        delta = attacked(args.white_box)
        score(x + delta, f"{args.white_box}, everywhere")
        score(x + delta * region, f"{args.white_box}, in the region only")
        score(x + delta * (1 - region), f"{args.white_box}, outside the region only")
        for grow in (4, 16, 32):
            grown = F.max_pool2d(region, 2 * grow + 1, 1, grow)
            score(x + delta * grown, f"{args.white_box}, in the region grown by {grow} px")


if __name__ == "__main__":
    main()
