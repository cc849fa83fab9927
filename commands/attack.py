"""`segtk attack`: one attack plugin over a dataset, with a resumable run directory."""

from __future__ import annotations

from pathlib import Path

import click

from segtk import api
from segtk.benchmarks.attacks import SHARED
from segtk.commands.console import (
    JobProgress,
    console,
    err_console,
    pct,
    quiet_option,
    result_line,
    table,
)
from segtk.commands.options import (
    classes_from_data_option,
    data_option,
    device_option,
    eps_option,
    limit_option,
    max_pixels_option,
    model_option,
    same_device,
    split_option,
)
from segtk.commands.resume import Recorded, pairs, resumable
from segtk.core import parse_pairs
from segtk.jobs.attack import AttackRecord
from segtk.reports.writer import report_of
from segtk.storage import layout

time_limit_option = click.option(  # segtk attack and segtk bench attacks
    "--time-limit", type=click.FloatRange(0, min_open=True), default=None, metavar="SECONDS",
    help="Wall-clock seconds each image may take (the images of one batch share their clock): "
         "at its first query after that the attack stops, and the image's record says "
         "stopped: time. Results then depend on the machine's speed and load, so they are not "
         f"reproducible. Recorded in {layout.RUN} (--resume reads it from there) [default: none].")

reference_option = click.option(  # segtk attack and segtk bench attacks
    "--reference", type=click.Choice(["labels", "prediction"]), default=None,
    help="What the attack's proxy scores each query against: labels (the ground truth) or "
         "prediction (the model's labels for the clean image, from its clean query: a "
         "label-free attack, for images without labels too; those are scored against their "
         "clean prediction, and each record says so). Decision-based attacks only. Recorded "
         f"in {layout.RUN} (--resume reads it from there) [default: labels].")

# Where run.json records each option (see commands.resume); --limit may change on resume.
RECORDED = {
    "attack_name": Recorded("attack"), "model_spec": Recorded("model"),
    "data_spec": Recorded("data"), "split": Recorded("split"), "limit": Recorded("limit"),
    "classes_from_data": Recorded("classes_from_data", absent=False),
    "budget": Recorded("params.budget"), "eps": Recorded("params.eps"),
    "seed": Recorded("params.seed"), "time_limit": Recorded("time_limit", absent=None),
    "reference": Recorded("params.reference", absent="labels"),
    "extra": Recorded("params", lambda p: pairs({k: v for k, v in p.items()
                                                 if k not in (*SHARED, "reference")}),
                      same=None),
    "device": Recorded("device", same=same_device, absent="cpu"),
}


def default_out(out: str | None, attack_name: str | None) -> str | None:
    """--out, else runs/attack-PLUGIN (None while neither is known)."""
    return out or (f"runs/attack-{attack_name}" if attack_name else None)


@click.command()
@click.option("--plugin", "attack_name",
              help="Attack plugin (see `segtk plugins`) [required; --resume reads it from OUT].")
@model_option
@data_option
@split_option
@limit_option
@max_pixels_option
@classes_from_data_option
@device_option
@click.option("--budget", type=click.IntRange(min=1), default=50, show_default=True,
              help="Queries per image (the clean query counts).")
@eps_option
@click.option("--seed", type=int, default=0, show_default=True)
@time_limit_option
@reference_option
@click.option("--batch-size", type=click.IntRange(min=1), default=8, show_default=True,
              help="Images attacked together (one model call per step).")
@click.option("--out", type=click.Path(file_okay=False), default=None,
              help="Run directory [default: runs/attack-PLUGIN].")
@click.option("--resume", is_flag=True,
              help=f"Skip images already in OUT/{layout.RESULTS}; the options left out are read "
                   f"from OUT/{layout.RUN} (--limit may change).")
@click.option("--save-images/--no-save-images", default=True, show_default=True)
@click.option("--param", "extra", multiple=True, metavar="KEY=VALUE",
              help="Attack-specific parameter (repeat for several), e.g. --param "
                   "exploration=0.3.")
@quiet_option
@click.option("--report", "write_html", is_flag=True, help="Also write OUT/report.html (see `segtk report`); a --resume "
                   "rewrites the one OUT holds, --report or not.")
@resumable("attack", RECORDED, lambda p: default_out(p["out"], p["attack_name"]),
           may_change=("limit",), required=("attack_name",))
def attack(attack_name, model_spec, data_spec, split, limit, classes_from_data, device, budget,
           eps, seed, batch_size, out, resume, save_images, extra, write_html, time_limit,
           reference) -> None:
    """Run an attack (decision-based, or a white-box reference) over a dataset; report the mIoU drop.

    \b
    Examples:
      segtk attack --plugin dla
      segtk attack --plugin dla --model espnet:camvid=../shared/models/espnet_camvid.safetensors \\
                   --data camvid:../shared/data/camvid --limit 10 --budget 50 --out runs/dla
      segtk attack --plugin dla --out runs/dla --resume
      segtk attack --plugin square --budget 1000 --time-limit 60
      segtk attack --plugin dla --data folder:my_images --reference prediction
    """

    out_dir = default_out(out, attack_name)
    assert out_dir is not None  # resumable(required=("attack_name",)) refused a run without one
    out = Path(out_dir)
    with JobProgress() as bar:
        def tick(rec: AttackRecord) -> None:
            bar.update(status=f"{rec.image}: mIoU {pct(rec.clean_miou):.1f}"
                                  f" → {pct(rec.adv_miou):.1f}")

        summary = api.attack(
            model_spec, data_spec, attack_name, budget, eps, seed, limit,
            parse_pairs(extra, "--param"), out, device, split=split, batch_size=batch_size,
            time_limit=time_limit, save_images=save_images, resume=resume,
            classes_from_data=classes_from_data, on_image=tick, reference=reference or "labels",
            warn=warn,
            on_queries=bar.advance,  # the bar counts image-queries, budget per image
            on_start=lambda n: bar.start(f"{attack_name} ε={eps:g} budget={budget}", n * budget,
                                         "queries"))
    t = summary.summary
    console.print(table(f"{attack_name} on {model_spec} / {data_spec} ({t['images']} images)",
                        ["", "clean", "adversarial"], [
        ["dataset mIoU %", t["clean_miou"], t["adv_miou"]],  # AttackRun.summary is in %
        ["mean per-image mIoU %", t["clean_image_miou"], t["adv_image_miou"]],
        ["pixel accuracy %", t["clean_pacc"], t["adv_pacc"]],
        ["mean queries", "", t["mean_queries"]],
        ["max L∞ (0–255)", "", t["max_linf"]],
    ]))
    if any(r.scored_against == "prediction" for r in summary.records):
        console.print("mIoU of the images without labels is against their clean prediction "
                      "(their records say scored_against: prediction).", soft_wrap=True)
    result_line(f"results: {out / layout.RESULTS}")
    if report := report_of(out, write_html, resume):  # --resume refreshes an earlier one
        result_line(f"report: {report}")


def warn(message: str) -> None:
    """The API's warnings (a clean mIoU too low to attack), as the CLI prints warnings."""
    err_console.print(f"[yellow]warning:[/] {message}", soft_wrap=True)
