"""`segtk bench seeds`: mean ± std over bench augment runs made with other --seed."""

from __future__ import annotations

import click

from segtk.api.seeds import bench_seeds as summarise_seeds
from segtk.benchmarks.seeds import cell, columns
from segtk.commands.console import console, quiet_option, result_line, table


@click.command("seeds")
@click.argument("runs", nargs=-1, required=True, type=click.Path(file_okay=False))
@click.option("--out", type=click.Path(file_okay=False), default=None,
              help="Also write OUT/table_seeds.csv and table_seeds.json.")
@quiet_option
def bench_seeds(runs: tuple[str, ...], out: str | None) -> None:
    """Mean ± std (sample, over seeds) of `bench augment` tables that differ only in --seed.

    Gen4Seg reports its augmentation tables over three seeds; run `bench augment` once per
    --seed with one --eval-seed (the same edited test images) and give the folders. Runs with
    other settings, a repeated seed or other rows are refused.

    \b
    Examples:
      for s in 0 1 2; do segtk bench augment --model demo --data demo --crop 96x64 \\
          --augment baseline,cutmix --attributes color --seed $s --out runs/ba-seed$s; done
      segtk bench seeds runs/ba-seed0 runs/ba-seed1 runs/ba-seed2 --out runs/ba-seeds
    """
    result = summarise_seeds(list(runs), out)
    details = result.details
    cols = columns(details)
    rows = [[row["augmentation"], *(_shown(cell(row, key, subset), key.startswith("mr_"))
                                    for _, key, subset in cols)]
            for row in details["rows"]]
    seeds = ", ".join(map(str, details["seeds"]))
    console.print(table(f"mIoU % per subset and mR, mean ± std over seeds {seeds} "
                        f"(evaluation seed {details['eval_seed']})",
                        ["augmentation", *(name for name, _, _ in cols)], rows))
    for path in result.files:
        result_line(f"wrote {path}")


def _shown(c: dict, ratio: bool) -> str:
    if c["mean"] is None:
        return "–"
    digits = 3 if ratio else 2
    return f"{c['mean']:.{digits}f} ± {c['std']:.{digits}f}"
