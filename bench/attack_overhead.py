"""How much does segtk itself cost per query, next to the model's forward pass?

Two measurements, on the same val images (480×360 CamVid by default), one CPU thread:

1. segtk's own cost: each attack against a near-zero-cost segmenter (labels computed from the
   green channel, so the proxy still moves and every bookkeeping path runs). Printed per query
   after subtracting that segmenter's own time, for the attack loop alone (`Attack.run`: the
   candidates, the ε/[0,1] check, the counter, the proxy, the history and checkpoints) and for
   the whole `segtk attack` job (plus quantising, the evaluation pass, the confusion and three
   PNG writes per image; "job - loop" is that per-image part). Best of `--repeats`, since the
   machine may be shared.
2. The overhead ratio on the real model, twice: `segtk attack` time per query / forward time
   per image (the evaluation pass of the stored image, one forward per image, is overhead
   here: 2% at 50 queries), and the job's time / the time spent in all its forward passes
   (segtk's own cost only). The forward time is measured inside the same job (every `predict`
   call is timed), so a machine shared with other work slows both sides alike; a separate
   bare-forward timing is printed next to it.

With `--size WxH` the images are resized first (bilinear; labels nearest), e.g. 2048x1024 for a
Cityscapes frame: each segtk-only row then also says ms per query per megapixel, so how the cost
grows with the image reads off directly. A last segtk-only row, "oracle alone", is an attack
that does nothing but query ε-box corners the way colour-blocks does: the oracle's own share
(the per-batch bounds check, the corner build, the proxy, the counter and the history).

Times are CPU time of this process (`time.process_time`): waits for the disk (fsync of the
stored PNGs and results) are not included. With `--device cuda` (the model, the images and every
tensor of the job on the GPU) they are wall-clock times after `torch.cuda.synchronize()`, since
the GPU runs asynchronously and its work is no CPU time.

    OMP_NUM_THREADS=1 python bench/attack_overhead.py [--model SPEC --data SPEC --images 8
        --budget 50 --attacks dla,colour-stripes,colour-blocks --size 2048x1024 --repeats 3
        --skip-model --device cuda]
"""

from __future__ import annotations

import argparse
import copy
import functools
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from segtk.core import (
    Attack,
    AttackParams,
    Dataset,
    Item,
    Oracle,
    Segmenter,
    SegtkError,
    build,
    load_dataset,
    load_segmenter,
)
from segtk.core._device import resolve_device
from segtk.jobs.attack import attack_dataset, image_seed
from segtk.jobs.batching import batch_tensors
from segtk.storage.runs import RunDir

SHARED = Path(__file__).resolve().parents[2] / "shared"


def cpu_clock() -> float:
    return time.process_time()


def gpu_clock() -> float:
    torch.cuda.synchronize()  # the GPU's queued work is part of what is timed
    return time.perf_counter()


CLOCK = cpu_clock  # gpu_clock with --device cuda (see main)


class GreenSegmenter(Segmenter):
    """Near-zero-cost model: the green channel quantised into the dataset's classes."""

    name = "green"

    def __init__(self, classes: list[str], device: torch.device | None = None) -> None:
        self.classes = list(classes)
        self.scale = len(classes) - 1e-3
        self.device = device or torch.device("cpu")

    def predict(self, images: torch.Tensor) -> torch.Tensor:
        return (images[:, 1] * self.scale).long()


class TimedSegmenter(Segmenter):
    """Passes `predict` through to a model and adds up the time and images it took."""

    def __init__(self, model: Segmenter) -> None:
        self.model, self.name, self.classes = model, model.name, model.classes
        self.ignore_index, self.device = model.ignore_index, model.device
        self.seconds, self.images = 0.0, 0

    @property
    def num_outputs(self) -> int:
        return self.model.num_outputs  # ESPNet's void output: ids up to 11 for 11 classes

    def predict(self, images: torch.Tensor) -> torch.Tensor:
        start = CLOCK()
        labels = self.model.predict(images)
        self.seconds += CLOCK() - start
        self.images += images.shape[0]
        return labels


