"""`segtk bench seeds`: mean ± std over bench augment runs that differ only in --seed."""

from __future__ import annotations

import csv
import json
import shutil
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import segtk
from segtk.cli import cli

Refuse = Callable[..., tuple[str, str | None]]  # the `refusal` fixture (conftest.py)


def bench(out: Path, seed: int) -> segtk.Table:
    return segtk.bench_augment("demo", "demo", "baseline", out, split="", limit=4, eval_split="",
                               eval_limit=2, attributes="weather", values={"weather": ["fog"]},
                               epochs=1, batch_size=4, lr=3e-3, crop=(64, 48), seed=seed)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> list[Path]:
    """Three real runs, seeds 2, 0 and 1 (given out of order), on one test set."""
    root = tmp_path_factory.mktemp("seeds")
    folders = [root / f"seed{s}" for s in (2, 0, 1)]
    for folder, seed in zip(folders, (2, 0, 1)):
        bench(folder, seed)
    return folders


def test_each_cell_is_the_mean_and_sample_std_of_the_runs_tables(runs, tmp_path) -> None:
    tables = {json.loads((r / "run.json").read_text())["config"]["seed"]:
              json.loads((r / "table.json").read_text()) for r in runs}
    result = segtk.bench_seeds(runs, out=tmp_path)
    assert result.details["seeds"] == [0, 1, 2]
    baseline = next(row for row in result if row["augmentation"] == "baseline")
    for column in ("original", "weather"):
        values = [next(r for r in tables[s]["rows"] if r["augmentation"] == "baseline")["miou"][column]
                  for s in (0, 1, 2)]
        assert len(set(values)) > 1  # the seeds trained differently: a spread to measure
        assert baseline[column]["values"] == values
        assert baseline[column]["mean"] == pytest.approx(sum(values) / 3)
        assert baseline[column]["std"] == pytest.approx(statistics.stdev(values))
    mr = [next(r for r in tables[s]["rows"] if r["augmentation"] == "baseline")["mr_appearance"]
          for s in (0, 1, 2)]
    assert baseline["mr_appearance"]["std"] == pytest.approx(statistics.stdev(mr))
    start = next(row for row in result if row["augmentation"] == "start")
    assert start["original"]["std"] == 0.0  # the untrained start model: one test set, one score
    lines = list(csv.DictReader((tmp_path / "table_seeds.csv").open()))
    row = next(r for r in lines if r["augmentation"] == "baseline" and r["column"] == "original")
    assert float(row["mean"]) == pytest.approx(baseline["original"]["mean"], abs=1e-4)
    assert [float(row[f"seed_{s}"]) for s in (0, 1, 2)] == pytest.approx(baseline["original"]["values"], abs=1e-4)


def test_the_cli_prints_the_same_numbers(runs, tmp_path) -> None:
    api = segtk.bench_seeds(runs)
    got = CliRunner().invoke(cli, ["bench", "seeds", *map(str, runs), "--out", str(tmp_path)],
                             terminal_width=200)
    assert got.exit_code == 0, got.output
    cell = api[1]["original"]
    assert f"{cell['mean']:.2f} ± {cell['std']:.2f}" in got.output
    assert "seeds 0, 1, 2" in got.output
    assert json.loads((tmp_path / "table_seeds.json").read_text())["rows"] == json.loads(
        json.dumps(api.details["rows"]))


def refused(*folders: Path) -> str:
    got = CliRunner().invoke(cli, ["bench", "seeds", *map(str, folders)])
    assert got.exit_code == 1, got.output
    return got.output


def test_runs_that_differ_in_more_than_the_seed_are_refused_naming_the_setting(runs, tmp_path) -> None:
    other = tmp_path / "other"
    shutil.copytree(runs[0], other)
    record = json.loads((other / "run.json").read_text())
    record["config"]["eval_seed"] = 7  # scored on other edited images: not the seed's spread
    record["config"]["seed"] = 9
    (other / "run.json").write_text(json.dumps(record))
    assert "differ in more than the seed (eval_seed)" in refused(runs[1], other)


