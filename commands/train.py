"""`segtk train` and `segtk bench augment`: fine-tuning with augmentation plugins (Gen4Seg Tab. IV)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import click

from segtk import api
from segtk.api.training import AUGMENT_ATTRIBUTES, BENCH_AUGMENTS, split_augments
from segtk.benchmarks.augment import ORIGINAL, columns, original_rows, original_title, table_rows
from segtk.commands.bench_edits import parse_values, values_items
from segtk.commands.console import JobProgress, console, quiet_option, result_line, table
from segtk.commands.options import (
    classes_from_data_option,
    csv_list,
    device_option,
    limit_option,
    max_pixels_option,
    same_device,
)
from segtk.commands.resume import Recorded, joined, resumable, sized
from segtk.editkit import CLASSICAL
from segtk.jobs.train import CONSTANT, SCHEDULES
from segtk.jobs.train_samples import parse_scale, parse_size
from segtk.storage.layout import CHECKPOINTS, MODEL_SPEC, RESULTS, RUN

TRAIN_SPLIT_HELP = ("Training split [default: train where the data has splits, else all of it]; "
                    "'' for none.")


def training_options(command):
    """The options `segtk train` and `segtk bench augment` share."""
    for option in reversed([
        click.option("--epochs", type=click.IntRange(min=1), default=1, show_default=True,
                     help="Epochs (a --resume may raise it with the constant schedule)."),
        click.option("--batch-size", type=click.IntRange(min=1), default=8, show_default=True),
        click.option("--lr", type=click.FloatRange(min=0, min_open=True), default=1e-4,
                     show_default=True, help="AdamW learning rate (see --schedule)."),
        click.option("--weight-decay", type=click.FloatRange(min=0), default=1e-4,
                     show_default=True),
        click.option("--seed", type=int, default=0, show_default=True,
                     help="Decides data order, crops and augmentation."),
        click.option("--size", default=None, metavar="WxH",
                     help="Resize every training image first (e.g. 240x180)."),
        click.option("--crop", default=None, metavar="WxH",
                     help="Then a random crop per image and epoch (e.g. 240x180)."),
        click.option("--scale", default=None, metavar="LO,HI",
                     help="Rescale each sample by a random ratio in [LO, HI] before the crop "
                          "(e.g. 0.5,2.0; needs --crop, which pads with the ignore label)."),
        click.option("--flip", is_flag=True,
                     help="Mirror each sample left-right with probability 0.5 after the crop."),
        click.option("--schedule", type=click.Choice(SCHEDULES), default=CONSTANT,
                     show_default=True,
                     help="Learning rate: constant, or poly (power 0.9 per step to 0 at the "
                          "end; --epochs is then fixed on resume)."),
        click.option("--norm-eval", is_flag=True,
                     help="Keep the start model's BatchNorm statistics (their weights still "
                          "train): small batches of crops otherwise shift them."),
        classes_from_data_option,
        device_option,
        max_pixels_option,
    ]):
        command = option(command)
    return command


def _split(recorded: str | None) -> str:
    """A recorded split as --split: none ('' on the command line) stays none."""
    return "" if recorded is None else recorded


def _size_of(option: str) -> Callable[[str | None], tuple[int, int] | None]:
    """A WxH option as the (W, H) it means, to compare a typed one with the recorded one."""
    return lambda value: parse_size(value, option)


# Where run.json records each option (see commands.resume; jobs.train.TrainConfig.record);
# `segtk train --resume` may raise --epochs.
TRAINING = {
    "epochs": Recorded("epochs"), "batch_size": Recorded("batch_size"), "lr": Recorded("lr"),
    "weight_decay": Recorded("weight_decay"), "seed": Recorded("seed"),
    "size": Recorded("size", sized, _size_of("--size")),
    "crop": Recorded("crop", sized, _size_of("--crop")),
    "scale": Recorded("scale", joined, parse_scale, absent=None),
    "flip": Recorded("flip", absent=False), "schedule": Recorded("schedule", absent=CONSTANT),
    "norm_eval": Recorded("norm_eval", absent=False),
    "classes_from_data": Recorded("classes_from_data", absent=False),
    "device": Recorded("device", same=same_device, absent="cpu"),
}
TRAIN = {
    "model_spec": Recorded("model"), "data_spec": Recorded("data"),
    "split": Recorded("split", _split, lambda v: v or None), "limit": Recorded("limit"),
    "augment": Recorded("augment"), **TRAINING,
}
BENCH_AUGMENT = {  # benchmarks.augment.AugmentBench.record: --augment may add augmentations
    "model_spec": Recorded("model"), "data_spec": Recorded("data"),
    "split": Recorded("train_split", _split, lambda v: v or None),
    "limit": Recorded("train_limit"), "augments": Recorded("augments", joined, split_augments),
    "eval_data": Recorded("eval_data"),
    "eval_split": Recorded("eval_split", _split, lambda v: v or None),
    "eval_limit": Recorded("eval_limit"), "attributes": Recorded("attributes", joined, csv_list),
    "values": Recorded("values", values_items, parse_values), "backend": Recorded("backend"),
    "eval_seed": Recorded("eval_seed"),  # absent (an older run): its training seed, see the API
    **TRAINING,
}


class StepBar:
    """A rich progress bar per epoch, fed by the training job's step hook."""

    def __init__(self, bar: JobProgress) -> None:
        self.bar = bar
        self.epoch: int | None = None  # the epoch whose bar is showing (none yet)

    def __call__(self, epoch: int, step: int, steps: int, loss: float) -> None:
        if epoch != self.epoch:
            self.bar.start(f"epoch {epoch}", steps, "steps")
            self.epoch = epoch
        self.bar.update(completed=step, status=f"loss {loss:.4f}")