class OracleAlone(Attack[AttackParams]):
    """No search: every query the same ε-box corner, built and asked for the way colour-blocks
    asks (`oracle.verified.vertex` into the pinned rows, then `answer`), so its time per query
    is the oracle's own share of a corner attack's."""

    name = "oracle alone"
    Params = AttackParams
    anytime = True

    def attack(self, oracle: Oracle) -> None:
        oracle.query(oracle.clean)
        positive = torch.ones(oracle.clean.shape[1:], dtype=torch.bool, device=oracle.clean.device)
        while active := oracle.active().tolist():
            verified = oracle.verified
            verified.answer([verified.vertex(i, positive, pin=True) for i in active]).scores.tolist()


def resized(item: Item, width: int, height: int) -> Item:
    """`item` at width x height: the image bilinear, the label nearest."""
    image = torch.from_numpy(item.image).permute(2, 0, 1)[None].float()
    image = F.interpolate(image, size=(height, width), mode="bilinear", align_corners=False)
    label = torch.from_numpy(item.label)[None, None].float()
    label = F.interpolate(label, size=(height, width), mode="nearest")
    return Item(item.name, image[0].permute(1, 2, 0).round().clamp(0, 255).to(torch.uint8).numpy(),
                label[0, 0].long().numpy().astype(np.int64))


def resized_dataset(data: Dataset, width: int, height: int) -> Dataset:
    """`data` with every item read at width x height."""
    items = [resized(data[i], width, height) for i in range(len(data))]
    pairs: list[tuple[str, Callable[[], Item]]] = [
        (item.name, functools.partial(copy.copy, item)) for item in items]
    return Dataset(data.name, data.classes, pairs, data.ignore_index, data.palette, data.extra,
                   data.things)


def parse_size(text: str) -> tuple[int, int]:
    """'2048x1024' -> (2048, 1024)."""
    try:
        width, height = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--size must be WIDTHxHEIGHT, e.g. 2048x1024, got {text!r}") from None
    if width < 1 or height < 1:
        raise argparse.ArgumentTypeError(f"--size must be positive, got {text!r}")
    return width, height


def per_image(model: Segmenter, images: torch.Tensor, batch: int, repeats: int) -> float:
    """Bare `predict` time per image for batches of `batch` images."""
    x = images[:batch]
    model.predict(x)  # warm-up
    start = CLOCK()
    for _ in range(repeats):
        model.predict(x)
    return (CLOCK() - start) / (repeats * x.shape[0])


def loop_per_query(attack, model, images, labels, names, batch: int) -> float:
    """`Attack.run` time per query over all images, `batch` images per run."""
    queries, start = 0, CLOCK()
    for lo in range(0, len(images), batch):
        seeds = [image_seed(attack.params.seed, n) for n in names[lo : lo + batch]]
        result = attack.run(model, images[lo : lo + batch], labels[lo : lo + batch], seeds=seeds)
        queries += int(result.queries.sum())
    return (CLOCK() - start) / queries


def job_time(attack, model, data, batch: int) -> tuple[float, int]:
    """`segtk attack` (attack_dataset with stored PNGs): seconds and queries."""
    with tempfile.TemporaryDirectory() as tmp:
        run = RunDir(tmp, {"bench": batch}, resume=False, kind="attack")
        start = CLOCK()
        summary = attack_dataset(attack, model, data, run, batch_size=batch, save_images=True)
        elapsed = CLOCK() - start
    return elapsed, sum(r["queries"] for r in summary.records)


