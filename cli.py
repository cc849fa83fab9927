"""The `segtk` command line: parse options, call the core, print."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
from rich.text import Text

from segtk.commands.console import console, err_console, pct, progress, table
from segtk.core import registry
from segtk.core.errors import SegtkError
from segtk.commands.options import (
    DEMO_MODEL,
    csv_list,
    data_option,
    eps_option,
    limit_option,
    model_option,
    shard_options,
    split_option,
)


class SegtkGroup(click.Group):
    """Turns SegtkError, and OS errors (disk full, permission denied, ...), into one clear line
    plus a hint and exit code 1 (traceback with --debug)."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except (SegtkError, OSError) as caught:
            if ctx.obj and ctx.obj.get("debug"):
                raise
            from segtk.core.os_errors import os_error

            exc = os_error(caught) if isinstance(caught, OSError) else caught
            err_console.print(f"[bold red]Error:[/] {exc.message}", soft_wrap=True)
            if exc.hint:
                err_console.print(f"[yellow]hint:[/] {exc.hint}", soft_wrap=True)
            sys.exit(1)


@click.group(cls=SegtkGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="Show full tracebacks.")
@click.version_option(package_name="segtk")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """segtk: stress-test semantic segmentation models before they ship.

    \b
    Examples:
      segtk attack --plugin dla                     # DLA on the bundled demo model
      segtk predict --model espnet:camvid=W.safetensors --data camvid:DATA --out runs/p
      segtk plugins
    """
    ctx.ensure_object(dict)["debug"] = debug


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def plugins(as_json: bool) -> None:
    """List installed plugins with their status.

    \b
    Examples:
      segtk plugins
      segtk plugins --json
    """
    infos = registry.plugins()
    rows = [
        {"name": i.name, "kind": i.kind, "distribution": i.distribution, "version": i.version,
         "status": i.status, "missing": ", ".join(i.missing), "install": i.install,
         "error": i.error or i.conflict,
         "hook": i.hook}
        for i in infos
    ]
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    console.print(table(
        "segtk plugins", ["name", "kind", "distribution", "version", "status", "missing / error"],
        [[r["name"], r["kind"], r["distribution"], r["version"], _status(r["status"]),
          r["error"] or (f"{r['missing']} ({r['install']})" if r["missing"] else "")] for r in rows],
    ))


def _status(status: str) -> Text:
    return Text(status, style={"ok": "green", "broken": "red", "conflict": "red"}.get(status, "yellow"))


@cli.group(invoke_without_command=True)
@click.pass_context
def models(ctx: click.Context) -> None:
    """List model adapters and their --model syntax.

    \b
    Examples:
      segtk models
      segtk models convert espnet espnet_camvid.pth espnet_camvid.safetensors
    """
    if ctx.invoked_subcommand is None:
        infos = [i for i in registry.plugins() if i.kind == "segmenter"]
        console.print(table("--model PLUGIN:ARG", ["plugin", "syntax", "example", "status"],
                            [[i.name, i.obj.syntax if i.obj else "", i.obj.example if i.obj else "",
                              _status(i.status)] for i in infos]))


@models.command("convert")
@click.argument("plugin")
@click.argument("source", type=click.Path(dir_okay=False))
@click.argument("target", type=click.Path(dir_okay=False))
def models_convert(plugin: str, source: str, target: str) -> None:
    """Convert a published checkpoint (.pth, loaded weights-only) to safetensors.

    \b
    Example:
      segtk models convert espnet espnet_camvid.pth espnet_camvid.safetensors
    """
    entry = registry.segmenter_plugin(plugin)
    if entry.convert is None:
        raise SegtkError(f"model plugin {plugin!r} has no converter")
    entry.convert(source, target)
    console.print(f"wrote {target}")


@cli.command()
def datasets() -> None:
    """List dataset readers and their --data syntax.

    \b
    Example:
      segtk datasets
    """
    infos = [i for i in registry.plugins() if i.kind == "dataset"]
    console.print(table("--data FORMAT:PATH", ["format", "syntax", "example", "status"],
                        [[i.name, i.obj.syntax if i.obj else "", i.obj.example if i.obj else "",
                          _status(i.status)] for i in infos]))


@cli.command()
@model_option
@data_option
@split_option
@limit_option
@click.option("--out", type=click.Path(file_okay=False), default=None, help="Write labels/overlays here.")
@click.option("--batch-size", type=click.IntRange(min=1), default=8, show_default=True)
def predict(model_spec, data_spec, split, limit, out, batch_size) -> None:
    """Predict a dataset; print dataset mIoU and pixel accuracy.

    \b
    Examples:
      segtk predict
      segtk predict --model espnet:camvid=../shared/models/espnet_camvid.safetensors \\
                    --data camvid:../shared/data/camvid --out runs/predict
    """
    from segtk.jobs.predict import predict_dataset
    from segtk.core.specs import load_dataset, load_segmenter

    model = load_segmenter(model_spec)
    data = load_dataset(data_spec, split, limit)
    with progress() as bar:
        task = bar.add_task("predict", total=len(data), status="")
        summary = predict_dataset(model, data, out, batch_size, lambda n: bar.advance(task, n))
    console.print(table(f"{model_spec} on {data_spec}", ["", "value"], [
        ["images", summary["images"]], ["mIoU %", pct(summary["miou"])],
        ["pixel acc %", pct(summary["pacc"])]]))
    click.echo(json.dumps({k: v for k, v in summary.items() if k != "iou"}))


