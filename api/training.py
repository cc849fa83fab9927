"""`segtk.train` and `segtk.bench_augment`: the jobs behind `segtk train` and `segtk bench
augment`, which call these functions, so Python and the CLI train the same weights."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from segtk.api.loading import comma_list, pixel_limited, specs_only
from segtk.api.results import Table
from segtk.benchmarks.augment import AugmentBench, eval_seed_for, run, write_outputs
from segtk.core import SegtkError
from segtk.core._device import resolve_device
from segtk.core._specs import preferred_split
from segtk.editkit import CLASSICAL
from segtk.jobs.edit import EditSummary
from segtk.jobs.overwrite import overwrite_run
from segtk.jobs.train import CONSTANT, StepHook, TrainConfig
from segtk.jobs.train import train as train_job
from segtk.jobs.train_samples import parse_scale, parse_size

__all__ = ["train", "bench_augment", "chosen_split", "split_augments", "BENCH_AUGMENTS",
           "AUGMENT_ATTRIBUTES"]

BENCH_AUGMENTS = "baseline,cutout,cutmix,augmix"
AUGMENT_ATTRIBUTES = "color,material,style,weather"
Size = str | tuple[int, int] | None
Scale = str | tuple[float, float] | None


def chosen_split(data_spec: str, split: str | None, preferred: str) -> str | None:
    """`split` as given ('' = none) or, when not given, `preferred` where the data has splits
    and none where it has none: a default the user did not type must not fail on the demo data."""
    if split is None:
        return preferred_split(data_spec, preferred)
    return split or None


def split_augments(value: str | Sequence[str]) -> list[str]:
    """'baseline,cutmix:alpha=1,p=0.5' -> ['baseline', 'cutmix:alpha=1,p=0.5']: one separator,
    the comma; a KEY=VALUE part (an '=' before any ':') continues the spec before it, since an
    augmenter's name never holds an '='. A list is taken as the specs it holds."""
    if not isinstance(value, str):
        return [v.strip() for v in value if v.strip()]
    specs: list[str] = []
    for part in comma_list(value):
        name = part.partition(":")[0]
        if specs and "=" in name:
            specs[-1] += "," + part
        elif "+" in name:
            raise SegtkError(f"--augment {value!r}: separate the augmentations with ','",
                             hint="e.g. --augment baseline,cutmix:alpha=1,p=0.5,augmix")
        else:
            specs.append(part)
    return specs


def _size(value: Size, option: str) -> tuple[int, int] | None:
    """(W, H), or 'WxH' as --size and --crop take it."""
    if value is None or isinstance(value, str):
        return parse_size(value, option)
    return parse_size(f"{value[0]}x{value[1]}", option)


def _config(model: str, data: str, split: str | None, limit: int | None, augment: str,
            epochs: int, batch_size: int, lr: float, weight_decay: float, seed: int, size: Size,
            crop: Size, classes_from_data: bool, device: str | None, scale: Scale = None,
            flip: bool = False, schedule: str = CONSTANT, norm_eval: bool = False) -> TrainConfig:
    return TrainConfig(model, data, chosen_split(data, split, "train"), limit, augment, epochs,
                       batch_size, lr, weight_decay, seed, _size(size, "--size"),
                       _size(crop, "--crop"), classes_from_data, str(resolve_device(device)),
                       scale=_scale(scale), flip=flip, schedule=schedule, norm_eval=norm_eval)


def _scale(value: Scale) -> tuple[float, float] | None:
    """(LO, HI), or 'LO,HI' as --scale takes it."""
    if value is None or isinstance(value, str):
        return parse_scale(value)
    return parse_scale(f"{value[0]!r},{value[1]!r}")


@pixel_limited
def train(model: str, data: str, out: str | Path, augment: str = "baseline", *,
          split: str | None = None, limit: int | None = None, epochs: int = 1,
          batch_size: int = 8, lr: float = 1e-4, weight_decay: float = 1e-4, seed: int = 0,
          size: Size = None, crop: Size = None, scale: Scale = None, flip: bool = False,
          schedule: str = CONSTANT, norm_eval: bool = False, classes_from_data: bool = False,
          device: str | None = "cpu", resume: bool = False, overwrite: bool = False,
          on_step: StepHook | None = None, max_pixels: int | None = None) -> Table:
    """Fine-tune the model spec `model` on `data` with one augmentation (augmenter spec
    NAME[:KEY=VALUE,...], baseline = none) into the run folder `out`, as `segtk train`:
    deterministic, a checkpoint per epoch, `resume=True` continues it (epochs may grow).

    `split`: None = train where the data has splits, else all of it; '' = all of it.
    `size`, `crop`: (W, H) or 'WxH'. Before the augmenter every sample is rescaled by a ratio
    drawn from `scale` ((LO, HI) or 'LO,HI'; needs `crop`, which then pads with the ignore
    label), cropped, and mirrored with probability 0.5 when `flip`. `schedule`: 'constant'
    (the default) or 'poly' (power 0.9 per step over the whole run; the epochs are then fixed
    on resume). `norm_eval`: keep the start model's BatchNorm statistics (their weights still
    train): fine-tuning on small batches of crops otherwise shifts them. `device`: where the model trains (cpu, cuda, cuda:N,
    auto); the augmentations run on the CPU batch before it moves. Returns one row per epoch (epoch, loss, steps, seconds,
    spec); `details["spec"]` is the trained model's spec (`load_model` loads it).
    """
    if overwrite:  # start over: clear what an earlier run wrote in `out`
        overwrite_run(out, "train", resume)
    specs_only(model, data, "train")
    config = _config(model, data, split, limit, augment, epochs, batch_size, lr, weight_decay,
                     seed, size, crop, classes_from_data, device, scale, flip, schedule, norm_eval)
    results = train_job(config, out, resume, on_step=on_step)
    rows = [{"epoch": r.epoch, "loss": r.loss, "steps": r.steps, "seconds": r.seconds,
             "spec": r.spec} for r in results]
    return Table(rows, out=Path(out), details={"spec": results[-1].spec if results else None})


