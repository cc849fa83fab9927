"""The augmenters on one CamVid train crop, each next to its label overlay (README picture).

    OMP_NUM_THREADS=1 python bench/augment_sheet.py [docs/images/augmenters.png]

A pixel-exact picture of label consistency: CutOut keeps the label under its hole (default
label=keep), CutMix's box brings its labels, AugMix and the edits change only colours.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch
from PIL import Image, ImageDraw

from segtk.core import AugmentContext, load_dataset
from segtk.core._build import build_augmenter
from segtk.core._data import default_palette
from segtk.imaging import overlay
from segtk.jobs.train_samples import resize_pair

ROOT = Path(__file__).resolve().parents[1]
SPECS = ["baseline", "cutout", "cutmix:p=1", "augmix", "edits:editor=color,values=red,p=1",
         "edits:editor=weather,values=fog,p=1"]


def main(out: Path) -> None:
    data = load_dataset(f"camvid:{ROOT.parent / 'shared/data/camvid'}", "train", 4)
    pairs = [resize_pair(data[i].image, data[i].label, (240, 180)) for i in (0, 3)]
    images = torch.stack([p[0] for p in pairs]).float() / 255
    labels = torch.stack([p[1] for p in pairs])
    palette = data.palette if data.palette is not None else default_palette(len(data.classes))
    rows = []
    for spec in SPECS:
        aug = build_augmenter(spec)
        out_images, out_labels = images, labels
        if aug is not None:
            aug.setup(AugmentContext(list(data.classes)))
            out_images, out_labels = aug(images, labels, torch.Generator().manual_seed(0))
        im = (out_images[0].permute(1, 2, 0).numpy() * 255).round().astype(np.uint8)
        row = Image.fromarray(np.concatenate([im, overlay(im, out_labels[0].numpy(), palette)], 1))
        ImageDraw.Draw(row).text((4, 4), spec.split(",p=")[0], fill=(255, 255, 0))
        rows.append(np.asarray(row))
    Image.fromarray(np.concatenate(rows, 0)).save(out, optimize=True)
    print(f"wrote {out}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs/images/augmenters.png")
