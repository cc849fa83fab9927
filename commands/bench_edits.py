"""`segtk bench edits`: Gen4Seg robustness tables (mIoU per edited subset, RmIoU, mR)."""

from __future__ import annotations

import re

import click
from rich.markup import escape

from segtk import api
from segtk.api.edits import BENCH_ATTRIBUTES
from segtk.commands.console import JobProgress, console, quiet_option, result_line, table
from segtk.commands.options import (
    DEMO_MODEL,
    classes_from_data_option,
    csv_list,
    data_option,
    device_option,
    limit_option,
    max_pixels_option,
    prompt_options,
    same_device,
    shard_options,
    split_option,
)
from segtk.commands.resume import Recorded, joined, pairs, resumable
from segtk.core import SegtkError, parse_pairs, registry
from segtk.core._specs import split_spec
from segtk.editkit import CLASSICAL, DEFAULT_MIN_AREA, OBJECT_RULES
from segtk.jobs.edit import PICKS
from segtk.reports.writer import report_of
from segtk.storage.layout import QUALITY_CSV, RUN


def values_items(values: dict[str, list[str]]) -> tuple[str, ...]:
    """Recorded {ATTR: [V1, V2]} as the `--values ATTR=V1,V2` items."""
    return tuple(f"{attr}={','.join(vals)}" for attr, vals in values.items())


def split_models(value: str) -> list[str]:
    """'A,B' -> model specs, keeping a spec's own commas: a part that starts neither with a
    model plugin's name nor with `NAME:` (a detectron2/mmseg/hf spec's ',WEIGHTS' or
    ',classes=...') continues the spec before it."""
    names = {i.name for i in registry.plugins() if i.kind == "model"}
    specs: list[str] = []
    for part in csv_list(value):
        name = split_spec(part)[0]
        if specs and name not in names and not (":" in part and re.fullmatch(r"[A-Za-z][\w-]*", name)):
            specs[-1] += "," + part
        else:
            specs.append(part)
    return specs


def parse_values(items: tuple[str, ...]) -> dict[str, list[str]]:
    """`--values ATTR=V1,V2` items -> {ATTR: [V1, V2]}."""
    syntax = "write --values ATTR=V1,V2, e.g. --values color=red,blue"
    out = {attr: csv_list(vals) for attr, vals in parse_pairs(items, "--values", hint=syntax).items()}
    for attr, vals in out.items():
        if not vals:
            raise SegtkError(f"--values {attr}=: no values given", hint=syntax)
    return out


# Where run.json records each option (see commands.resume); --param is compared by each
# subset's own run.json (OUT/edits/SUBSET), which records the editor's parameters.
RECORDED = {
    "models_": Recorded("models", joined, split_models),
    "data_spec": Recorded("data"), "split": Recorded("split"), "limit": Recorded("limit"),
    "classes_from_data": Recorded("classes_from_data", absent=False),
    "attributes": Recorded("attributes", joined, csv_list),
    "values": Recorded("values", values_items, parse_values),
    "pick": Recorded("pick"), "object_centric": Recorded("object_centric"),
    "min_area": Recorded("min_area", absent=DEFAULT_MIN_AREA),
    "objects": Recorded("objects", absent="largest"),
    "things_only": Recorded("things_only", absent=False),
    "prompt_model": Recorded("prompt_model"), "prompt_writer_name": Recorded("prompt_writer"),
    "backend": Recorded("backend"), "extra": Recorded("params", pairs, None),
    "filters": Recorded("filters", joined, csv_list),
    "filter_params": Recorded("filter_params", tuple, lambda v: parse_pairs(v, "--filter-param")),
    "seed": Recorded("seed"), "device": Recorded("device", same=same_device),
    "quality": Recorded("quality", joined, csv_list),
    "metric_params": Recorded("metric_params", tuple, lambda v: parse_pairs(v, "--metric-param")),
    "captioner_name": Recorded("captioner"),
    "captioner_params": Recorded("captioner_params", pairs, None),
}


