"""How much does segtk add on top of the model's forward pass during an attack?

Prints (a) segtk attack time per query / bare batched forward time per image, for batch 1
and batch 8, and (b) the speed-up of attacking 8 images together over one at a time.
Evaluation passes (clean and stored image, 2 per image) are inside the attack time.

    OMP_NUM_THREADS=1 python bench/attack_overhead.py [--model SPEC --data SPEC --images 8 --budget 50]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch

from segtk.jobs.attack import attack_dataset
from segtk.core.data import batch_tensors
from segtk.core.params import build_attack
from segtk.core.runs import RunDir
from segtk.core.specs import load_dataset, load_segmenter

SHARED = Path(__file__).resolve().parents[2] / "shared"


def bare_forward_per_image(model, images: torch.Tensor, batch: int, repeats: int) -> float:
    x = images[:batch]
    model.predict(x)  # warm-up
    start = time.perf_counter()
    for _ in range(repeats):
        model.predict(x)
    return (time.perf_counter() - start) / (repeats * batch)


def attack_per_query(model, data, budget: int, batch: int, save: bool) -> float:
    attack = build_attack("dla", budget=budget, eps=8, seed=0)
    with tempfile.TemporaryDirectory() as tmp:
        run = RunDir(tmp, {"bench": batch}, resume=False)
        start = time.perf_counter()
        summary = attack_dataset(attack, model, data, run, batch_size=batch, save_images=save)
        elapsed = time.perf_counter() - start
    queries = sum(r["queries"] for r in summary.records)
    return elapsed / queries


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=f"espnet:camvid={SHARED / 'models/espnet_camvid.safetensors'}")
    ap.add_argument("--data", default=f"camvid:{SHARED / 'data/camvid'}")
    ap.add_argument("--images", type=int, default=8)
    ap.add_argument("--budget", type=int, default=50)
    args = ap.parse_args()
    torch.set_num_threads(1)
    model = load_segmenter(args.model)
    data = load_dataset(args.data, limit=args.images)
    images, _ = batch_tensors([data[i] for i in range(len(data))], model.device)
    h, w = images.shape[-2:]
    print(f"model {args.model}\nimages {len(data)} at {w}x{h}, DLA budget {args.budget}, threads 1")
    per_query = {}
    for batch in (1, 8):
        bare = bare_forward_per_image(model, images, min(batch, len(data)), repeats=max(2, 16 // batch))
        per_query[batch] = attack_per_query(model, data, args.budget, batch, save=True)
        print(f"batch {batch}: bare forward {bare * 1e3:.1f} ms/image, segtk attack "
              f"{per_query[batch] * 1e3:.1f} ms/query -> overhead ratio {per_query[batch] / bare:.3f}")
    print(f"batched (8) vs one at a time: speed-up {per_query[1] / per_query[8]:.2f}x")


if __name__ == "__main__":
    main()
