"""`segtk.bench_seeds`: the spread over seeds of `bench_augment` tables, as `segtk bench seeds`."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from segtk.api.results import Table
from segtk.benchmarks.seeds import read_seed_run, summarise, write


def bench_seeds(runs: Sequence[str | Path], out: str | Path | None = None) -> Table:
    """Mean ± sample std over `bench_augment` run folders that differ only in their training
    `seed` (runs with other settings, a repeated seed or other rows are refused). One row per
    augmentation: "augmentation", then per subset (mIoU %) and per edit group (mr_GROUP,
    rmiou_GROUP) a {"mean", "std", "values"} dict, values in seed order (None where a run has
    no number). `details` holds the whole result ("seeds", "runs", "eval_seed", "subsets",
    "groups", "rows"); with `out`, also written to OUT/table_seeds.csv and table_seeds.json."""
    result = summarise([read_seed_run(run) for run in runs])
    rows = [{"augmentation": r["augmentation"], **r["miou"],
             **{k: v for k, v in r.items() if k.startswith(("mr_", "rmiou_"))}}
            for r in result["rows"]]
    files = write(result, Path(out)) if out is not None else []
    return Table(rows, out=None if out is None else Path(out), files=files, details=result)