@click.command("edits")
@click.option("--models", "models_", default=DEMO_MODEL, show_default=True,
              help="Comma-separated model specs.")
@data_option
@split_option
@limit_option
@max_pixels_option
@classes_from_data_option
@device_option
@click.option("--attributes", default=BENCH_ATTRIBUTES,
              show_default=True,
              help="Comma-separated editors: one edited subset each (size and position: one per level).")
@click.option("--values", "values", multiple=True, metavar="ATTR=V1,V2",
              help="Values of one attribute, comma-separated [default: all the editor's "
                   "values]; repeat for another attribute, e.g. --values color=red,blue "
                   "--values size=0.2.")
@click.option("--pick", type=click.Choice(PICKS), default="one", show_default=True,
              help="one = one value drawn per image into the attribute's subset (Gen4Seg's "
                   "random candidate prompt); all = every value on every image. Levels "
                   "(size, position) are always one subset each.")
@click.option("--object-centric/--all-images", default=True, show_default=True,
              help="Every subset (style, weather and Recon too) only on images with a salient "
                   "object, as Gen4Seg §IV-A, so all subsets share their images.")
@click.option("--min-area", type=click.FloatRange(0, 1), default=DEFAULT_MIN_AREA,
              show_default=True, help="Smallest salient object, as a share of the image.")
@click.option("--objects", type=click.Choice(OBJECT_RULES), default="largest", show_default=True,
              help="largest region, or the first usable instance ranked by area (see segtk edit).")
@click.option("--things-only", is_flag=True,
              help="Only the dataset's thing classes may be the object (COCO-EA; see segtk edit).")
@prompt_options
@click.option("--captioner", "captioner_name", default=None, metavar="NAME",
              help="Captioner plugin that writes each image's source caption P instead of the "
                   "class template (see segtk edit), e.g. blip.")
@click.option("--captioner-param", "captioner_params", multiple=True, metavar="KEY=VALUE",
              help="Captioner option (repeat for several), e.g. --captioner-param model=DIR.")
@click.option("--backend", default=CLASSICAL, show_default=True, metavar="NAME",
              help="classical, or an edit-backend plugin (see `segtk plugins`); a backend with "
                   "a reference editor (diffusion: recon) also builds and scores that subset, "
                   "the appearance mR reference.")
@click.option("--param", "extra", multiple=True, metavar="KEY=VALUE",
              help="Editor/backend parameter for every attribute (repeat for several), e.g. "
                   "--param sd=DIR.")
@click.option("--filters", default="", help="Comma-separated noise filters (clip, surrogate).")
@click.option("--filter-param", "filter_params", multiple=True, metavar="NAME.KEY=VALUE",
              help="Filter option (repeat for several), e.g. "
                   "surrogate.model=espnet:camvid=PATH.")
@click.option("--quality", default="", metavar="METRIC[,METRIC]",
              help="Editing-quality metrics measured on every edited subset (Gen4Seg Tables I, "
                   "VII-IX), e.g. clip-accuracy,masked-lpips,dino-distance,fd (metric plugins, "
                   f"see `segtk plugins`). Written to OUT/{QUALITY_CSV}.")
@click.option("--metric-param", "metric_params", multiple=True, metavar="NAME.KEY=VALUE",
              help="Metric option (repeat for several), e.g. --metric-param "
                   "clip-accuracy.model=DIR --metric-param masked-lpips.weights=FILE.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--batch-size", type=click.IntRange(min=1), default=4, show_default=True)
@shard_options
@click.option("--out", type=click.Path(file_okay=False), default="runs/bench-edits",
              show_default=True)
@click.option("--resume", is_flag=True,
              help="Keep finished results in OUT and run the rest; the options left out are "
                   f"read from OUT/{RUN}.")
@quiet_option
@click.option("--report", "write_html", is_flag=True, help="Also write OUT/report.html (see `segtk report`); a --resume "
                   "rewrites the one OUT holds, --report or not.")
