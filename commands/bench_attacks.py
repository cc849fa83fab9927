"""`segtk bench attacks`: the DLA paper's table (attacks × budgets) on any model."""

from __future__ import annotations

from pathlib import Path

import click

from segtk.benchmarks.attacks import aggregate, plan, run_bench, write_contact_sheet, write_outputs
from segtk.commands.console import console, progress, table
from segtk.commands.options import (
    DEMO_MODEL,
    csv_list,
    data_option,
    eps_option,
    limit_option,
    shard_options,
    split_option,
)
from segtk.core import registry
from segtk.core.errors import SegtkError
from segtk.core.runs import RESULTS_FILE, RunDir
from segtk.core.specs import load_dataset
from segtk.jobs.executors import make_executor
from segtk.reports.writer import write_report


@click.command("attacks")
@click.option("--attacks", default="dla,random,nes,bandits,zo-signsgd,signhunter,simba,square",
              show_default=True, help="Comma-separated attack plugins.")
@click.option("--budgets", default="10,50,200", show_default=True, help="Comma-separated budgets.")
@click.option("--model", "models_", multiple=True, default=[DEMO_MODEL], show_default=True,
              help="Model spec; repeat for several models.")
@data_option
@split_option
@limit_option
@click.option("--repeats", type=click.IntRange(min=1), default=3, show_default=True)
@eps_option
@click.option("--seed", type=int, default=0, show_default=True, help="Repeat r uses seed + r.")
@click.option("--batch-size", type=click.IntRange(min=1), default=8, show_default=True)
@shard_options
@click.option("--out", type=click.Path(file_okay=False), default="runs/bench-attacks", show_default=True)
@click.option("--resume", is_flag=True,
              help="Keep finished shards in OUT and run the rest; --attacks may add attacks.")
@click.option("--table-only", is_flag=True,
              help="Run nothing: print and write the table of the complete repeats OUT holds "
                   "(e.g. while another process is still running it).")
@click.option("--report", "write_html", is_flag=True, help="Also write OUT/report.html (see `segtk report`).")
def bench_attacks(attacks, budgets, models_, data_spec, split, limit, repeats, eps, seed, batch_size,
                  chunk, executor, workers, address, out, resume, table_only, write_html) -> None:
    """Attacks × budgets → dataset mIoU (mean ± std over repeats), CSV/JSON and curves.

    \b
    Examples:
      segtk bench attacks --repeats 1 --budgets 10,50
      segtk bench attacks --model espnet:camvid=../shared/models/espnet_camvid.safetensors \\
          --data camvid:../shared/data/camvid --limit 20 --budgets 10,50,200 --repeats 3
      segtk bench attacks --attacks dla,colour-stripes --out runs/b --table-only
    """

    names, budget_list = csv_list(attacks), [int(b) for b in csv_list(budgets)]
    for name in names:
        registry.attack(name)  # unknown or broken plugins fail before any work
    data = load_dataset(data_spec, split, limit)
    shards = plan(list(models_), data_spec, split, names, budget_list, repeats, data.names, chunk,
                  eps, seed, batch_size, sheet_dir=str(Path(out) / "sheet"))
    config = {"attacks": names, "budgets": budget_list, "models": list(models_), "data": data_spec,
              "split": split, "images": data.names, "repeats": repeats, "eps": eps, "seed": seed,
              "limit": limit}
    if table_only and not (Path(out) / RESULTS_FILE).is_file():
        raise SegtkError(f"{out} holds no benchmark records", hint="run it first, without --table-only")
    # Records are keyed per attack and image; --table-only may watch a bench still running.
    run = RunDir(out, config, resume or table_only, may_differ=("attacks", "limit"),
                 read_only=table_only, kind="bench-attacks")
    total = sum(len(s.images) for s in shards)
    if not table_only:
        with progress() as bar:
            task = bar.add_task(f"{len(shards)} shards", total=total, status="")
            run_bench(shards, run, make_executor(executor, workers, address),
                      lambda n: bar.advance(task, n))
    result = aggregate(run.done(key="key").values(), shards)
    cols = sorted(set(budget_list))
    for model in list(dict.fromkeys(models_)):
        cells: dict[str, dict[int, str]] = {}
        for r in (r for r in result.rows if r["model"] == model):
            text = f"{r['miou_mean']:.2f} ± {r['miou_std']:.2f}"
            if r["attack"] != "clean" and r["repeats"] < repeats:
                text += f" ({r['repeats']} of {repeats} repeats finished)"
            cells.setdefault(r["attack"], {}).update({b: text for b in cols} if r["attack"] == "clean"
                                                     else {r["budget"]: text})
        console.print(table(f"{model} — dataset mIoU % (mean ± std over {repeats} repeats), ε={eps:g}",
                            ["attack"] + [f"{b} queries" for b in cols],
                            [[name] + [row.get(b, "") for b in cols] for name, row in cells.items()]))
    vis = [r for r in result.rows if "ssim" in r]
    if vis:
        console.print(table(f"visibility at {max(budget_list)} queries (stored 8-bit images)",
                            ["model", "attack", "PSNR dB", "SSIM", "changed pixels %", "ΔE OKLab", "Δ chroma"],
                            [[r["model"], r["attack"], r["psnr"], f"{r['ssim']:.4f}", r["changed_pct"],
                              r.get("delta_e", ""), r.get("delta_chroma", "")] for r in vis]))
    for path in write_outputs(result, Path(out)):
        console.print(f"wrote {path}")
    sheet = write_contact_sheet(Path(out), data, names, max(budget_list))
    if sheet:
        console.print(f"wrote {sheet}")
    if write_html:
        console.print(f"report: {write_report(out)}")