def test_a_repeated_seed_one_run_and_an_unfinished_run_are_refused(runs, tmp_path) -> None:
    assert "both ran with --seed 2" in refused(runs[0], runs[0])
    assert "at least two runs" in refused(runs[0])
    unfinished = tmp_path / "unfinished"
    shutil.copytree(runs[0], unfinished)
    (unfinished / "table.json").unlink()
    out = refused(runs[1], unfinished)
    assert "has no table.json" in out and "--resume" in out


def test_a_folder_of_another_run_kind_is_refused(runs) -> None:
    assert "holds a `segtk edit` run" in refused(runs[0], runs[0] / "edits" / "weather")


# --- the spread and its CSV, on hand-made results ---------------------------------------------


def test_a_spread_needs_every_run_to_have_a_finite_number() -> None:
    from segtk.benchmarks.seeds import spread

    assert spread([1.0, 2.0, 4.0]) == {"mean": 7 / 3, "std": statistics.stdev([1.0, 2.0, 4.0]),
                                       "values": [1.0, 2.0, 4.0]}
    cases: list[list[float | None]] = [[1.0, None, 4.0], [1.0, float("nan"), 4.0], [float("inf"), 2.0]]
    for values in cases:
        assert spread(values) == {"mean": None, "std": None, "values": values}


def test_the_seed_table_csv_is_one_line_per_row_and_column(tmp_path: Path) -> None:
    from segtk.benchmarks.seeds import write

    result = {"seeds": [0, 1], "subsets": ["original", "fog"], "groups": ["appearance"],
              "rows": [{"augmentation": "baseline",
                        "miou": {"original": {"mean": 50.0, "std": 1.25, "values": [49.116, 50.884]},
                                 "fog": {"mean": None, "std": None, "values": [40.0, None]}},
                        "mr_appearance": {"mean": 0.8, "std": 0.0, "values": [0.8, 0.8]},
                        "rmiou_appearance": {"mean": 40.0, "std": 0.5, "values": [39.5, 40.5]}}]}
    out = tmp_path / "a" / "b"  # made with its parents
    assert write(result, out) == [out / "table_seeds.csv", out / "table_seeds.json"]
    assert (out / "table_seeds.csv").read_bytes() == (
        b"augmentation,column,mean,std,n,seed_0,seed_1\n"
        b"baseline,original,50.0000,1.2500,2,49.1160,50.8840\n"
        b"baseline,fog,,,2,40.0000,\n"
        b"baseline,mR appearance,0.8000,0.0000,2,0.8000,0.8000\n"
        b"baseline,RmIoU appearance,40.0000,0.5000,2,39.5000,40.5000\n")
    assert json.loads((out / "table_seeds.json").read_text()) == result


def test_fewer_than_two_runs_are_refused_with_the_command_to_run() -> None:
    from segtk.benchmarks.seeds import check_same_but_seed
    from segtk.core import SegtkError

    with pytest.raises(SegtkError) as info:
        check_same_but_seed([])
    assert str(info.value.args[0]) == "a spread needs at least two runs, got 0"
    assert info.value.hint == ("run `segtk bench augment` once per --seed (e.g. 0, 1, 2) and give "
                               "every --out folder")


def seed_run(folder: Path, seed: int | None, rows: list[str], kind: str = "bench-augment",
             original: float = 50.0, **settings: Any) -> Path:
    """A hand-made finished bench augment folder: run.json and table.json."""
    folder.mkdir(parents=True)
    config: dict = {"seed": seed, "eval_seed": 0, "augments": rows[1:], **settings}
    if seed is None:
        del config["seed"]
    (folder / "run.json").write_text(json.dumps({"kind": kind, "config": config}))
    table = {"subsets": ["original"], "groups": ["appearance"],
             "rows": [{"augmentation": r, "miou": {"original": original + i, "original-all": 40.0 + i},
                       "mr_appearance": 0.5, "rmiou_appearance": 25.0 + (seed or 0)}
                      for i, r in enumerate(rows)]}
    (folder / "table.json").write_text(json.dumps(table))
    return folder


