"""`segtk train`: fine-tune a Trainable segmenter with one augmentation, deterministically.

The output folder:

    OUT/run.json                  command, versions, weights' sha256, config (checked on --resume)
    OUT/results.jsonl             one line per finished epoch: mean loss, steps, seconds, spec
    OUT/checkpoints/epoch-NNNN/   the model as its plugin saves it (safetensors; loads with the
                                  spec in checkpoint.json), state.safetensors (every tensor of
                                  the model), optimizer.pt, checkpoint.json (written last: a
                                  checkpoint without it is incomplete and ignored)
    OUT/model.spec                the last epoch's `--model` spec, one line

Determinism: everything random is derived from (seed, epoch[, step]): the data order of each
epoch, each batch's crops and augmentation (one torch.Generator per step), and the global torch
seed for dropout (set at each epoch start, inside a forked RNG state). So two runs with the same
settings give the same weights, and `--resume` from any epoch's checkpoint continues exactly as
the uninterrupted run would have (the learning rate is constant, so `--epochs` may grow on
resume: the first epochs of a longer run are the shorter run).
"""

from __future__ import annotations

import hashlib
import io
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.torch import load_file

from segtk.core.augment import (
    AugmentContext,
    Augmenter,
    Trainable,
    build_augmenter,
    require_trainable,
    save_safetensors,
)
from segtk.core.data import Dataset, atomic_write_bytes, atomic_write_json
from segtk.core.errors import DataError, ModelError, SegtkError, naming
from segtk.core.runs import RunDir
from segtk.core.specs import check_compatible, load_dataset, load_segmenter

CHECKPOINTS, SPEC_FILE, DONE = "checkpoints", "model.spec", "checkpoint.json"


@dataclass(frozen=True)
class TrainConfig:
    """Everything that decides the trained weights (all of it but `epochs` must match on resume)."""

    model: str
    data: str
    split: str | None = "train"
    limit: int | None = None
    augment: str = "baseline"
    epochs: int = 1
    batch_size: int = 8
    lr: float = 1e-4
    weight_decay: float = 1e-4
    seed: int = 0
    size: tuple[int, int] | None = None  # (W, H): resize every image first
    crop: tuple[int, int] | None = None  # (W, H): then a random crop per sample and epoch

    def record(self) -> dict[str, Any]:
        out = asdict(self)
        out["size"] = list(self.size) if self.size else None
        out["crop"] = list(self.crop) if self.crop else None
        return out


@dataclass
class EpochResult:
    epoch: int
    loss: float
    steps: int
    seconds: float
    spec: str


def derive(seed: int, *parts: object) -> int:
    """A 63-bit seed from the run seed and a path of names/numbers (stable across runs)."""
    text = ":".join(str(p) for p in (seed, *parts))
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little") >> 1


def parse_size(text: str | None, option: str) -> tuple[int, int] | None:
    """'240x180' -> (240, 180); None stays None; anything else is a one-line error."""
    if text is None or text == "":
        return None
    w, sep, h = text.lower().partition("x")
    if not sep or not w.isdigit() or not h.isdigit() or int(w) < 8 or int(h) < 8:
        raise SegtkError(f"{option} {text!r} is not WIDTHxHEIGHT (both >= 8)",
                         hint=f"e.g. {option} 240x180")
    return int(w), int(h)


# --- data -------------------------------------------------------------------------------------


def resize_pair(image: np.ndarray, label: np.ndarray,
                size: tuple[int, int] | None) -> tuple[torch.Tensor, torch.Tensor]:
    """uint8 [H,W,3] + int64 [H,W] -> uint8 [3,h,w] + int64 [h,w] at `size` (W,H): bilinear
    (antialiased) for the image, nearest for the label."""
    x = torch.from_numpy(np.ascontiguousarray(image)).permute(2, 0, 1)
    y = torch.from_numpy(np.asarray(label, dtype=np.int64))
    if size is None or (x.shape[2], x.shape[1]) == tuple(size):
        return x.contiguous(), y
    w, h = size
    xf = F.interpolate(x[None].float(), size=(h, w), mode="bilinear", align_corners=False,
                       antialias=True)[0]
    yl = F.interpolate(y[None, None].double(), size=(h, w), mode="nearest")[0, 0].long()
    return xf.round().clamp(0, 255).to(torch.uint8), yl


