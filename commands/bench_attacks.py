"""`segtk bench attacks`: the DLA paper's table (attacks × budgets) on any model, ablations
(one row per attack spec) and ε sweeps."""

from __future__ import annotations

import click

from segtk import api
from segtk.api.attacks import BENCH_ATTACKS, BENCH_BUDGETS
from segtk.benchmarks.attacks import SPEC_SYNTAX, white_box_gaps
from segtk.commands.attack import reference_option, time_limit_option, warn
from segtk.commands.console import JobProgress, console, quiet_option, result_line, table
from segtk.commands.options import (
    DEMO_MODEL,
    checked_eps,
    classes_from_data_option,
    csv_list,
    data_option,
    device_option,
    limit_option,
    max_pixels_option,
    same_device,
    shard_options,
    split_option,
)
from segtk.commands.resume import Recorded, joined, resumable
from segtk.core import SegtkError, convert
from segtk.reports.writer import report_of
from segtk.storage import layout


def _eps_list(recorded: float | list[float]) -> list[float]:
    """Recorded ε as --eps gives it, a list (runs made before ε sweeps recorded one number)."""
    return [float(e) for e in (recorded if isinstance(recorded, list) else [recorded])]


# Where run.json records each option (see commands.resume); on resume --attacks and --eps may
# add specs and ε values, and --limit may change (records are keyed per spec, ε and image).
RECORDED = {
    "attacks": Recorded("attacks", joined), "budgets": Recorded("budgets", joined, csv_list),
    "models_": Recorded("models", tuple), "data_spec": Recorded("data"),
    "split": Recorded("split"), "limit": Recorded("limit"),
    "classes_from_data": Recorded("classes_from_data", absent=False),
    "repeats": Recorded("repeats"), "eps": Recorded("eps", _eps_list), "seed": Recorded("seed"),
    "time_limit": Recorded("time_limit", absent=None),
    "reference": Recorded("reference", absent="labels"),
    "device": Recorded("device", same=same_device, absent="cpu"),
}


def _eps_sweep(ctx: click.Context, param: click.Parameter, value: str) -> list[float]:
    """--eps 8 or --eps 4,8,16 (read by core.convert); each value read by the rule
    `segtk attack --eps` follows (commands.options.checked_eps)."""
    try:
        values = convert(value, list[float], "--eps")
    except SegtkError as exc:
        raise click.BadParameter(exc.message) from exc
    if not values:
        raise click.BadParameter("give at least one value, e.g. --eps 8 or --eps 4,8,16")
    return list(dict.fromkeys(checked_eps(v) for v in values))


@click.command("attacks")
@click.option("--attacks", default=BENCH_ATTACKS,
              show_default=True,
              help=f"Comma-separated attack specs {SPEC_SYNTAX}, each its own table row, e.g. "
                   "'dla,dla:direction=horizontal;calibration=random' (quote the ';').")
@click.option("--budgets", default=BENCH_BUDGETS, show_default=True, help="Comma-separated budgets.")
@click.option("--model", "models_", multiple=True, default=[DEMO_MODEL], show_default=True,
              help="Model spec; repeat for several models.")
@data_option
@split_option
@limit_option
@max_pixels_option
@classes_from_data_option
@device_option
@click.option("--repeats", type=click.IntRange(min=1), default=3, show_default=True)
@click.option("--eps", default="8", show_default=True, callback=_eps_sweep,
              help="L∞ bound on the 0–255 scale (stored images keep whole steps); a comma list "
                   "(4,8,16) sweeps it: one table per ε.")
@click.option("--seed", type=int, default=0, show_default=True, help="Repeat r uses seed + r.")
@time_limit_option
@reference_option
@click.option("--batch-size", type=click.IntRange(min=1), default=8, show_default=True)
@shard_options
@click.option("--out", type=click.Path(file_okay=False), default="runs/bench-attacks", show_default=True)
@click.option("--resume", is_flag=True,
              help="Keep finished shards in OUT and run the rest; the options left out are read "
                   f"from OUT/{layout.RUN}, --attacks and --eps may add specs and ε values, and "
                   "--limit may take more or fewer images.")
@click.option("--table-only", is_flag=True,
              help="Run nothing and write nothing: print the table of the complete repeats "
                   "OUT holds (e.g. while another process is still running it); the options "
                   f"left out are read from OUT/{layout.RUN}, and --limit may differ.")
@quiet_option
@click.option("--report", "write_html", is_flag=True, help="Also write OUT/report.html (see `segtk report`); a --resume "
                   "rewrites the one OUT holds, --report or not.")
@resumable("bench-attacks", RECORDED, flags=("resume", "table_only"),
           may_change=("attacks", "eps", "limit"))
