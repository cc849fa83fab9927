"""`segtk.edit` and `segtk.bench_edits`: the jobs behind `segtk edit` and `segtk bench edits`,
which call these functions, so Python and the CLI make the same edits and numbers."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from segtk.api.loading import (
    comma_list,
    data_of,
    pairs_of,
    pixel_limited,
    spec_of,
    split_of,
)
from segtk.api.models import ModelKeywords
from segtk.api.objects import bench_inputs
from segtk.api.results import Table
from segtk.benchmarks.edit_quality import build_metrics, measure_quality, write_quality
from segtk.benchmarks.edits import (
    ScoreLine,
    aggregate,
    build_subsets,
    plan,
    run_bench,
    write_outputs,
)
from segtk.class_names import check_models
from segtk.core import Dataset, SegtkError, declared, load_dataset, registry
from segtk.core._device import resolve_device
from segtk.core._inprocess import in_process
from segtk.editkit import CLASSICAL, DEFAULT_MIN_AREA, backend_class
from segtk.jobs.edit import (
    EditConfig,
    EditRun,
    EditSummary,
    build_editor,
    build_filter,
    captioner_settings,
    edit_dataset,
    load_captioner,
    load_prompt_writer,
    no_edits,
    object_things,
    parse_filter_params,
    prompt_settings,
    run_config,
)
from segtk.jobs.edit_records import EditLine, SkipLine
from segtk.jobs.executors import make_executor
from segtk.jobs.overwrite import overwrite_run
from segtk.storage.layout import QUALITY_CSV, RESULTS
from segtk.storage.runs import RunDir

__all__ = ["edit", "bench_edits", "BENCH_ATTRIBUTES", "selection_config"]

BENCH_ATTRIBUTES = "color,material,style,weather,size,position"
FilterParams = Mapping[str, Mapping[str, Any]] | Iterable[str] | None


def _warn(message: str) -> None:
    warnings.warn(message, stacklevel=3)


def filter_items(params: FilterParams) -> list[str]:
    """Filter options as `--filter-param` items NAME.KEY=VALUE (a dict {NAME: {KEY: VALUE}}
    is written as those items)."""
    if params is None:
        return []
    if isinstance(params, Mapping):
        return [f"{name}.{key}={value}" for name, opts in params.items() for key, value in opts.items()]
    return [params] if isinstance(params, str) else list(params)


def with_device(params: dict[str, Any], cls: type | None, device: str | None,
                key: str = "device") -> dict[str, Any]:
    """`params` with `key`=`device` (a resolved name) for a plugin class (an editor's backend,
    a filter) that declares a `device` parameter the user did not set; as they are without a
    device."""
    if device is None or cls is None or "device" not in declared(cls).params or key in params:
        return params
    return {**params, key: device}


@pixel_limited
def edit(data: str | Dataset, editor: str, values: str | Sequence[str] | None = None,
         out: str | Path | None = None, device: str | None = None, *,
         backend: str = CLASSICAL, split: str | None = None,
         limit: int | None = None, variants: int = 1, pick: str = "all",
         object_centric: bool = False, seed: int = 0, resume: bool = False,
         overwrite: bool = False,
         min_area: float = DEFAULT_MIN_AREA, exclude: str | Sequence[str] | None = None,
         classes: str | Sequence[str] | None = None, objects: str = "largest",
         things_only: bool = False, params: Mapping[str, Any] | Iterable[str] | None = None,
         filters: str | Sequence[str] = (), filter_params: FilterParams = None,
         prompt_model: str | None = None, prompt_writer: str | None = None,
         captioner: str | None = None,
         captioner_params: Mapping[str, Any] | Iterable[str] | None = None,
         sheet_rows: int = 12, save_sources: bool = True,
         on_start: Callable[[int], None] | None = None,
         on_edit: Callable[[EditLine | SkipLine], None] | None = None,
         on_table: Callable[[Table], None] | None = None,
         warn: Callable[[str], None] = _warn, max_pixels: int | None = None) -> Table:
    """Edit an attribute of `data`'s labelled images with the editor plugin `editor` into an
    edited dataset in `out` (default runs/edit-EDITOR), as `segtk edit` does; read it back with
    `load_dataset("edited:OUT")`.

    `values`: the attribute values (default: all the editor's); `params`: the editor's own
    parameters (a dict, or KEY=VALUE items); `filters` and `filter_params` ({NAME: {KEY:
    VALUE}}): noise filters; `captioner` (with `captioner_params`, a dict or KEY=VALUE items):
    the captioner plugin that writes each image's source caption P. Returns the counts as rows (outcome "edited" or "skipped: REASON",
    edits, source_images) with `details` holding the manifest records ("edited": EditLine, each
    also read as its line's dict), the skipped ones ("skipped": SkipLine), the "values" and the
    number of source "images"; `on_edit` sees each of those records. Raises SegtkError when
    every planned edit was skipped, after `on_table` has seen the table. `device` (cpu, cuda,
    cuda:N, auto) goes to the backend and filters that take a `device` parameter not given in
    `params`/`filter_params`; None leaves them their own default.
    """
    if overwrite:  # start over: clear what an earlier run wrote in `out`
        overwrite_run(out, "edit", resume)
    where = None if device is None else str(resolve_device(device))  # a missing CUDA: said first
    cls = backend_class(backend)  # an unknown backend or a missing dependency: said next
    writer = load_prompt_writer(prompt_writer, prompt_model)
    caption_items = [f"{k}={v}" for k, v in pairs_of(captioner_params, "--captioner-param").items()]
    captioner_obj = load_captioner(captioner, caption_items)
    editor_obj = build_editor(editor, backend, with_device(pairs_of(params, "--param"), cls, where))
    filter_names = list(dict.fromkeys(comma_list(filters)))
    filter_opts = parse_filter_params(filter_names, filter_items(filter_params))
    filter_objs = [build_filter(n, with_device(filter_opts[n], registry.plugin_class("filter", n),
                                               where)) for n in filter_names]
    value_list = [editor_obj.check_value(v) for v in comma_list(values)] if values \
        else list(editor_obj.values)
    if not value_list:
        raise SegtkError(f"editor {editor!r} has no values", hint="pass --values")
    value_list = list(dict.fromkeys(value_list))
    dataset = data_of(data, split, limit)
    exclude_list = None if exclude is None else comma_list(exclude)
    only_list = comma_list(classes) if classes else None
    known = {c.lower() for c in dataset.classes}
    if only_list and not any(c.lower() in known for c in only_list):
        shown = classes if isinstance(classes, str) else ",".join(classes or ())
        raise SegtkError(f"--classes {shown}: none of these is a class of {dataset.name}",
                         hint=f"classes: {', '.join(dataset.classes)}")
    for name in (only_list or []) + (exclude_list or []):
        if name.lower() not in known:
            warn(f"{name!r} is not a class of {dataset.name}")
    folder = Path(out or f"runs/edit-{editor}")
    settings = EditConfig(value_list, variants, seed, min_area, exclude_list, only_list,
                          save_sources, sheet_rows, filter_objs, writer, pick, object_centric,
                          objects, things_only, captioner_obj)
    object_things(dataset, settings)  # no thing class to pick: say so before OUT is made
    config = run_config(editor_obj, editor, backend, spec_of(dataset), split_of(dataset), limit,
                        settings, filter_opts, **prompt_settings(prompt_writer, prompt_model),
                        **captioner_settings(captioner, caption_items),
                        **({"device": where} if where else {}))  # None: as runs before it
    with EditRun(folder, config, resume) as run:
        if on_start:
            on_start(len(dataset) * (1 if pick == "one" else len(value_list)) * variants)
        summary = edit_dataset(editor_obj, dataset, run, settings, on_edit)
    table = _edit_table(summary, folder, value_list, len(dataset))
    if on_table:
        on_table(table)
    if not summary.edited:
        raise no_edits(summary, folder)
    return table


def _edit_table(summary: EditSummary, out: Path, values: list[str], images: int) -> Table:
    rows = [{"outcome": outcome, "edits": edits, "source_images": sources}
            for outcome, edits, sources in summary.table()]
    return Table(rows, out=out, details={"edited": summary.edited, "skipped": summary.skipped,
                                         "values": values, "images": images})


def selection_config(min_area: float, objects: str, things_only: bool) -> dict[str, Any]:
    """How the salient object was chosen, for run.json: only what differs from the defaults,
    so that runs from before these options resume."""
    config: dict[str, Any] = {}
    if min_area != DEFAULT_MIN_AREA:
        config["min_area"] = min_area
    if objects != "largest":
        config["objects"] = objects
    if things_only:
        config["things_only"] = True
    return config


@pixel_limited
def bench_edits(models: Any = "demo", data: Any = "demo",
                attributes: str | Sequence[str] = BENCH_ATTRIBUTES,
                values: Mapping[str, Sequence[str]] | None = None,
                out: str | Path = "runs/bench-edits", *, split: str | None = None,
                limit: int | None = None, pick: str = "one", object_centric: bool = True,
                min_area: float = DEFAULT_MIN_AREA, objects: str = "largest",
                things_only: bool = False, backend: str = CLASSICAL,
                params: Mapping[str, Any] | Iterable[str] | None = None,
                filters: str | Sequence[str] = (), filter_params: FilterParams = None,
                prompt_model: str | None = None, prompt_writer: str | None = None,
                seed: int = 0, batch_size: int = 4, chunk: int = 8, executor: str = "local",
                workers: int | None = None, address: str | None = None, resume: bool = False,
                overwrite: bool = False,
                classes_from_data: bool = False, device: str | None = None,
                quality: str | Sequence[str] = (), metric_params: FilterParams = None,
                captioner: str | None = None,
                captioner_params: Mapping[str, Any] | Iterable[str] | None = None,
                on_subset: Callable[[str, EditSummary], None] | None = None,
                on_start: Callable[[int, int], None] | None = None,
                on_records: Callable[[int], None] | None = None,
                max_pixels: int | None = None) -> Table:
    """Edited subsets × models → mIoU per subset, RmIoU and mR (Gen4Seg Tab. II/III), as
    `segtk bench edits`: the subsets are built (or reused) in OUT/edits/SUBSET.

    `models`, `data`: specs, or objects as `bench_attacks` takes them (run in this process).
    `values`: {ATTRIBUTE: [VALUE, ...]} (default: every editor's values). Returns one row per
    model and subset (model, subset, miou in %, images), with `details` holding the whole
    result: "groups" (one row per model and group: reference, reference_miou, rmiou, mr,
    subsets), "miou" ({model: {subset: %}}), "subsets", "models", "images". `device` (cpu,
    cuda, cuda:N, auto): where the models are scored, and what the backend and filters with a
    `device` parameter get (as in `edit`); None: cpu for the models, the plugins' defaults.
    `quality`: editing-quality metric plugins measured on every edited subset (Gen4Seg Tables
    I, VII-IX; `metric_params` {NAME: {KEY: VALUE}} or NAME.KEY=VALUE items, e.g. their model
    folders): `details["quality"]` holds "columns", "better", "values" {subset: {column:
    number}}, "per_image" and "images", also in OUT/quality.csv and OUT/table.json.
    `captioner` (with `captioner_params`): writes the source captions of every subset's edits,
    as in `edit`.
    """
    if overwrite:  # start over: clear what an earlier run wrote in `out`
        overwrite_run(out, "bench-edits", resume)
    where = str(resolve_device(device))
    inputs = bench_inputs(models, data, "bench_edits", ModelKeywords(), executor, workers, where)
    model_list, data, executor = inputs.models, inputs.data, inputs.executor
    with in_process(inputs.objects):
        attrs = comma_list(attributes)
        if not model_list or not attrs:
            raise SegtkError("--models and --attributes must name at least one each")
        out_dir = Path(out)
        if not resume and (out_dir / RESULTS).exists():
            raise SegtkError(f"{out_dir} already holds results",
                             hint="pass --resume to continue that run, --overwrite to start it "
                                  "over, or choose another --out")
        # before any subset is edited: the subsets keep the source data's classes
        check_models(model_list, load_dataset(data, split, 1), classes_from_data, where)
        writer = load_prompt_writer(prompt_writer, prompt_model)
        prompts = prompt_settings(prompt_writer, prompt_model)
        quality_list = list(dict.fromkeys(comma_list(quality)))
        metric_items = filter_items(metric_params)
        metrics = build_metrics(quality_list, metric_items)  # a bad metric: said before any edit
        caption_items = [f"{k}={v}" for k, v in pairs_of(captioner_params, "--captioner-param").items()]
        captioner_obj = load_captioner(captioner, caption_items)
        captions = captioner_settings(captioner, caption_items)
        given = None if device is None else where
        editor_params = with_device(pairs_of(params, "--param"), backend_class(backend), given)
        value_map = {attr: list(vals) for attr, vals in (values or {}).items()}
        filter_list = comma_list(filters)
        filter_param_items = filter_items(filter_params)
        if device is not None:  # each filter with a device parameter not given gets it
            set_by_user = {i.partition(".")[0] for i in filter_param_items
                           if i.partition("=")[0].endswith(".device")}
            filter_param_items += [f"{n}.device={where}" for n in filter_list if n not in set_by_user
                                   and "device" in declared(registry.plugin_class("filter", n)).params]
        config = {"models": model_list, "data": data, "split": split, "limit": limit,
                  **({"device": where} if device is not None else {}),  # None: as runs before it
                  "attributes": attrs, "backend": backend, "values": value_map,
                  "filters": filter_list, "filter_params": filter_param_items, "seed": seed,
                  "pick": pick, "object_centric": object_centric, **prompts,
                  **({"classes_from_data": True} if classes_from_data else {}),  # older runs lack it
                  **({"params": editor_params} if editor_params else {}),
                  **selection_config(min_area, objects, things_only),
                  **({"quality": quality_list, "metric_params": metric_items} if quality_list else {}),
                  **captions}
        # params are recorded (when given) for --resume to read; each subset's own run.json checks
        # them, so they may differ here (runs made before they were recorded hold none)
        # the quality metrics are measured afresh on every run: a resumed run may add or drop them
        # run.json is written before the subsets are built: a run killed there can be resumed
        with RunDir(out_dir, config, resume, may_differ=("params", "quality", "metric_params"),
                    kind="bench-edits") as run:
            subsets = build_subsets(data, split, limit, attrs, out_dir, backend, value_map,
                                    filter_list, filter_param_items, seed, editor_params, on_subset,
                                    pick, object_centric, writer, prompts, min_area, objects,
                                    things_only, captioner_obj, captions)
            shards = plan(model_list, subsets, chunk, batch_size, where)
            if on_start:
                on_start(len(shards), sum(len(s.images) for s in shards))
            run_bench(shards, run, make_executor(executor, workers, address, where), on_records,
                      classes_from_data)
            result = aggregate(list(ScoreLine.keyed(run.done(key="key"), out_dir / RESULTS).values()),
                               shards)
            if metrics:
                result["quality"] = measure_quality(subsets, metrics, _warn)
            files = write_outputs(result, out_dir)
            if metrics:
                files.append(write_quality(result["quality"], out_dir / QUALITY_CSV))
        rows = [{"model": m, "subset": s, "miou": v, "images": result["images"][m][s]}
                for m in result["models"] for s, v in result["miou"][m].items()]
        return Table(rows, out=out_dir, files=files, details=result)
