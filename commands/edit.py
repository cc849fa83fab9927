"""`segtk edit`: attribute editing (Gen4Seg) of a labelled dataset into an edited dataset."""

from __future__ import annotations

from pathlib import Path

import click

from segtk import api
from segtk.commands.console import (
    JobProgress,
    console,
    err_console,
    quiet_option,
    result_line,
    table,
)
from segtk.commands.options import (
    data_option,
    device_option,
    limit_option,
    max_pixels_option,
    prompt_options,
    same_device,
    split_option,
)
from segtk.commands.resume import Recorded, csv_or_none, joined, pairs, resumable
from segtk.core import parse_pairs
from segtk.editkit import CLASSICAL, DEFAULT_EXCLUDE, DEFAULT_MIN_AREA, OBJECT_RULES, SKIP_REASONS
from segtk.jobs.edit import PICKS
from segtk.jobs.edit_records import EditLine, SkipLine
from segtk.reports.writer import report_of
from segtk.storage.layout import CONTACT_SHEET, SOURCE

# Where run.json records each option (see commands.resume and jobs.edit.run_config). --values,
# --param and --filter-param are compared by the run's config (only the editor and filters
# know their canonical values and defaults).
RECORDED = {
    "editor_name": Recorded("plugin"), "values": Recorded("values", joined, same=None),
    "backend": Recorded("backend"), "data_spec": Recorded("data"), "split": Recorded("split"),
    "limit": Recorded("limit"), "variants": Recorded("variants"), "seed": Recorded("seed"),
    "min_area": Recorded("min_area"), "exclude": Recorded("exclude", joined, csv_or_none),
    "only": Recorded("classes", joined, csv_or_none), "extra": Recorded("params", pairs, None),
    "save_sources": Recorded("save_sources"), "pick": Recorded("pick"),
    "objects": Recorded("objects", absent="largest"),
    "things_only": Recorded("things_only", absent=False),
    "object_centric": Recorded("object_centric"),
    "filter_names": Recorded("filters", tuple, lambda v: list(dict.fromkeys(v))),
    "filter_params": Recorded("filters", pairs, None),
    "prompt_model": Recorded("prompt_model"), "prompt_writer_name": Recorded("prompt_writer"),
    "captioner_name": Recorded("captioner"),
    "captioner_params": Recorded("captioner_params", pairs, None),
    "device": Recorded("device", same=same_device),
}

BACKEND_HELP = ("classical = the editor's own CPU code; any other NAME is an edit-backend "
                "plugin (see `segtk plugins`), e.g. diffusion (segtk-diffusion).")


def default_out(out: str | None, editor_name: str | None) -> str | None:
    """--out, else runs/edit-PLUGIN (None while neither is known)."""
    return out or (f"runs/edit-{editor_name}" if editor_name else None)


@click.command()
@click.option("--plugin", "editor_name",
              help="Editor: color, material, style, weather, size, position (see `segtk plugins`) "
                   "[required; --resume reads it from OUT].")
@click.option("--values", default=None,
              help="Comma-separated attribute values [default: all the editor's values].")
@click.option("--backend", default=CLASSICAL, show_default=True, metavar="NAME", help=BACKEND_HELP)
@device_option
@data_option
@split_option
@limit_option
@max_pixels_option
@click.option("--out", type=click.Path(file_okay=False), default=None,
              help="Output folder, an edited dataset [default: runs/edit-PLUGIN].")
@click.option("--variants", type=click.IntRange(min=1), default=1, show_default=True,
              help="Edits per image and value, each with its own random stream.")
@click.option("--pick", type=click.Choice(PICKS), default="all", show_default=True,
              help="all = every value on every image; one = one value drawn per image (seeded "
                   "by --seed and the image), as Gen4Seg edits one random candidate prompt.")
@click.option("--object-centric", is_flag=True,
              help="Image-level edits (style, weather) only on images with a salient object "
                   "(--min-area), the images object edits get (Gen4Seg §IV-A).")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--resume", is_flag=True,
              help="Keep the edits already in OUT and do the rest; the options left out are "
                   "read from OUT/run.json.")
@click.option("--min-area", type=click.FloatRange(0, 1), default=DEFAULT_MIN_AREA, show_default=True,
              help="Smallest salient object, as a share of the image (object edits).")
@click.option("--exclude", default=None,
              help="Classes never picked as the object, comma-separated "
                   f"[default: {','.join(DEFAULT_EXCLUDE)}]; \"\" for none.")
@click.option("--classes", "only", default=None,
              help="Only these classes may be the object (overrides --exclude), "
                   "comma-separated, e.g. car,pedestrian.")
@click.option("--objects", type=click.Choice(OBJECT_RULES), default="largest", show_default=True,
              help="largest = the largest single-class region, the image skipped if its mask is "
                   "unusable; ranked = every instance (connected region) ranked by area, the "
                   "first usable one (Gen4Seg ranks objects by area).")
@click.option("--things-only", is_flag=True,
              help="Only the dataset's thing classes (countable objects, e.g. CamVid: car, "
                   "pedestrian, bicyclist) may be the object, as COCO-EA edits COCO things only.")
@click.option("--param", "extra", multiple=True, metavar="KEY=VALUE",
              help="Editor parameter (see the plugin's README; repeat for several), e.g. "
                   "--param strength=0.7; with "
                   "--backend diffusion, other keys go to the diffusion backend, e.g. "
                   "--param sd=PATH.")
@click.option("--sheet-rows", type=click.IntRange(min=0), default=12, show_default=True,
              help="Rows in OUT/contact_sheet.png (0: none).")