def job_per_query(attack, model, data, batch: int) -> tuple[float, float]:
    """Seconds per query and queries per image of one job."""
    seconds, queries = job_time(attack, model, data, batch)
    return seconds / queries, queries / len(data)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=f"espnet:camvid={SHARED / 'models/espnet_camvid.safetensors'}")
    ap.add_argument("--data", default=f"camvid:{SHARED / 'data/camvid'}")
    ap.add_argument("--images", type=int, default=8)
    ap.add_argument("--budget", type=int, default=50)
    ap.add_argument("--attacks", default="dla,colour-stripes,colour-blocks")
    ap.add_argument("--size", type=parse_size, default=None,
                    help="resize the images to WIDTHxHEIGHT first, e.g. 2048x1024")
    ap.add_argument("--repeats", type=int, default=3, help="best of N for the segtk-only timings")
    ap.add_argument("--skip-model", action="store_true", help="only the near-zero-cost segmenter")
    ap.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N or auto (as --device)")
    args = ap.parse_args()
    global CLOCK
    try:
        device = resolve_device(args.device)
    except SegtkError as exc:
        ap.error(f"{exc.message}; {exc.hint}")
    CLOCK = gpu_clock if device.type == "cuda" else cpu_clock
    torch.set_num_threads(1)
    data = load_dataset(args.data, limit=args.images)
    if args.size is not None:
        data = resized_dataset(data, *args.size)
    items = [data[i] for i in range(len(data))]
    images, labels = batch_tensors(items, device)
    names = [item.name for item in items]
    h, w = images.shape[-2:]
    megapixels = h * w / 1e6
    attacks = args.attacks.split(",")
    clock = "wall-clock time (synchronised)" if device.type == "cuda" else "CPU time"
    print(f"images {len(data)} at {w}x{h}, budget {args.budget}, eps 8, threads 1, "
          f"device {device}, {clock}, best of {args.repeats}")

    green = GreenSegmenter(data.classes, device)
    print("\nsegtk's own cost per query (near-zero-cost segmenter's time subtracted)")
    for name in attacks:
        attack = build("attack", name, {}, budget=args.budget, eps=8, seed=0)
        for batch in (1, 8):
            model_s = per_image(green, images, batch, repeats=50)
            loop = min(loop_per_query(attack, green, images, labels, names, batch)
                       for _ in range(args.repeats)) - model_s
            job, per_image_queries = min(job_per_query(attack, green, data, batch)
                                         for _ in range(args.repeats))
            job -= model_s
            print(f"{name:>15} batch {batch}: attack loop {loop * 1e3:6.3f} ms/query "
                  f"({loop * 1e3 / megapixels:6.3f} per MP), whole job {job * 1e3:6.3f} ms/query "
                  f"(segmenter {model_s * 1e3:.3f} ms/image; "
                  f"job - loop = {(job - loop) * per_image_queries * 1e3:.1f} ms/image)")
    alone = OracleAlone(budget=args.budget, eps=8, seed=0)
    for batch in (1, 8):
        model_s = per_image(green, images, batch, repeats=50)
        loop = min(loop_per_query(alone, green, images, labels, names, batch)
                   for _ in range(args.repeats)) - model_s
        print(f"{'oracle alone':>15} batch {batch}: attack loop {loop * 1e3:6.3f} ms/query "
              f"({loop * 1e3 / megapixels:6.3f} per MP)")

    if args.skip_model:
        return
    model = load_segmenter(args.model, device)
    print(f"\noverhead ratio on {args.model}: segtk attack time per query / forward time per image")
    for batch in (1, 8):
        bare = per_image(model, images, min(batch, len(data)), repeats=max(2, 16 // batch))
        for name in attacks:
            attack = build("attack", name, {}, budget=args.budget, eps=8, seed=0)
            timed = TimedSegmenter(model)
            seconds, queries = job_time(attack, timed, data, batch)
            forward = timed.seconds / timed.images
            print(f"{name:>15} batch {batch}: forward {forward * 1e3:.1f} ms/image in the job "
                  f"(bare {bare * 1e3:.1f}), segtk attack {seconds / queries * 1e3:.1f} ms/query "
                  f"-> per query / forward {seconds / queries / forward:.3f}, "
                  f"job / all forward passes {seconds / timed.seconds:.3f}")


if __name__ == "__main__":
    main()