def test_what_is_not_a_finished_bench_augment_run_is_refused_exactly(tmp_path: Path, refusal: Refuse) -> None:
    from segtk.benchmarks.seeds import read_seed_run

    hint = "give the --out folders of `segtk bench augment` runs"
    assert refusal(lambda: read_seed_run(tmp_path)) == (
        f"{tmp_path} is not a segtk run folder (no run.json)", hint)
    other = seed_run(tmp_path / "b", 0, ["start"], kind="bench-attacks")
    assert refusal(lambda: read_seed_run(other)) == (
        f"{other} holds a `segtk bench attacks` run, not a `segtk bench augment` one", hint)
    broken = seed_run(tmp_path / "c", 0, ["start"])
    (broken / "table.json").write_text("{")
    message, fix = refusal(lambda: read_seed_run(broken))
    assert message.startswith(f"{broken / 'table.json'} is not valid JSON (Expecting")
    assert fix == f"rewrite it: segtk bench augment --resume --out {broken}"
    assert read_seed_run(seed_run(tmp_path / "d", None, ["start"])).seed == 0  # no seed: 0


def test_runs_are_compared_setting_by_setting_seed_by_seed_and_row_by_row(tmp_path: Path, refusal: Refuse) -> None:
    from segtk.benchmarks.seeds import check_same_but_seed, read_seed_run

    a = read_seed_run(seed_run(tmp_path / "a", 0, ["start", "baseline"]))
    flipped = read_seed_run(seed_run(tmp_path / "f", 1, ["start", "baseline"], flip=True,
                                     scale=[0.5, 2.0]))
    assert refusal(lambda: check_same_but_seed([a, flipped])) == (
        f"{flipped.path} and {a.path} differ in more than the seed (flip, scale): flip unset in "
        "a, true in f; scale unset in a, [0.5, 2.0] in f", "summarise runs made with the same "
        "command and another --seed (one --eval-seed: the same test images)")
    again = read_seed_run(seed_run(tmp_path / "again", 0, ["start", "baseline"]))
    assert refusal(lambda: check_same_but_seed([a, again])) == (
        f"{again.path} and {a.path} both ran with --seed 0", "give each seed's run once")
    b = read_seed_run(seed_run(tmp_path / "b", 1, ["start", "baseline"]))
    c = read_seed_run(seed_run(tmp_path / "c", 2, ["start", "cutmix"]))
    c.config["augments"] = a.config["augments"]  # the same command, resumed with other rows
    for runs in ([a, c], [a, b, c]):
        assert refusal(lambda runs=runs: check_same_but_seed(runs)) == (
            f"{c.path} has the rows start, cutmix; {a.path} has start, baseline",
            "resume the runs with the same --augment list")
    check_same_but_seed([a, b])


def test_the_summary_lists_seeds_runs_and_every_cell_in_seed_order(tmp_path: Path) -> None:
    from segtk.benchmarks.seeds import read_seed_run, summarise

    runs = [read_seed_run(seed_run(tmp_path / f"s{s}", s, ["start", "cutmix"], original=50.0 + s))
            for s in (2, 0)]
    got = summarise(runs)
    assert got["seeds"] == [0, 2] and got["runs"] == [str(tmp_path / "s0"), str(tmp_path / "s2")]
    assert got["eval_seed"] == 0
    assert got["subsets"] == ["original", "original-all"] and got["groups"] == ["appearance"]
    assert [r["augmentation"] for r in got["rows"]] == ["start", "cutmix"]
    cutmix = got["rows"][1]
    assert cutmix["miou"]["original"] == {"mean": 52.0, "std": statistics.stdev([51.0, 53.0]),
                                          "values": [51.0, 53.0]}
    assert cutmix["miou"]["original-all"]["values"] == [41.0, 41.0]
    assert cutmix["rmiou_appearance"]["values"] == [25.0, 27.0]
    assert cutmix["mr_appearance"] == {"mean": 0.5, "std": 0.0, "values": [0.5, 0.5]}