def random_crop(image: torch.Tensor, label: torch.Tensor, crop: tuple[int, int] | None,
                generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """The same random (W,H) window of image [3,H,W] and label [H,W]."""
    if crop is None:
        return image, label
    w, h = crop
    height, width = label.shape
    if w > width or h > height:
        raise DataError(f"--crop {w}x{h} is larger than a training image ({width}x{height})",
                        hint="choose a smaller --crop, or a larger --size")
    y0 = int(torch.randint(height - h + 1, (1,), generator=generator))
    x0 = int(torch.randint(width - w + 1, (1,), generator=generator))
    return image[:, y0:y0 + h, x0:x0 + w], label[y0:y0 + h, x0:x0 + w]


def load_items(data: Dataset, size: tuple[int, int] | None,
               on_item: Callable[[int], None] | None = None) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Every training image and label, resized once, kept as uint8/int64 tensors."""
    items = []
    for i in range(len(data)):
        item = data[i]
        items.append(resize_pair(item.image, item.label, size))
        if on_item:
            on_item(i + 1)
    return items


def batch_of(items: list[tuple[torch.Tensor, torch.Tensor]], indices: list[int],
             crop: tuple[int, int] | None, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    pairs = [random_crop(*items[k], crop, generator) for k in indices]
    shapes = {tuple(label.shape) for _, label in pairs}
    if len(shapes) > 1:
        raise DataError(f"training images differ in size ({', '.join(f'{w}x{h}' for h, w in sorted(shapes))})",
                        hint="pass --size WxH (resize) or --crop WxH so batches have one size")
    images = torch.stack([image for image, _ in pairs]).float() / 255.0
    return images, torch.stack([label for _, label in pairs])


# --- checkpoints ------------------------------------------------------------------------------


def checkpoint_dir(out: Path, epoch: int) -> Path:
    return out / CHECKPOINTS / f"epoch-{epoch:04d}"


def save_checkpoint(model: Trainable, optimizer: torch.optim.Optimizer, out: Path, epoch: int,
                    meta: dict[str, Any]) -> str:
    """Model (plugin format + exact state), optimizer; checkpoint.json last. Returns the spec."""

    folder = checkpoint_dir(out, epoch)
    folder.mkdir(parents=True, exist_ok=True)
    spec = model.save(folder / "model")
    save_safetensors(folder / "state.safetensors", model.state_dict())
    buf = io.BytesIO()
    torch.save(optimizer.state_dict(), buf)
    atomic_write_bytes(folder / "optimizer.pt", buf.getvalue())
    atomic_write_json(folder / DONE, {"epoch": epoch, "spec": spec, **meta})
    return spec


def latest_checkpoint(out: Path, epochs_done: set[int]) -> int:
    """The last epoch whose checkpoint is complete and recorded in results.jsonl (0 if none)."""
    best = 0
    for epoch in sorted(epochs_done):
        if (checkpoint_dir(out, epoch) / DONE).is_file() and all(e in epochs_done for e in range(1, epoch + 1)):
            best = epoch
    return best


def restore(model: Trainable, optimizer: torch.optim.Optimizer, out: Path, epoch: int) -> None:

    folder = checkpoint_dir(out, epoch)
    with naming(f"resuming from {folder}", SegtkError, "loading the checkpoint",
                hint="the checkpoint is damaged: delete that epoch's folder to resume from the one before"):
        model.load_state_dict(load_file(str(folder / "state.safetensors")))
        optimizer.load_state_dict(torch.load(folder / "optimizer.pt", weights_only=True))


# --- the loop ---------------------------------------------------------------------------------


StepHook = Callable[[int, int, int, float], None]  # (epoch, step, steps, loss)


def segmentation_loss(logits: torch.Tensor, labels: torch.Tensor, ignore_index: int) -> torch.Tensor:
    """Mean cross-entropy over labelled pixels (0, not NaN, for a batch with none)."""
    total = F.cross_entropy(logits, labels, ignore_index=ignore_index, reduction="sum")
    return total / (labels != ignore_index).sum().clamp(min=1)


def make_prepare(config: TrainConfig):
    """How a dataset item becomes a training sample (resize, random crop): given to augmenters
    that bring in new samples, so those match the batch."""

    def prepare(image: np.ndarray, label: np.ndarray, generator: torch.Generator):
        x, y = random_crop(*resize_pair(image, label, config.size), config.crop, generator)
        return x.float() / 255.0, y

    return prepare


def train(config: TrainConfig, out: str | Path, resume: bool = False,
          on_start: Callable[[dict[str, Any]], None] | None = None,
          on_step: StepHook | None = None) -> list[EpochResult]:
    """Train `config.epochs` epochs into `out` (continuing a run there with `resume`)."""
    if config.epochs < 1 or config.batch_size < 1 or not config.lr > 0 or config.weight_decay < 0:
        raise SegtkError("--epochs and --batch-size must be >= 1, --lr > 0, --weight-decay >= 0")
    out = Path(out)
    model = require_trainable(load_segmenter(config.model), config.model)
    data = load_dataset(config.data, config.split, config.limit)
    check_compatible(model, data)
    augmenter: Augmenter | None = build_augmenter(config.augment)
    params = list(model.parameters())
    if not params:
        raise ModelError(f"model {config.model!r} has no parameters to train")
    if augmenter is not None:  # before the run folder exists: a bad edits dir= writes nothing
        with naming(f"augmenter {config.augment}", SegtkError, "its setup"):
            augmenter.setup(AugmentContext(list(data.classes), data.ignore_index,
                                           make_prepare(config)))
    record = {**config.record(), "augmenter": augmenter.parameters() if augmenter else {}}
    run = RunDir(out, record, resume, may_differ=("epochs",), kind="train")
    try:
        return _train(config, out, run, model, data, augmenter, on_start, on_step)
    finally:
        run.close()


def _train(config: TrainConfig, out: Path, run: RunDir, model: Trainable, data: Dataset,
           augmenter: Augmenter | None, on_start, on_step) -> list[EpochResult]:
    done = {int(v["epoch"]): v for v in run.done(key="key").values()}
    items = load_items(data, config.size)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    start = latest_checkpoint(out, set(done))
    if start:
        restore(model, optimizer, out, start)
    steps = math.ceil(len(items) / config.batch_size)
    results = [EpochResult(e, done[e]["loss"], done[e]["steps"], done[e]["seconds"], done[e]["spec"])
               for e in range(1, start + 1)]
    if on_start:
        on_start({"images": len(items), "steps": steps, "start_epoch": start, "epochs": config.epochs})
    device = getattr(model, "device", torch.device("cpu"))
    torch.set_flush_denormal(True)  # subnormal weights/grads make CPU training ~10x slower
    try:
        with torch.random.fork_rng(devices=[]):
            for epoch in range(start + 1, config.epochs + 1):
                torch.manual_seed(derive(config.seed, "torch", epoch))  # dropout and the like
                order = torch.randperm(len(items), generator=torch.Generator().manual_seed(
                    derive(config.seed, "order", epoch))).tolist()
                began, losses = time.time(), []
                model.train()
                for step in range(steps):
                    generator = torch.Generator().manual_seed(derive(config.seed, "batch", epoch, step))
                    chunk = order[step * config.batch_size:(step + 1) * config.batch_size]
                    images, labels = batch_of(items, chunk, config.crop, generator)
                    if augmenter is not None:
                        with naming(f"epoch {epoch} step {step + 1}", SegtkError,
                                    f"augmenter {augmenter.name}"):
                            images, labels = augmenter(images, labels, generator)
                    with naming(f"epoch {epoch} step {step + 1}", ModelError, "the model"):
                        logits = model.logits(images.to(device))
                    loss = segmentation_loss(logits, labels.to(logits.device), data.ignore_index)
                    if not torch.isfinite(loss):
                        raise ModelError(f"epoch {epoch} step {step + 1}: the loss is {loss.item()}",
                                         hint="lower --lr (training diverged)")
                    optimizer.zero_grad(set_to_none=True)
                    loss.backward()
                    optimizer.step()
                    losses.append(float(loss.detach()))
                    if on_step:
                        on_step(epoch, step + 1, steps, losses[-1])
                model.eval()
                seconds = time.time() - began
                mean = float(np.mean(losses))
                spec = save_checkpoint(model, optimizer, out, epoch,
                                       {"loss": mean, "augment": config.augment})
                run.append({"key": f"epoch-{epoch}", "epoch": epoch, "loss": mean, "steps": steps,
                            "seconds": round(seconds, 3), "spec": spec})
                atomic_write_bytes(out / SPEC_FILE, (spec + "\n").encode())
                results.append(EpochResult(epoch, mean, steps, seconds, spec))
    finally:
        torch.set_flush_denormal(False)
        model.eval()
    if results and not (out / SPEC_FILE).is_file():
        atomic_write_bytes(out / SPEC_FILE, (results[-1].spec + "\n").encode())
    return results


def read_spec(out: str | Path) -> str:
    """The `--model` spec a finished training run wrote."""
    path = Path(out) / SPEC_FILE
    if not path.is_file():
        raise SegtkError(f"{path}: not found", hint="the training run has not finished an epoch")
    return path.read_text().strip()