@click.command("train")
@click.option("--model", "model_spec",
              help="Start model spec (see `segtk models`) [required; --resume reads it from OUT].")
@click.option("--data", "data_spec", help="Training data spec FORMAT:PATH [required; --resume reads it from OUT].")
@click.option("--split", default=None, help=TRAIN_SPLIT_HELP)
@limit_option
@click.option("--augment", default="baseline", show_default=True, metavar="NAME[:KEY=VALUE,...]",
              help="Augmenter plugin (see `segtk plugins`), its parameters comma-separated and "
                   "a list value's items ';'-separated; baseline = none.")
@training_options
@click.option("--out", type=click.Path(file_okay=False), required=True,
              help=f"Run folder: {CHECKPOINTS}, {RESULTS}, {MODEL_SPEC}.")
@click.option("--resume", is_flag=True,
              help="Continue the run in OUT from its last checkpoint; the options left out are "
                   f"read from OUT/{RUN} (--epochs may grow).")
@quiet_option
@resumable("train", TRAIN, may_change=("epochs",), required=("model_spec", "data_spec"))
def train_command(model_spec, data_spec, split, limit, augment, epochs, batch_size, lr,
                  weight_decay, seed, size, crop, scale, flip, schedule, norm_eval, classes_from_data,
                  device,
                  out, resume) -> None:
    """Fine-tune a model with one augmentation; print the model spec it wrote.

    Deterministic (same settings, same weights), a checkpoint per epoch, and --resume continues
    exactly as an uninterrupted run would. Trainable: espnet, demo, hf (SegFormer and other
    per-pixel heads).

    \b
    Examples:
      segtk train --model espnet:camvid=../shared/models/espnet_camvid.safetensors \\
          --data camvid:../shared/data/camvid --augment cutmix --epochs 2 \\
          --crop 240x180 --out runs/train-cutmix
      segtk train --model demo --data demo --augment augmix:severity=3 --out runs/t
      segtk train ... --augment edits:dir=runs/edit-color,p=0.5 --out runs/train-edits
      segtk train --out runs/train-cutmix --resume --epochs 3   # the rest from run.json
      segtk predict --model runs/train-cutmix/model.spec --data camvid:../shared/data/camvid
    """

    with JobProgress() as bar:
        results = api.train(model_spec, data_spec, out, augment, split=split, limit=limit,
                            epochs=epochs, batch_size=batch_size, lr=lr,
                            weight_decay=weight_decay, seed=seed, size=size, crop=crop,
                            scale=scale, flip=flip, schedule=schedule, norm_eval=norm_eval,
                            classes_from_data=classes_from_data, device=device,
                            resume=resume, on_step=StepBar(bar))
    rows = [(r["epoch"], r["loss"], r["steps"], r["seconds"]) for r in results]
    console.print(table(f"segtk train --augment {augment}", ["epoch", "loss", "steps", "seconds"], rows))
    if results:
        result_line(f"model: {results.details['spec']}", f"  (or --model {Path(out) / MODEL_SPEC}, "
                    "which follows the run folder when it is moved)")


@click.command("augment")
@click.option("--model", "model_spec",
              help="Start model spec (every row trains from it) [required; --resume reads it from OUT].")