@cli.command()
@click.option("--plugin", "attack_name", required=True, help="Attack plugin (see `segtk plugins`).")
@model_option
@data_option
@split_option
@limit_option
@click.option("--budget", type=click.IntRange(min=1), default=50, show_default=True,
              help="Queries per image (the clean query counts).")
@eps_option
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--batch-size", type=click.IntRange(min=1), default=8, show_default=True,
              help="Images attacked together (one model call per step).")
@click.option("--out", type=click.Path(file_okay=False), default=None,
              help="Run directory [default: runs/attack-PLUGIN].")
@click.option("--resume", is_flag=True, help="Skip images already in OUT/results.jsonl.")
@click.option("--save-images/--no-save-images", default=True, show_default=True)
@click.option("--param", "extra", multiple=True, metavar="KEY=VALUE",
              help="Attack-specific parameter, e.g. --param exploration=0.3.")
@click.option("--report", "write_html", is_flag=True, help="Also write OUT/report.html (see `segtk report`).")
def attack(attack_name, model_spec, data_spec, split, limit, budget, eps, seed, batch_size, out,
           resume, save_images, extra, write_html) -> None:
    """Run a decision-based attack over a dataset and report the mIoU drop.

    \b
    Examples:
      segtk attack --plugin dla
      segtk attack --plugin dla --model espnet:camvid=../shared/models/espnet_camvid.safetensors \\
                   --data camvid:../shared/data/camvid --limit 10 --budget 50 --out runs/dla
      segtk attack --plugin dla --out runs/dla --resume
    """
    from segtk.jobs.attack import attack_dataset
    from segtk.core.params import build_attack
    from segtk.core.runs import RunDir
    from segtk.core.specs import check_compatible, load_dataset, load_segmenter

    attack_obj = build_attack(attack_name, budget=budget, eps=eps, seed=seed, extra=extra)
    model = load_segmenter(model_spec)
    data = load_dataset(data_spec, split, limit)
    check_compatible(model, data)  # before RunDir writes anything under --out
    out = Path(out or f"runs/attack-{attack_name}")
    config = {"attack": attack_name, "params": attack_obj.params.__dict__, "model": model_spec,
              "data": data_spec, "split": split, "limit": limit}
    run = RunDir(out, config, resume, may_differ=("limit",))  # records are per image
    with progress() as bar:
        task = bar.add_task(f"{attack_name} ε={eps:g} budget={budget}", total=len(data), status="")

        def tick(rec) -> None:
            bar.update(task, advance=1, status=f"{rec['image']}: mIoU {pct(rec['clean_miou']):.1f}"
                                               f" → {pct(rec['adv_miou']):.1f}")

        summary = attack_dataset(attack_obj, model, data, run, batch_size, save_images, tick)
    t = summary.table
    console.print(table(f"{attack_name} on {model_spec} / {data_spec} ({t['images']} images)",
                        ["", "clean", "adversarial"], [
        ["dataset mIoU %", pct(t["clean_miou"]), pct(t["adv_miou"])],
        ["mean per-image mIoU %", pct(t["clean_image_miou"]), pct(t["adv_image_miou"])],
        ["pixel accuracy %", pct(t["clean_pacc"]), pct(t["adv_pacc"])],
        ["mean queries", "", t["mean_queries"]],
        ["max L∞ (0–255)", "", t["max_linf"]],
    ]))
    console.print(f"results: {out / 'results.jsonl'}")
    if write_html:
        from segtk.reports.writer import write_report
        console.print(f"report: {write_report(out)}")


@cli.group()
def bench() -> None:
    """Benchmarks: the papers' tables on any model.

    \b
    Examples:
      segtk bench attacks --attacks dla,random --budgets 10,50
    """


@bench.command("attacks")
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
    from segtk.benchmarks.attacks import (
        aggregate,
        plan,
        run_bench,
        write_contact_sheet,
        write_outputs,
    )
    from segtk.jobs.executors import make_executor
    from segtk.core.runs import RESULTS_FILE, RunDir
    from segtk.core.specs import load_dataset

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
                 read_only=table_only)
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
        from segtk.reports.writer import write_report
        console.print(f"report: {write_report(out)}")


# Commands defined in their own modules (keep this file to parsing and printing).
# cli.add_command(...) lines for edit/report/serve go here.
from segtk.commands.edit import edit  # noqa: E402

cli.add_command(edit)
from segtk.commands.report import report  # noqa: E402

cli.add_command(report)
from segtk.commands.bench_edits import bench_edits  # noqa: E402

bench.add_command(bench_edits)
from segtk.commands.train import bench_augment, train_command  # noqa: E402

cli.add_command(train_command), bench.add_command(bench_augment)


def main() -> None:
    pm_commands()
    cli(prog_name="segtk")


def pm_commands() -> None:
    """Let plugins add commands (hook register_commands), each guarded: see registry.add_commands."""
    registry.add_commands(cli)


if __name__ == "__main__":
    main()