@pixel_limited
def bench_augment(model: str, data: str, augments: str | Sequence[str] = BENCH_AUGMENTS,
                  out: str | Path = "runs/bench-augment", *, split: str | None = None,
                  limit: int | None = None, eval_data: str | None = None,
                  eval_split: str | None = None, eval_limit: int | None = None,
                  attributes: str | Sequence[str] = AUGMENT_ATTRIBUTES,
                  values: Mapping[str, Sequence[str]] | None = None, backend: str = CLASSICAL,
                  epochs: int = 1, batch_size: int = 8, lr: float = 1e-4,
                  weight_decay: float = 1e-4, seed: int = 0, eval_seed: int | None = None,
                  size: Size = None, crop: Size = None, scale: Scale = None,
                  flip: bool = False, schedule: str = CONSTANT, norm_eval: bool = False,
                  classes_from_data: bool = False,
                  device: str | None = "cpu", resume: bool = False, overwrite: bool = False,
                  on_subset: Callable[[str, EditSummary], None] | None = None,
                  on_train: Callable[[str, dict[str, Any]], None] | None = None,
                  on_step: StepHook | None = None,
                  on_scoring: Callable[[int], None] | None = None,
                  on_records: Callable[[int], None] | None = None,
                  max_pixels: int | None = None) -> Table:
    """One model per augmentation from the same start → Gen4Seg Tab. IV, as `segtk bench
    augment`: edited evaluation subsets in OUT/edits, a training run per augmentation in
    OUT/train/LABEL, scores in OUT/results.jsonl.

    `eval_split`: None = val where the evaluation data has splits, '' = all of it.
    `scale`, `flip`, `schedule`, `norm_eval`: every row's pipeline, learning rate and
    normalisation statistics, as in `train`.
    `eval_seed` seeds the edited evaluation subsets apart from the training `seed`, so runs
    with other seeds are scored on the same test set: None = 0, or on `resume` the recorded
    one (the training seed for a run made before eval_seed existed). `device`:
    where every model trains and is scored (cpu, cuda, cuda:N, auto). Returns one
    row per augmentation (the untrained start model first): augmentation, model (its spec),
    the mIoU % of each subset under the subset's name, mr_GROUP and rmiou_GROUP per edit group;
    `details` holds the whole result ("subsets", "groups", "rows", "images"). Gen4Seg Tab. VI
    (mIoU on every original evaluation image) is the "original-all" column, or "original"
    when every image was edited (then there is no "original-all"); it is written to
    OUT/table_vi.csv. The `edits` augmenter's appearance/geometry mix is its spec's
    geometry_share (e.g. "edits:dir=A;B,geometry_share=0.5").
    """
    if overwrite:  # start over: clear what an earlier run wrote in `out`
        overwrite_run(out, "bench-augment", resume)
    specs_only(model, data, "bench_augment")
    specs = split_augments(augments)
    attrs = comma_list(attributes)
    if not attrs:
        raise SegtkError("--attributes must name at least one editor",
                         hint="e.g. --attributes color,weather")
    training = _config(model, data, split, limit, "baseline", epochs, batch_size, lr,
                       weight_decay, seed, size, crop, classes_from_data, device, scale, flip,
                       schedule, norm_eval)
    bench = AugmentBench(training, tuple(s for s in specs if s), tuple(attrs), eval_data,
                         chosen_split(eval_data or data, eval_split, "val"), eval_limit,
                         {attr: list(vals) for attr, vals in (values or {}).items()}, backend,
                         eval_seed_for(out, resume, eval_seed, seed))
    result = run(bench, out, resume, on_subset, on_train, on_step, on_records, on_scoring)
    rows = [{"augmentation": r["augmentation"], "model": r["model"], **r["miou"],
             **{k: v for k, v in r.items() if k.startswith(("mr_", "rmiou_"))}}
            for r in result["rows"]]
    return Table(rows, out=Path(out), files=write_outputs(result, Path(out)), details=result)