@resumable("bench-edits", RECORDED)
def bench_edits(models_, data_spec, split, limit, classes_from_data, device, attributes, values, pick,
                object_centric, min_area, objects, things_only,
                prompt_model, prompt_writer_name, captioner_name, captioner_params, backend,
                extra, filters, filter_params, quality,
                metric_params, seed, batch_size, chunk, executor, workers, address, out, resume,
                write_html) -> None:
    """Edited subsets × models → mIoU per subset, RmIoU and mR (Gen4Seg Tab. II/III).

    Edited subsets are built (or reused) in OUT/edits/SUBSET with `segtk edit`'s job, on the
    images with a salient object, and grouped by their editor's kind (appearance or geometry).
    An appearance attribute is one subset, one value drawn per image; a geometry attribute is a
    subset per level (size-0.2, size-0.4, position-0.2, position-0.4). mR = RmIoU /
    mIoU(reference), RmIoU the mean over the group's subsets: Recon with --backend diffusion,
    else Original (the source images). Geometry subsets are scored on the edited object's
    pixels only.

    \b
    Examples:
      segtk bench edits --attributes color,size --limit 3
      segtk bench edits --models espnet:camvid=../shared/models/espnet_camvid.safetensors \\
          --data camvid:../shared/data/camvid --limit 20 --values color=red,blue
      segtk bench edits --attributes color,material --prompt-model MODELS/chat-lm
      segtk bench edits --attributes color,material --quality clip-accuracy,dino-distance \\
          --metric-param clip-accuracy.model=MODELS/clip \\
          --metric-param dino-distance.model=MODELS/dino
    """
    def said(attr, summary) -> None:
        d = summary.as_dict()
        skipped = ", ".join(f"{k} {v}" for k, v in d["skipped"].items()) or "none"
        console.print(f"subset {attr}: {d['edited']} edits of {d['sources_edited']} images "
                      f"(skipped: {skipped})")

    with JobProgress() as bar:
        result = api.bench_edits(
            split_models(models_), data_spec, attributes, parse_values(values), out,
            device=device, split=split, limit=limit, pick=pick, object_centric=object_centric,
            min_area=min_area, objects=objects, things_only=things_only, backend=backend,
            params=parse_pairs(extra, "--param"), filters=filters, filter_params=filter_params,
            prompt_model=prompt_model, prompt_writer=prompt_writer_name, seed=seed,
            quality=csv_list(quality), metric_params=metric_params, captioner=captioner_name,
            captioner_params=captioner_params,
            batch_size=batch_size, chunk=chunk, executor=executor, workers=workers,
            address=address, resume=resume, classes_from_data=classes_from_data,
            on_subset=said, on_start=lambda shards, total: bar.start(f"{shards} shards", total,
                                                                      "images scored"),
            on_records=bar.advance)
    details = result.details
    cols = details["subsets"]
    console.print(table("mIoU % per subset (geometry subsets: object pixels only)",
                        ["model", *cols],
                        [[m, *(f"{details['miou'][m].get(s, float('nan')):.2f}" for s in cols)]
                         for m in details["models"]]))
    console.print(table("robustness: RmIoU = mean over edited subsets, mR = RmIoU / reference",
                        ["model", "group", "reference", "ref mIoU", "RmIoU", "mR"],
                        [[g["model"], g["group"], g["reference"], f"{g['reference_miou']:.2f}",
                          f"{g['rmiou']:.2f}", f"{g['mr']:.3f}"] for g in details["groups"]]))
    if "quality" in details:
        q = details["quality"]
        arrows = {"lower": "↓", "higher": "↑"}
        console.print(table("editing quality per edited subset (Gen4Seg Tab. I, VII-IX)",
                            ["subset", "edits", *(escape(f"{c} {arrows[q['better'][c]]}")
                                                  for c in q["columns"])],
                            [[s, q["images"][s], *(f"{v[c]:.4f}" for c in q["columns"])]
                             for s, v in q["values"].items()]))
    for path in result.files:
        result_line(f"wrote {path}")
    if report := report_of(out, write_html, resume):  # --resume refreshes an earlier one
        result_line(f"report: {report}")
