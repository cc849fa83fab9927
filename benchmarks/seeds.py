"""Mean ± std over `bench augment` runs that differ only in their training seed.

Gen4Seg reports its augmentation tables over three seeds. One seed here moves a cell by up to
14 points, so a table is only read with its spread: run `bench augment` once per `--seed` (one
`--eval-seed`, so every run is scored on the same edited images) and summarise the folders.
Runs whose other settings differ are refused, naming the settings: their spread would not be
the seed's.
"""

from __future__ import annotations

import csv
import io
import json
import math
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from segtk.core import SegtkError, atomic_write_bytes
from segtk.storage import layout
from segtk.storage.runs import atomic_write_json, load_run_file, setting_changes

KIND = "bench-augment"
CSV_FILE, JSON_FILE = "table_seeds.csv", "table_seeds.json"


@dataclass
class SeedRun:
    path: Path
    seed: int
    config: dict[str, Any]
    table: dict[str, Any]  # the run's table.json


def read_seed_run(path: str | Path) -> SeedRun:
    """A finished bench-augment run folder, or an error saying what it is instead."""
    folder = Path(path)
    record = load_run_file(folder / layout.RUN)
    if record is None:
        raise SegtkError(f"{folder} is not a segtk run folder (no {layout.RUN})",
                         hint="give the --out folders of `segtk bench augment` runs")
    if record.get("kind") != KIND:
        raise SegtkError(f"{folder} holds a `segtk {str(record.get('kind')).replace('-', ' ')}` run, "
                         "not a `segtk bench augment` one",
                         hint="give the --out folders of `segtk bench augment` runs")
    table_file = folder / layout.TABLE_JSON
    try:
        table = json.loads(table_file.read_text())
    except FileNotFoundError:
        raise SegtkError(f"{folder} has no {layout.TABLE_JSON}: its run did not finish",
                         hint=f"finish it first: segtk bench augment --resume --out {folder}") from None
    except ValueError as exc:
        raise SegtkError(f"{table_file} is not valid JSON ({exc})",
                         hint=f"rewrite it: segtk bench augment --resume --out {folder}") from exc
    config = record.get("config") or {}
    return SeedRun(folder, int(config.get("seed", 0)), config, table)


def check_same_but_seed(runs: list[SeedRun]) -> None:
    """Refuse runs that differ in anything but the training seed, or repeat a seed."""
    if len(runs) < 2:
        raise SegtkError(f"a spread needs at least two runs, got {len(runs)}",
                         hint="run `segtk bench augment` once per --seed (e.g. 0, 1, 2) and give "
                              "every --out folder")
    first = runs[0]
    for run in runs[1:]:
        keys = sorted(k for k in set(first.config) | set(run.config)
                      if k != "seed" and first.config.get(k) != run.config.get(k))
        if keys:
            raise SegtkError(
                f"{run.path} and {first.path} differ in more than the seed ({', '.join(keys)}): "
                + "; ".join(setting_changes(first.config, run.config, keys,
                                            sides=(f"in {first.path.name}", f"in {run.path.name}"))),
                hint="summarise runs made with the same command and another --seed (one "
                     "--eval-seed: the same test images)")
    seen: dict[int, Path] = {}
    for run in runs:
        if run.seed in seen:
            raise SegtkError(f"{run.path} and {seen[run.seed]} both ran with --seed {run.seed}",
                             hint="give each seed's run once")
        seen[run.seed] = run.path
    names = [[row["augmentation"] for row in run.table["rows"]] for run in runs]
    for run, rows in zip(runs[1:], names[1:]):
        if rows != names[0]:
            raise SegtkError(f"{run.path} has the rows {', '.join(rows)}; {first.path} has "
                             f"{', '.join(names[0])}",
                             hint="resume the runs with the same --augment list")


def spread(values: list[float | None]) -> dict[str, Any]:
    """{"mean", "std", "values"}: the sample standard deviation (n - 1), as papers report a
    spread over seeds; None where a run has no number (a subset without that class)."""
    numbers = [v for v in values if v is not None and math.isfinite(v)]
    complete = len(numbers) == len(values)
    return {"mean": statistics.fmean(numbers) if complete else None,
            "std": statistics.stdev(numbers) if complete else None,
            "values": values}


def summarise(runs: list[SeedRun]) -> dict[str, Any]:
    """One row per augmentation: the spread of each subset's mIoU (%), mR and RmIoU per group."""
    check_same_but_seed(runs)
    runs = sorted(runs, key=lambda r: r.seed)
    first = runs[0].table
    subsets: list[str] = list(first["subsets"])
    extra = [s for s in first["rows"][0]["miou"] if s not in subsets]  # Tab. VI's original-all
    groups: list[str] = list(first.get("groups") or [])
    rows = []
    for i, head in enumerate(first["rows"]):
        row: dict[str, Any] = {"augmentation": head["augmentation"], "miou": {}}
        for subset in subsets + extra:
            row["miou"][subset] = spread([r.table["rows"][i]["miou"].get(subset) for r in runs])
        for group in groups:
            for key in (f"mr_{group}", f"rmiou_{group}"):
                row[key] = spread([r.table["rows"][i].get(key) for r in runs])
        rows.append(row)
    return {"seeds": [r.seed for r in runs], "runs": [str(r.path) for r in runs],
            "eval_seed": runs[0].config.get("eval_seed"), "subsets": subsets + extra,
            "groups": groups, "rows": rows}


def columns(result: dict[str, Any]) -> list[tuple[str, str, Any]]:
    """(column name, row key, subset or None) in table order: mIoU per subset, then mR, RmIoU."""
    cols: list[tuple[str, str, Any]] = [(s, "miou", s) for s in result["subsets"]]
    for group in result["groups"]:
        cols += [(f"mR {group}", f"mr_{group}", None), (f"RmIoU {group}", f"rmiou_{group}", None)]
    return cols


def cell(row: dict[str, Any], key: str, subset: str | None) -> dict[str, Any]:
    return row[key][subset] if subset is not None else row[key]


def write(result: dict[str, Any], out: Path) -> list[Path]:
    """OUT/table_seeds.csv (one line per augmentation and column: mean, std, n, the values) and
    OUT/table_seeds.json (the whole result)."""
    out.mkdir(parents=True, exist_ok=True)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["augmentation", "column", "mean", "std", "n", *(f"seed_{s}" for s in result["seeds"])])
    for row in result["rows"]:
        for name, key, subset in columns(result):
            c = cell(row, key, subset)
            w.writerow([row["augmentation"], name, _num(c["mean"]), _num(c["std"]),
                        len(c["values"]), *(_num(v) for v in c["values"])])
    atomic_write_bytes(out / CSV_FILE, buf.getvalue().encode())
    atomic_write_json(out / JSON_FILE, result)
    return [out / CSV_FILE, out / JSON_FILE]


def _num(value: float | None) -> str:
    return "" if value is None else f"{value:.4f}"
