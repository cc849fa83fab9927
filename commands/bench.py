"""`segtk bench`: the papers' tables (attacks, edited subsets, augmentation)."""

from __future__ import annotations

import click

from segtk.commands.bench_attacks import bench_attacks
from segtk.commands.bench_edits import bench_edits
from segtk.commands.bench_seeds import bench_seeds
from segtk.commands.train import bench_augment


@click.group()
def bench() -> None:
    """Benchmarks: the papers' tables on any model.

    \b
    Examples:
      segtk bench attacks --attacks dla,random --budgets 10,50
    """


bench.add_command(bench_attacks)
bench.add_command(bench_edits)
bench.add_command(bench_augment)
bench.add_command(bench_seeds)
