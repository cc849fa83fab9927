"""Train the demo network on a stream of fresh procedural scenes, deterministically, on CPU.

    python -m segtk_demo.train --out segtk_demo/weights/demo.safetensors --steps 1800 --seed 0

Training scenes come from seeds >= scenes.TRAIN_SEED_BASE, which evaluation never uses, so the
reported mIoU is on scenes the network has never seen.
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.torch import save_file

from segtk.core import ConfusionAccumulator, to_tensor
from segtk_demo.model import DemoNet, padded_logits
from segtk_demo.scenes import CLASSES, TRAIN_SEED_BASE, make_scene

EVAL_SEED = 1000  # the fresh scenes the README's mIoU is measured on


def train_seed(run_seed: int, index: int) -> int:
    """The index-th training scene of run `run_seed`: always >= TRAIN_SEED_BASE."""
    return TRAIN_SEED_BASE + (run_seed << 24) + index


def batch(seeds: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    scenes = [make_scene(s) for s in seeds]
    images = to_tensor([im for im, _ in scenes])
    labels = torch.from_numpy(np.stack([lb for _, lb in scenes]))
    return images, labels


def class_weights(run_seed: int, n: int = 64, power: float = 0.25) -> torch.Tensor:
    """Mild inverse-frequency weights, so thin poles and people are not drowned by sky."""
    _, labels = batch([train_seed(run_seed, (1 << 23) + i) for i in range(n)])
    freq = torch.bincount(labels.reshape(-1), minlength=len(CLASSES)).double() + 1
    w = (freq / freq.sum()) ** -power
    return (w / w.mean()).float()


def evaluate(net: torch.nn.Module, n: int = 32, seed: int = EVAL_SEED) -> ConfusionAccumulator:
    """Dataset confusion on n fresh scenes (seeds seed..seed+n-1, never used in training)."""
    net.eval()
    acc = ConfusionAccumulator(len(CLASSES))
    with torch.inference_mode():
        for start in range(0, n, 8):
            images, labels = batch(list(range(seed + start, seed + min(start + 8, n))))
            acc.add(padded_logits(net, images).argmax(1), labels)
    return acc


def save(net: torch.nn.Module, out: Path, meta: dict[str, str]) -> None:

    out.parent.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().contiguous().clone() for k, v in net.state_dict().items()}
    save_file(state, str(out), metadata=meta)


def train(steps: int, seed: int, batch_size: int = 8, lr: float = 4e-3,
          log_every: int = 100) -> DemoNet:
    torch.manual_seed(seed)
    torch.use_deterministic_algorithms(True)
    net = DemoNet()
    weights = class_weights(seed)
    opt = torch.optim.AdamW(net.parameters(), lr=lr, weight_decay=1e-4)
    warmup = max(steps // 20, 1)

    def lr_at(step: int) -> float:  # linear warmup, cosine decay to 2% of the peak
        if step < warmup:
            return (step + 1) / warmup
        return 0.02 + 0.98 * 0.5 * (1 + math.cos(math.pi * (step - warmup) / max(steps - warmup, 1)))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_at)
    start, running = time.time(), 0.0
    for step in range(steps):
        net.train()
        images, labels = batch([train_seed(seed, step * batch_size + i) for i in range(batch_size)])
        loss = F.cross_entropy(net(images), labels, weight=weights)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        running += loss.item()
        if (step + 1) % log_every == 0:
            print(f"step {step + 1}/{steps}  loss {running / log_every:.4f}  "
                  f"{time.time() - start:.0f}s", flush=True)
            running = 0.0
    return net


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="where to write the .safetensors")
    ap.add_argument("--steps", type=int, default=1800)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--lr", type=float, default=4e-3)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (1 = reproducible, fast)")
    ap.add_argument("--eval", type=int, default=32, help="fresh scenes to report mIoU on")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    start = time.time()
    net = train(args.steps, args.seed, args.batch, args.lr)
    minutes = (time.time() - start) / 60
    acc = evaluate(net, args.eval)
    print(f"trained {args.steps} steps in {minutes:.1f} min; fresh-scene mIoU {acc.miou:.4f}")
    for name, iou in zip(CLASSES, acc.iou()):
        print(f"  {name:<11} {iou:.4f}")
    meta = {"steps": str(args.steps), "seed": str(args.seed), "batch": str(args.batch),
            "miou": f"{acc.miou:.4f}", "eval": f"{args.eval} scenes from seed {EVAL_SEED}"}
    save(net.eval(), args.out, meta)
    print(f"wrote {args.out} ({args.out.stat().st_size / 1e6:.2f} MB)")


if __name__ == "__main__":
    main()
