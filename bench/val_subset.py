"""The CamVid val subset the attack diagnostics in bench/ share: model, images and labels."""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from segtk.core import (
    Attack,
    Dataset,
    Segmenter,
    SegtkError,
    build,
    load_dataset,
    load_segmenter,
    parse_pairs,
)
from segtk.jobs.batching import batch_tensors

SHARED = Path(__file__).resolve().parents[2] / "shared"


def positive(text: str) -> int:
    """An argparse type: a whole number of at least 1 (else a one-line usage error)."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of at least 1, got {text!r}")
    return int(text)


def add_subset_options(parser: argparse.ArgumentParser, start: int, step: int) -> None:
    """--model, --data, --start, --step and --limit (every STEP-th val image from START, at most LIMIT)."""
    parser.add_argument("--model", default=f"espnet:camvid={SHARED}/models/espnet_camvid.safetensors")
    parser.add_argument("--data", default=f"camvid:{SHARED}/data/camvid")
    parser.add_argument("--start", type=int, default=start,
                        help="first val image used (20: keep the first 20, the confirmation set, out)")
    parser.add_argument("--step", type=positive, default=step, help="use every STEP-th image")
    parser.add_argument("--limit", type=positive, help="use at most LIMIT of those images")


def load_subset(args: argparse.Namespace) -> tuple[Segmenter, Dataset, torch.Tensor, torch.Tensor]:
    """The model, the chosen images as a dataset, and their images [B,3,H,W] and labels [B,H,W]."""
    torch.set_num_threads(1)
    model = load_segmenter(args.model)
    full = load_dataset(args.data)
    data = full.subset(names=full.names[args.start :: args.step][: args.limit])
    images, labels = batch_tensors([data[i] for i in range(len(data))], model.device)
    return model, data, images, labels


def build_spec(parser: argparse.ArgumentParser, spec: str, budget: int, eps: float, seed: int) -> Attack:
    """The attack of an ATTACK[:key=value...] spec; a wrong name or key is a one-line usage error
    (checked before the model loads, so a run does not fail after its first spec)."""
    name, *extra = spec.split(":")
    try:
        return build("attack", name, parse_pairs(tuple(extra), "--param"), budget=budget, eps=eps, seed=seed)
    except SegtkError as error:
        parser.error(f"{spec}: {error}")


def class_index(parser: argparse.ArgumentParser, data: Dataset, name: str) -> int:
    """The index of class `name` in `data`; an unknown name is a one-line usage error."""
    if name not in data.classes:
        parser.error(f"--cls {name!r} is not a class of this dataset; choose one of {', '.join(data.classes)}")
    return data.classes.index(name)