@click.option("--save-sources/--no-save-sources", default=True, show_default=True,
              help="Copy the edited source images and labels to OUT/source (a folder dataset).")
@click.option("--filter", "filter_names", multiple=True, metavar="NAME",
              help="Noise filter applied to each edit (repeatable), e.g. clip (drops samples), "
                   "surrogate (sets unreliable pixels to ignore).")
@click.option("--filter-param", "filter_params", multiple=True, metavar="NAME.KEY=VALUE",
              help="Filter option (repeat for several), e.g. --filter-param "
                   "surrogate.model=espnet:camvid=PATH --filter-param clip.model=DIR.")
@prompt_options
@click.option("--captioner", "captioner_name", default=None, metavar="NAME",
              help="Captioner plugin that writes each image's source caption P instead of the "
                   "class template, e.g. blip (segtk-captioner-blip). Manifest: captioner, "
                   "prompt_source.")
@click.option("--captioner-param", "captioner_params", multiple=True, metavar="KEY=VALUE",
              help="Captioner option (repeat for several), e.g. --captioner-param model=DIR.")
@quiet_option
@click.option("--report", "write_html", is_flag=True, help="Also write OUT/report.html (see `segtk report`); a --resume "
                   "rewrites the one OUT holds, --report or not.")
@resumable("edit", RECORDED, lambda p: default_out(p["out"], p["editor_name"]),
           required=("editor_name",))
def edit(editor_name, values, backend, device, data_spec, split, limit, out, variants, pick,
         object_centric, seed, resume, min_area, exclude, only, objects, things_only, extra,
         sheet_rows, save_sources, filter_names, filter_params, prompt_model, prompt_writer_name,
         captioner_name, captioner_params, write_html) -> None:
    """Edit an attribute of labelled images into a new dataset whose labels stay valid.

    Object edits (color, material, size, position) change the largest single-class region that
    covers at least --min-area of the image (--objects ranked: the largest usable one;
    --things-only: of a thing class); image edits (style, weather) change the whole
    image. Appearance edits keep the label exactly; geometry edits move the label with the
    object and label the uncovered area ignore. Images without such an object are skipped and
    counted. Read the result back with --data edited:OUT.

    \b
    Examples:
      segtk edit --plugin material                     # the bundled demo images
      segtk edit --plugin color --values red,blue --data camvid:../shared/data/camvid \\
                 --limit 20 --out runs/edit-color
      segtk edit --plugin position --values 0.2,0.4 --data camvid:../shared/data/camvid \\
                 --classes car --min-area 0.02 --out runs/edit-position
      segtk edit --plugin weather --values fog,night --variants 2 --seed 1 --out runs/edit-weather
      segtk edit --plugin color --pick one --data camvid:../shared/data/camvid --limit 20
      segtk edit --plugin color --out runs/edit-color --resume
      segtk edit --plugin color --backend diffusion --param sd=MODEL_DIR --values red
      segtk edit --plugin color --filter surrogate --filter-param surrogate.model=demo
      segtk edit --plugin color --values red --prompt-model MODELS/chat-lm
      segtk edit --plugin weather --values snow --captioner blip \\
                 --captioner-param model=MODELS/blip-image-captioning-base
      segtk predict --model espnet:camvid=../shared/models/espnet_camvid.safetensors \\
                    --data edited:runs/edit-color
    """
    out_dir = default_out(out, editor_name)
    assert out_dir is not None  # resumable(required=("editor_name",)) refused a run without one
    out = Path(out_dir)

    def warn(message: str) -> None:
        err_console.print(f"[yellow]warning:[/] {message}")

    def show(summary: api.Table) -> None:  # before the error of a run that edited nothing
        values = summary.details["values"]
        console.print(table(
            f"{editor_name} on {data_spec}: {summary.details['images']} images × "
            + (f"1 of {len(values)} values" if pick == "one" else f"{len(values)} values")
            + (f" × {variants} variants" if variants > 1 else ""),
            ["", "edits", "source images"],
            [(r["outcome"], r["edits"], r["source_images"]) for r in summary]))
        for row in summary[1:]:
            reason = row["outcome"].removeprefix("skipped: ")
            console.print(f"  {reason}: {SKIP_REASONS.get(reason, '')}")

    with JobProgress() as bar:
        def tick(rec: EditLine | SkipLine) -> None:
            status = rec.name + (f": skipped ({rec.reason})" if isinstance(rec, SkipLine) else "")
            bar.advance(1, status=status)

        api.edit(
            data_spec, editor_name, values, out, device, backend=backend, split=split, limit=limit,
            variants=variants, pick=pick, object_centric=object_centric, seed=seed,
            resume=resume, min_area=min_area, exclude=exclude, classes=only, objects=objects,
            things_only=things_only, params=parse_pairs(extra, "--param"),
            filters=filter_names, filter_params=filter_params, prompt_model=prompt_model,
            prompt_writer=prompt_writer_name, captioner=captioner_name,
            captioner_params=captioner_params, sheet_rows=sheet_rows, save_sources=save_sources,
            on_start=lambda total: bar.start(f"{editor_name} ({backend})", total, "images"),
            on_edit=tick, on_table=show, warn=warn)
    result_line(f"edited dataset: {out}", f"  (read it with --data edited:{out})")
    if save_sources:
        result_line(f"originals: {out / SOURCE}", f"  (--data folder:{out / SOURCE})")
    if (out / CONTACT_SHEET).exists():
        result_line(f"contact sheet: {out / CONTACT_SHEET}")
    if report := report_of(out, write_html, resume):  # --resume refreshes an earlier one
        result_line(f"report: {report}")