def bench_attacks(attacks, budgets, models_, data_spec, split, limit, classes_from_data, device,
                  repeats, eps, seed, batch_size, chunk, executor, workers, address, out, resume,
                  table_only, write_html, time_limit, reference) -> None:
    """Attack specs × budgets → dataset mIoU of the stored 8-bit images (mean ± std over
    repeats), CSV/JSON and proxy curves.

    An attack spec is NAME[:KEY=VALUE[;KEY=VALUE...]] with the attack's own parameters (the
    `--param` keys of `segtk attack`, listed in each plugin's README and by the error a wrong
    key gives); each spec is one row, so one run prints an ablation table.

    \b
    Examples:
      segtk bench attacks --repeats 1 --budgets 10,50
      segtk bench attacks --model espnet:camvid=../shared/models/espnet_camvid.safetensors \\
          --data camvid:../shared/data/camvid --limit 20 --budgets 10,50,200 --repeats 3
      segtk bench attacks --attacks 'dla,dla:direction=horizontal,dla:calibration=random'
      segtk bench attacks --attacks dla --eps 4,8,16
      segtk bench attacks --attacks dla,colour-stripes --out runs/b --table-only
      segtk bench attacks --attacks dla,signhunter --reference prediction
    """

    if table_only and write_html:
        raise SegtkError("--table-only writes nothing, so it does not write the report",
                         hint=f"leave out --report; `segtk report {out}` writes the page of "
                              "what OUT holds")
    with JobProgress() as bar:
        result = api.bench_attacks(
            list(models_), data_spec, attacks, budgets, eps, repeats, seed, limit, out, device,
            split=split, time_limit=time_limit, batch_size=batch_size, chunk=chunk,
            executor=executor, workers=workers, address=address, resume=resume,
            table_only=table_only, classes_from_data=classes_from_data,
            reference=reference or "labels", on_start=lambda shards, total: bar.start(f"{shards} shards", total,
                                                                    "images attacked"),
            on_records=bar.advance, warn=warn)
    budget_list = sorted({int(b) for b in csv_list(budgets)})
    _print_tables(result, list(dict.fromkeys(models_)), eps, budget_list, repeats)
    console.print("Table: the stored 8-bit images at each budget; "
                  f"{layout.CURVES_PNG}/{layout.CURVES_JSON}: the oracle's proxy of the float "
                  "candidates.", soft_wrap=True)
    if any("budget_rule=reference" in row["attack"] for row in result):
        console.print("budget_rule=reference: counted as BlackboxBench counts (the clean query "
                      "free, the last step finishes), so those rows spent up to one step more "
                      "than the budget column says (queries in results.jsonl).", soft_wrap=True)
    if any(row.get("scored_against") for row in result):
        console.print("mIoU of the images without labels is against their clean prediction "
                      "(scored_against in table.json): 100% clean, the agreement kept under "
                      "attack.", soft_wrap=True)
    for path in result.files:
        result_line(f"wrote {path}")
    sheet = result.details["sheet"]
    if sheet:
        result_line(f"wrote {sheet}", f" (ε={max(eps):g})" if len(eps) > 1 else "")
    if report := report_of(out, write_html, resume):  # --resume refreshes an earlier one
        result_line(f"report: {report}")


def _print_tables(rows: list[dict], models: list[str], sweep: list[float], cols: list[int],
                  repeats: int) -> None:
    """One mIoU table per model and ε (clean in each) for the decision-based attacks; where the
    run has white-box attacks, their own table and each decision-based attack's gap to the
    best of them; then the visibility table."""
    gaps = white_box_gaps(rows)
    for model in models:
        mine = [r for r in rows if r["model"] == model]
        clean = next((r for r in mine if r["attack"] == "clean"), None)
        for eps in sweep:
            here = [r for r in mine if r["attack"] != "clean" and r.get("eps") == eps]
            cells = _cells([r for r in here if not r.get("white_box")], repeats)
            if clean is not None:
                cells = {"clean": {b: f"{clean['miou_mean']:.2f} ± 0.00" for b in cols}, **cells}
            console.print(table(f"{model} — dataset mIoU % of the stored 8-bit images "
                                f"(mean ± std over {repeats} repeats), ε={eps:g}",
                                ["attack"] + [f"{b} queries" for b in cols],
                                [[name] + [row.get(b, "") for b in cols] for name, row in cells.items()]))
            white = _cells([r for r in here if r.get("white_box")], repeats)
            if white:
                console.print(table(f"{model} — white-box reference attacks (gradients of the "
                                    f"logits; budget = forward and backward passes), ε={eps:g}",
                                    ["white-box attack"] + [f"{b} passes" for b in cols],
                                    [[name] + [row.get(b, "") for b in cols]
                                     for name, row in white.items()]))
                _print_gaps([g for g in gaps if g["model"] == model and g["eps"] == eps], cols,
                            model, eps)
    vis = [r for r in rows if "ssim" in r]
    if vis:
        several = len(sweep) > 1
        console.print(table(f"visibility at {max(cols)} queries (stored 8-bit images)",
                            ["model", "attack", *(["ε"] if several else []), "PSNR dB", "SSIM",
                             "changed pixels %", "ΔE OKLab", "Δ chroma"],
                            [[r["model"], _label(r), *([f"{r['eps']:g}"] if several else []),
                              r["psnr"], f"{r['ssim']:.4f}", r["changed_pct"], r.get("delta_e", ""),
                              r.get("delta_chroma", "")] for r in vis]))


def _label(row: dict) -> str:
    return row["attack"] + (" (white-box)" if row.get("white_box") else "")


def _cells(rows: list[dict], repeats: int) -> dict[str, dict[int, str]]:
    """attack -> budget -> 'mean ± std' (and how many repeats finished, if not all)."""
    cells: dict[str, dict[int, str]] = {}
    for r in rows:
        text = f"{r['miou_mean']:.2f} ± {r['miou_std']:.2f}"
        if r["repeats"] < repeats:
            text += f" ({r['repeats']} of {repeats} repeats finished)"
        cells.setdefault(r["attack"], {})[r["budget"]] = text
    return cells


def _print_gaps(gaps: list[dict], cols: list[int], model: str, eps: float) -> None:
    """Each decision-based attack's gap to the best white-box attack at the same budget."""
    if not gaps:
        return
    by_attack: dict[str, dict[int, str]] = {}
    for g in gaps:
        by_attack.setdefault(g["attack"], {})[g["budget"]] = f"{g['gap']:+.2f} ({g['reference']})"
    console.print(table(f"{model} — gap to white-box: mIoU points above the best white-box "
                        f"attack at the same budget, ε={eps:g}",
                        ["decision-based attack"] + [f"{b} queries" for b in cols],
                        [[name] + [row.get(b, "") for b in cols] for name, row in by_attack.items()]))