@click.option("--data", "data_spec", help="Training data spec FORMAT:PATH [required; --resume reads it from OUT].")
@click.option("--split", default=None, help=TRAIN_SPLIT_HELP)
@limit_option
@click.option("--augment", "augments", default=BENCH_AUGMENTS, show_default=True,
              metavar="SPEC[,SPEC...]",
              help="Augmentations, comma-separated, one model each; a KEY=VALUE after a comma is "
                   "the parameter of the augmentation before it, and a list value takes ';' "
                   "(e.g. 'baseline,cutmix:alpha=1,p=0.5,edits:dir=A;B').")
@click.option("--eval-data", default=None, help="Evaluation data spec [default: --data].")
@click.option("--eval-split", default=None,
              help="Evaluation split [default: val where the data has splits, else all of it]; "
                   "'' for none.")
@click.option("--eval-limit", type=click.IntRange(min=1), default=None,
              help="Use only the first N evaluation images.")
@click.option("--attributes", default=AUGMENT_ATTRIBUTES, show_default=True,
              help="Editors making the edited evaluation subsets, comma-separated.")
@click.option("--values", "values", multiple=True, metavar="ATTR=V1,V2",
              help="Values of one attribute, comma-separated; repeat the option for another "
                   "attribute, e.g. --values color=red,blue --values style=sketch.")
@click.option("--backend", default=CLASSICAL, show_default=True, metavar="NAME",
              help="classical, or an edit-backend plugin (see `segtk plugins`).")
@click.option("--eval-seed", type=int, default=None,
              help="Seeds the edited evaluation subsets, apart from --seed, so runs with other "
                   "--seed are scored on the same images [default: 0; a --resume reads it "
                   "from OUT].")
@training_options
@click.option("--out", type=click.Path(file_okay=False), default="runs/bench-augment",
              show_default=True)
@click.option("--resume", is_flag=True,
              help="Keep finished training runs and scores in OUT; the options left out are "
                   f"read from OUT/{RUN} (--augment may add augmentations).")
@quiet_option
@resumable("bench-augment", BENCH_AUGMENT, may_change=("augments",),
           required=("model_spec", "data_spec"))
def bench_augment(model_spec, data_spec, split, limit, augments, eval_data, eval_split,
                  eval_limit, attributes, values, backend, eval_seed, epochs, batch_size, lr,
                  weight_decay, seed, size, crop, scale, flip, schedule, norm_eval, classes_from_data,
                  device,
                  out, resume) -> None:
    """One model per augmentation from the same start → Gen4Seg Tab. IV (mIoU per subset, mR).

    Edited evaluation subsets are built like `segtk bench edits` does (OUT/edits/ATTR); each
    augmentation trains into OUT/train/NAME; the untrained start model is the first row.
    Writes OUT/table.csv, table.json and miou.png; then prints Tab. VI (mIoU on every
    original evaluation image, unedited, one row per augmentation) into OUT/table_vi.csv.

    \b
    Examples:
      segtk bench augment --model demo --data demo \\
          --augment baseline,cutmix --attributes color,weather --crop 96x64 --out runs/ba
      segtk bench augment --model espnet:camvid=../shared/models/espnet_camvid.safetensors \\
          --data camvid:../shared/data/camvid --crop 240x180 --epochs 2 \\
          --augment 'baseline,cutmix,augmix,edits:dir=runs/train-edits/color;runs/train-edits/style' \\
          --values color=red,blue --values style=painting,sketch --out runs/bench-augment
    """

    def said(attr, summary) -> None:
        d = summary.as_dict()
        console.print(f"subset {attr}: {d['edited']} edits of {d['sources_edited']} images")

    with JobProgress() as bar:
        steps = StepBar(bar)

        def on_train(label: str, info: dict) -> None:
            console.print(f"training {label} ({info['augment']}) into {info['out']}")
            steps.epoch = None

        result = api.bench_augment(
            model_spec, data_spec, augments, out, split=split, limit=limit,
            eval_data=eval_data, eval_split=eval_split, eval_limit=eval_limit,
            attributes=attributes, values=parse_values(values), backend=backend,
            epochs=epochs, batch_size=batch_size, lr=lr, weight_decay=weight_decay, seed=seed,
            eval_seed=eval_seed, size=size, crop=crop, scale=scale, flip=flip,
            schedule=schedule, norm_eval=norm_eval, classes_from_data=classes_from_data,
            device=device, resume=resume, on_subset=said, on_train=on_train, on_step=steps,
            on_scoring=lambda total: bar.start("scoring", total, "images scored"),
            on_records=bar.advance)
    details = result.details
    console.print(table("mIoU % per subset, mR = RmIoU / mIoU(reference) (Gen4Seg Tab. IV)",
                        columns(details), table_rows(details)))
    console.print(table(original_title(details), ["augmentation", ORIGINAL],
                        original_rows(details)))
    for path in result.files:
        result_line(f"wrote {path}")
