"""`segtk.attack` and `segtk.bench_attacks`: the jobs behind `segtk attack` and `segtk bench
attacks`, which call these functions, so Python and the CLI give the same numbers."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from segtk.api import sanity
from segtk.api.loading import (
    comma_list,
    data_of,
    model_of,
    pairs_of,
    pixel_limited,
    spec_of,
    split_of,
)
from segtk.api.models import ModelKeywords
from segtk.api.objects import bench_inputs
from segtk.api.results import AttackRun, MemoryRun, StoredImages, Table, in_percent
from segtk.benchmarks.attacks import (
    BenchResult,
    Shard,
    aggregate,
    bench_records,
    build_spec,
    check_white_box,
    parse_spec,
    plan,
    run_bench,
    white_box_gaps,
    with_recorded,
    write_contact_sheet,
    write_outputs,
)
from segtk.class_names import check_compatible, check_models
from segtk.core import Segmenter, SegtkError, build, load_dataset
from segtk.core._attack import check_gradients
from segtk.core._device import resolve_device
from segtk.core._eps import check_eps
from segtk.core._inprocess import in_process
from segtk.core._specs import cached_segmenter
from segtk.jobs.attack import AttackRecord, attack_dataset, run_settings
from segtk.jobs.executors import make_executor
from segtk.jobs.overwrite import overwrite_run
from segtk.storage import layout
from segtk.storage.runs import RunDir, load_run_file

__all__ = ["attack", "bench_attacks", "BENCH_ATTACKS", "BENCH_BUDGETS", "SCORES"]

BENCH_ATTACKS = "dla,random,nes,bandits,zo-signsgd,signhunter,simba,square"
BENCH_BUDGETS = "10,50,200"
SCORES = "stored 8-bit images"  # what the bench table scores (runs before this scored floats)


@pixel_limited
def attack(model: str | Segmenter | torch.nn.Module, data: Any, attack: str = "dla", budget: int = 50,
           eps: float = 8.0, seed: int = 0, limit: int | None = None,
           params: Mapping[str, Any] | Iterable[str] | None = None,
           out: str | Path | None = None, device: str | None = None, *,
           split: str | None = None, batch_size: int = 8, time_limit: float | None = None,
           save_images: bool = True, resume: bool = False, overwrite: bool = False,
           classes_from_data: bool = False,
           on_start: Callable[[int], None] | None = None,
           on_image: Callable[[AttackRecord], None] | None = None,
           on_queries: Callable[[int], None] | None = None,
           max_pixels: int | None = None, reference: str = "labels",
           classes: Sequence[str] | None = None, mean: Sequence[float] | None = None,
           std: Sequence[float] | None = None, size: tuple[int, int] | None = None,
           warn: Callable[[str], None] = sanity.warn) -> AttackRun:
    """Run the attack plugin `attack` on every image of `data` against `model`; score the
    stored 8-bit adversarial images.

    `model`: a spec (as `--model`), a loaded model (`load_model`) or a torch.nn.Module
    returning logits [B,K,H,W], wrapped with `classes`, `mean`, `std`, `size` (see
    `segtk.wrap`). `data`: a spec (as `--data`), a loaded dataset (`load_dataset`), a pair of
    tensors (images [B,3,H,W] in [0,1], labels [B,H,W]), a list of (image, label) pairs or a
    DataLoader yielding them (their classes are the model's). `budget`: queries per image (the clean query counts); `eps`: L∞ bound on
    the 0–255 scale; `params`: the attack's own parameters (a dict, or KEY=VALUE items as
    `--param` takes them). `out`: a run folder written exactly as `segtk attack --out` writes
    it (resumable with `resume=True`); None keeps everything in memory and writes nothing.
    `device`: cpu, cuda, cuda:N or auto (CUDA when present) for the model and every tensor of
    the job; None: cpu for a spec, where a loaded model is for a loaded one (given, a loaded
    model is moved there). `on_start(images)` and `on_image(record)` follow the progress
    (the CLI's progress bar), `on_queries(n)` too, in image-queries (`budget` per image, as
    the model answers). `reference`: what the attack's proxy scores each query against,
    "labels" (the ground truth) or "prediction" (the model's labels for the clean image: no
    ground truth needed, so `data` may be a folder without labels; images without labels are
    then scored against their clean prediction, and each record says which). A clean mIoU
    under 5% on the first batch is said once through `warn` (default: a Python warning)
    before the attack: the model's preprocessing, class order or the label encoding is
    likely wrong.
    """
    if overwrite:  # start over: clear what an earlier run wrote in `out`
        overwrite_run(out, "attack", resume)
    attack_obj = build("attack", attack, pairs_of(params, "--param"), budget=budget, eps=eps,
                       seed=seed, time_limit=time_limit, reference=reference)
    if out is None and resume:
        raise SegtkError("resume=True needs the run folder to resume", hint="pass out=FOLDER")
    segmenter = model_of(model, device, ModelKeywords(classes, mean, std, size))
    dataset = data_of(data, split, limit, unlabelled=reference == "prediction", model=segmenter)
    check_compatible(segmenter, dataset, classes_from_data)  # before the run writes anything
    check_gradients(type(attack_obj), segmenter)  # a white-box attack needs a model's gradients
    sanity.check_clean_miou(segmenter, dataset, batch_size, warn)
    config = {"attack": attack, **run_settings(attack_obj.params), "model": spec_of(segmenter),
              "data": spec_of(dataset), "split": split_of(dataset), "limit": limit,
              "device": str(resolve_device(segmenter.device)),
              **({"classes_from_data": True} if classes_from_data else {})}  # older runs lack it
    kept: dict[str, np.ndarray] = {}
    if out is None:
        run: RunDir | MemoryRun = MemoryRun()
    else:  # records are per image, so --limit may change
        run = RunDir(out, config, resume, may_differ=("limit",), kind="attack")
    try:
        if on_start:
            on_start(len(dataset))
        summary = attack_dataset(attack_obj, segmenter, dataset, run, batch_size,
                                 save_images and out is not None, on_image,
                                 on_stored=kept.__setitem__ if out is None else None,
                                 on_queries=on_queries)
    finally:
        run.close()
    images = kept if out is None else \
        StoredImages(Path(out) / layout.IMAGES, dataset.names) if save_images else {}
    return AttackRun(summary.records, in_percent(summary.table), images,
                     None if out is None else Path(out))


def _eps_values(eps: float | Sequence[float]) -> list[float]:
    values = [float(e) for e in ([eps] if isinstance(eps, int | float) else eps)]
    if not values:
        raise SegtkError("eps names no value", hint="e.g. eps=8 or eps=[4, 8, 16]")
    return list(dict.fromkeys(check_eps(v) for v in values))


@pixel_limited
def bench_attacks(models: Any = "demo", data: Any = "demo",
                  attacks: str | Sequence[str] = BENCH_ATTACKS,
                  budgets: str | Sequence[int] = BENCH_BUDGETS, eps: float | Sequence[float] = 8.0,
                  repeats: int = 3, seed: int = 0, limit: int | None = None,
                  out: str | Path | None = None, device: str | None = "cpu", *,
                  split: str | None = None, time_limit: float | None = None,
                  batch_size: int = 8, chunk: int = 8,
                  executor: str = "local", workers: int | None = None,
                  address: str | None = None, resume: bool = False, table_only: bool = False,
                  overwrite: bool = False,
                  classes_from_data: bool = False,
                  on_start: Callable[[int, int], None] | None = None,
                  on_records: Callable[[int], None] | None = None,
                  max_pixels: int | None = None, reference: str = "labels",
                  classes: Sequence[str] | None = None, mean: Sequence[float] | None = None,
                  std: Sequence[float] | None = None, size: tuple[int, int] | None = None,
                  warn: Callable[[str], None] = sanity.warn) -> Table:
    """Attack specs × budgets (× ε × models) → dataset mIoU % of the stored 8-bit images, mean
    ± std over `repeats` (repeat r uses seed + r): `segtk bench attacks`.

    `models`: one model or a list: specs (the shards load them in their workers), or model
    objects as `segtk.attack` takes them (with `classes`, `mean`, `std`, `size` for a torch
    module), and `data` a spec or a data object as `segtk.attack` takes it: objects run their
    shards in this process (several workers or Ray are refused), and rows name such a model
    `python:NAME` (resuming needs the same objects). `attacks`: specs
    NAME[:KEY=VALUE;...] (a list, or comma-separated); `budgets`, `eps`: one value or several.
    Returns the table's rows (model, attack, eps, budget, miou_mean, miou_std, pacc_mean,
    images, repeats, white_box, and the visibility columns at the largest budget) with
    `details["curves"]` (the proxy per query, per model and attack) and `details["gaps"]` (each
    decision-based attack's distance to the best white-box one). `out`: the run folder, written
    as the CLI writes it (table.csv, table.json, curves, contact sheet; resumable); None keeps
    the records in memory and writes nothing. `table_only`: run nothing, write nothing,
    tabulate what `out` holds. `device`: where every shard's model and tensors live (cpu,
    cuda, cuda:N, auto). `reference="prediction"` makes every spec label-free (adds
    `reference=prediction` to it, so its rows say so; a spec may also set it itself): its
    queries are scored against the clean image's predicted labels, and `data` may be a folder
    without labels (its images are then scored against their clean prediction).
    `on_start(shards, images)` and `on_records(n)` follow the progress. A model whose clean
    mIoU on the first batch is under 5% is said once through `warn` before anything runs.
    """
    if overwrite:  # start over: clear what an earlier run wrote in `out`
        overwrite_run(out, "bench-attacks", resume or table_only)
    # a table of what OUT holds runs nothing: it needs no device (and may be read elsewhere)
    where = str(device or "cpu") if table_only else str(resolve_device(device))
    inputs = bench_inputs(models, data, "bench_attacks", ModelKeywords(classes, mean, std, size),
                          executor, workers, where)
    with in_process(inputs.objects):
        return _bench_attacks(inputs.models, inputs.data, attacks, budgets, eps, repeats, seed,
                              limit, out, where, split, time_limit, batch_size, chunk,
                              inputs.executor, workers, address, resume, table_only,
                              classes_from_data, on_start, on_records, reference, warn)


def _bench_attacks(model_list: list[str], data: str, attacks: str | Sequence[str],
                   budgets: str | Sequence[int], eps: float | Sequence[float], repeats: int,
                   seed: int, limit: int | None, out: str | Path | None, where: str,
                   split: str | None, time_limit: float | None, batch_size: int, chunk: int,
                   executor: str, workers: int | None, address: str | None, resume: bool,
                   table_only: bool, classes_from_data: bool,
                   on_start: Callable[[int, int], None] | None,
                   on_records: Callable[[int], None] | None, reference: str,
                   warn: Callable[[str], None]) -> Table:
    if not model_list:
        raise SegtkError("models names no model", hint="e.g. models=['demo']")
    labels = list(dict.fromkeys(with_reference(s, reference) for s in comma_list(attacks)))
    budget_list = [int(b) for b in comma_list(budgets)]
    sweep = _eps_values(eps)
    for label in labels:  # a bad spec, value or ε fails before any work
        for e in sweep:
            build_spec(label, budget=max(budget_list), eps=e, seed=seed, time_limit=time_limit)
    if out is None and (resume or table_only):
        raise SegtkError("resume and table_only need the run folder", hint="pass out=FOLDER")
    label_free = all(parse_spec(label).params.get("reference") == "prediction" for label in labels)
    dataset = load_dataset(data, split, limit, unlabelled=label_free)
    if not table_only:  # before run.json is written
        check_models(model_list, dataset, classes_from_data, where)
        check_white_box(model_list, labels, where)  # a white-box spec on a model without gradients
        for spec in dict.fromkeys(model_list):
            sanity.check_clean_miou(cached_segmenter(spec, where), dataset, batch_size, warn)
    shards = plan(model_list, data, split, labels, budget_list, repeats, dataset.names, chunk,
                  sweep, seed, batch_size, sheet_dir=None if out is None else str(Path(out) / layout.SHEET_DIR),
                  time_limit=time_limit, device=where)
    config = {"attacks": labels, "budgets": budget_list, "models": model_list, "data": data,
              "split": split, "images": dataset.names, "repeats": repeats, "eps": sweep,
              "seed": seed, "limit": limit, "scores": SCORES, "device": where,
              **({"time_limit": time_limit} if time_limit is not None else {}),
              **({"reference": reference} if reference != "labels" else {}),  # older runs lack it
              **({"classes_from_data": True} if classes_from_data else {})}  # older runs lack it
    if out is None:
        result = _run_bench(MemoryRun(), shards, on_start, on_records, classes_from_data,
                            make_executor(executor, workers, address, where))
        return Table(result.rows, details=_details(result))
    if table_only and not (Path(out) / layout.RESULTS).is_file():
        raise SegtkError(f"{out} holds no benchmark records", hint="run it first, without --table-only")
    # Records are keyed per spec, ε and image (so --limit may change, the images it keeps may
    # not); table_only may watch a bench still running.
    if resume or table_only:
        check_same_images(Path(out), dataset.names)
    with RunDir(out, config, resume or table_only,
                may_differ=("attacks", "eps", "limit", "images",
                            *(("device",) if table_only else ())),
                read_only=table_only, kind="bench-attacks") as run:
        result = _run_bench(run, shards, on_start, on_records, classes_from_data,
                            None if table_only
                            else make_executor(executor, workers, address, where))
        if table_only:  # a look at what OUT holds writes nothing (another process may be writing)
            return Table(result.rows, out=Path(out), details={**_details(result), "sheet": None})
        files = write_outputs(result, Path(out))
    every = list(dict.fromkeys(r["attack"] for r in result.rows if r["attack"] != "clean"))
    sheet = write_contact_sheet(Path(out), dataset, every, max(budget_list), max(sweep))
    return Table(result.rows, out=Path(out), files=files, details={**_details(result), "sheet": sheet})


def with_reference(spec: str, reference: str) -> str:
    """The canonical label of the attack spec `spec` run with the bench's `reference` (see
    bench_attacks): as it is for labels (a spec may set reference=prediction itself, to table
    both), else with reference=prediction added unless the spec sets it."""
    parsed = parse_spec(spec)
    if reference not in ("labels", "prediction"):
        raise SegtkError(f"unknown reference={reference!r}",
                         hint="use labels (the ground truth) or prediction")
    if reference == "labels" or "reference" in parsed.params:
        if parsed.params.get("reference", reference) != reference and reference != "labels":
            raise SegtkError(f"attack spec {spec!r} sets reference={parsed.params['reference']}, "
                             f"the bench reference={reference}",
                             hint="leave reference out of the spec, or the bench option")
        return parsed.label
    joined = ";".join([*(f"{k}={v}" for k, v in parsed.params.items()), f"reference={reference}"])
    return parse_spec(f"{parsed.name}:{joined}").label


def check_same_images(out: Path, images: Sequence[str]) -> None:
    """Refuse to resume a bench whose data lists other images than its run.json (the data
    changed on disk): a --limit may take fewer or more of them, never others."""
    recorded = ((load_run_file(out / layout.RUN) or {}).get("config") or {}).get("images")
    if not isinstance(recorded, list):
        return
    for i, (then, now) in enumerate(zip(recorded, images)):
        if then != now:
            raise SegtkError(f"{out} holds a run on other images: image {i + 1} is {then!r} in "
                             f"{layout.RUN}, {now!r} in the data now",
                             hint="resume with the data the run was made with, or choose "
                                  "another --out")


def _run_bench(run: RunDir | MemoryRun, shards: list[Shard],
               on_start: Callable[[int, int], None] | None,
               on_records: Callable[[int], None] | None, classes_from_data: bool,
               executor: Any | None) -> BenchResult:
    """Run the shards not done yet into `run` (none without an `executor`: only tabulate), and
    aggregate its records."""
    if executor is not None:
        if on_start:
            on_start(len(shards), sum(len(s.images) for s in shards))
        run_bench(shards, run, executor, on_records, classes_from_data)
    # with what earlier invocations added
    records = bench_records(run.done(key="key").values(), run.path and run.path / layout.RESULTS)
    return aggregate(records, with_recorded(shards, records))


def _details(result: BenchResult) -> dict[str, Any]:
    return {"curves": result.curves, "gaps": white_box_gaps(result.rows)}
