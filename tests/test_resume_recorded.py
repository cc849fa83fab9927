"""--resume and --table-only with only --out: the options left out are the ones OUT/run.json
records, so a resumed run ends as the uninterrupted run with every option typed; an option
typed again with another value is refused in one line naming it, the recorded and the new
value (commands.resume)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from segtk.cli import cli
from segtk.commands.attack import RECORDED
from segtk.commands.resume import as_text, pairs
from segtk.core import build, convert, parse_pairs, registry
from segtk.jobs.attack import run_settings
from segtk.jobs.edit import build_editor
from segtk.storage import layout
from segtk.storage.runs import read_results

# Not the defaults: the model names two classes otherwise than the data (so it needs
# --classes-from-data) and the data is a fresh demo draw.
MODEL = "demo:classes=sky;road;sidewalk;building;vegetation;car;pedestrian;pole"
DATA = "demo:fresh=3,seed=5"


def segtk(*args: str):
    return CliRunner().invoke(cli, list(args))


def ok(*args: str):
    result = segtk(*args)
    assert result.exit_code == 0, result.output
    return result


def interrupted(whole: Path, keep: int) -> Path:
    """A copy of the run `whole` as a kill would have left it: the first `keep` records (and
    the files of the others, which a resume writes again)."""
    cut = whole.parent / f"{whole.name}-cut"
    shutil.rmtree(cut, ignore_errors=True)
    shutil.copytree(whole, cut)
    lines = (cut / layout.RESULTS).read_bytes().splitlines(keepends=True)
    assert len(lines) > keep
    (cut / layout.RESULTS).write_bytes(b"".join(lines[:keep]))
    return cut


def snapshot(out: Path) -> dict[str, tuple[bytes, int, int]]:
    """Every file of a run folder by relative path (the lock file aside): its bytes, inode and
    mtime, so rewriting a file with the same bytes shows too."""
    return {p.relative_to(out).as_posix(): (p.read_bytes(), p.stat().st_ino, p.stat().st_mtime_ns)
            for p in sorted(out.rglob("*")) if p.is_file() and p.name != layout.LOCK}


def config(out: Path) -> dict:
    return json.loads((out / layout.RUN).read_text())["config"]


def one_line_refusal(result, *words: str) -> None:
    assert result.exit_code == 1 and "Traceback" not in result.output
    error = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert len(error) == 1 and all(w in error[0] for w in words), result.output


def test_attack_resumes_with_only_out(tmp_path) -> None:
    full = ["attack", "--plugin", "dla", "--model", MODEL, "--data", DATA, "--classes-from-data",
            "--limit", "3", "--budget", "7", "--eps", "4", "--seed", "3",
            "--param", "exploration=0.3", "--time-limit", "600", "--batch-size", "1"]
    whole = tmp_path / "whole"
    ok(*full, "--out", str(whole))
    cut = interrupted(whole, keep=1)
    ok("attack", "--plugin", "dla", "--out", str(cut), "--resume")  # the README's line
    assert (cut / layout.RESULTS).read_bytes() == (whole / layout.RESULTS).read_bytes()
    assert config(cut) == config(whole)
    cut = interrupted(whole, keep=2)
    ok("attack", "--out", str(cut), "--resume")  # even --plugin is recorded
    assert (cut / layout.RESULTS).read_bytes() == (whole / layout.RESULTS).read_bytes()


def test_attack_refuses_another_value_naming_both(tmp_path) -> None:
    out = tmp_path / "a"
    ok("attack", "--plugin", "dla", "--limit", "1", "--budget", "7", "--seed", "3",
       "--out", str(out))
    before = (out / layout.RESULTS).read_bytes(), (out / layout.RUN).read_bytes()
    for args, words in [(["--budget", "9"], ["holds a run with --budget 7, not --budget 9"]),
                        (["--plugin", "random"], ["holds a run with --plugin dla, not --plugin random"]),
                        (["--eps", "2"], ["with --eps 8, not --eps 2"]),
                        (["--classes-from-data"], ["with no --classes-from-data, not --classes-from-data"]),
                        (["--param", "exploration=0.5"], ["params.exploration", "now"])]:
        refused = segtk("attack", "--plugin", "dla", "--out", str(out), "--resume", *args)
        one_line_refusal(refused, str(out), *words)
        assert ((out / layout.RESULTS).read_bytes(), (out / layout.RUN).read_bytes()) == before
    same = ok("attack", "--plugin", "dla", "--out", str(out), "--resume", "--budget", "7",
              "--seed", "3", "--batch-size", "4", "--no-save-images")  # not settings: free
    more = ok("attack", "--plugin", "dla", "--out", str(out), "--resume", "--limit", "2")
    assert "budget=7" in same.output + more.output  # the recorded budget
    assert len(read_results(out / layout.RESULTS)) == 2 and config(out)["limit"] == 2


def test_resume_without_run_json_or_plugin_says_so(tmp_path) -> None:
    missing = segtk("attack", "--out", str(tmp_path / "none"), "--resume")
    one_line_refusal(missing, f"{tmp_path / 'none'} holds no run to resume: it has no {layout.RUN}")
    assert not (tmp_path / "none").exists()  # nothing started there
    nowhere = segtk("attack", "--resume")  # no --out, no --plugin: no folder to read it from
    assert nowhere.exit_code == 2 and "Missing option '--plugin'" in nowhere.output
    plain = segtk("attack")
    assert plain.exit_code == 2 and "Missing option '--plugin'." in plain.output


BENCH = ["bench", "attacks", "--attacks", "random,dla:exploration=0.3", "--budgets", "2,3",
         "--model", MODEL, "--data", DATA, "--classes-from-data", "--limit", "1", "--repeats", "2",
         "--eps", "4", "--seed", "2", "--executor", "inline"]


def test_bench_attacks_resumes_and_shows_its_table_with_only_out(tmp_path) -> None:
    whole = tmp_path / "whole"
    ok(*BENCH, "--out", str(whole))
    cut = interrupted(whole, keep=1)  # random's first repeat
    before = snapshot(cut)
    shown = ok("bench", "attacks", "--out", str(cut), "--table-only")  # the README's line
    assert "(1 of 2 repeats" in shown.output  # the table of what OUT holds
    assert "dla:exploration" not in shown.output
    assert snapshot(cut) == before  # nothing was run, nothing written
    ok("bench", "attacks", "--out", str(cut), "--resume")  # the README's line
    records = read_results(cut / layout.RESULTS, key="key")
    assert records == read_results(whole / layout.RESULTS, key="key")
    assert config(cut) == config(whole)
    table = (whole / "table.json").read_text()
    assert (cut / "table.json").read_text() == table
    shown = ok("bench", "attacks", "--out", str(cut), "--table-only")
    assert (cut / "table.json").read_text() == table and "repeats finished" not in shown.output


SMALL = ["bench", "attacks", "--attacks", "random", "--budgets", "2", "--repeats", "1",
         "--executor", "inline"]


def test_bench_attacks_resume_may_change_the_limit(tmp_path) -> None:
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    ok(*SMALL, "--limit", "2", "--out", str(whole))
    ok(*SMALL, "--limit", "1", "--out", str(cut))
    one = (cut / "table.json").read_text()
    ok("bench", "attacks", "--out", str(cut), "--resume", "--limit", "2")  # as the docs allow
    assert read_results(cut / layout.RESULTS, key="key") == read_results(whole / layout.RESULTS, key="key")
    assert (cut / "table.json").read_text() == (whole / "table.json").read_text()
    before = snapshot(cut)
    shown = ok("bench", "attacks", "--out", str(cut), "--table-only", "--limit", "1")
    assert snapshot(cut) == before and "random" in shown.output
    ok("bench", "attacks", "--out", str(cut), "--resume", "--limit", "1")  # fewer: its table
    assert (cut / "table.json").read_text() == one and config(cut)["limit"] == 1
    assert read_results(cut / layout.RESULTS, key="key") == read_results(whole / layout.RESULTS, key="key")
    record = json.loads((cut / layout.RUN).read_text())  # the data changed on disk since
    record["config"]["images"] = ["another"]
    (cut / layout.RUN).write_text(json.dumps(record))
    one_line_refusal(segtk("bench", "attacks", "--out", str(cut), "--resume", "--limit", "2"),
                     "holds a run on other images", "'another'")


def test_bench_attacks_table_only_writes_nothing(tmp_path) -> None:
    out = tmp_path / "b"
    ok(*SMALL, "--limit", "1", "--out", str(out))
    before = snapshot(out)
    shown = ok("bench", "attacks", "--out", str(out), "--table-only")
    assert snapshot(out) == before and "wrote" not in shown.output
    one_line_refusal(segtk("bench", "attacks", "--out", str(out), "--table-only", "--report"),
                     "--table-only writes nothing")
    assert snapshot(out) == before


def test_bench_attacks_refuses_another_value_but_takes_more_attacks(tmp_path) -> None:
    out = tmp_path / "b"
    ok(*BENCH, "--out", str(out))
    for flag in ("--resume", "--table-only"):
        for args, words in [(["--seed", "4"], ["holds a run with --seed 2, not --seed 4"]),
                            (["--budgets", "2,30"], ["with --budgets 2,3, not --budgets 2,30"]),
                            (["--model", "demo"], [f"with --model '{MODEL}', not --model demo"])]:
            one_line_refusal(segtk("bench", "attacks", "--out", str(out), flag, *args), *words)
    old = tmp_path / "old"  # a run made before ε sweeps (one ε) and 8-bit scoring
    shutil.copytree(out, old)
    record = json.loads((old / layout.RUN).read_text())
    record["config"]["eps"] = 4.0
    del record["config"]["scores"]
    (old / layout.RUN).write_text(json.dumps(record))
    one_line_refusal(segtk("bench", "attacks", "--out", str(old), "--resume"),
                     "other settings (scores)")
    grown = ok("bench", "attacks", "--out", str(out), "--resume", "--attacks", "random,square")
    assert {json.loads(line)["attack"] for line in (out / layout.RESULTS).read_text().splitlines()} \
        == {"random", "dla:exploration=0.3", "square"}
    assert "square" in grown.output and config(out)["seed"] == 2


def test_edit_resumes_with_only_out(tmp_path) -> None:
    whole = tmp_path / "whole"
    ok("edit", "--plugin", "color", "--values", "red,blue", "--data", DATA, "--limit", "3",
       "--seed", "4", "--min-area", "0.01", "--pick", "one", "--exclude", "sky", "--variants", "2",
       "--objects", "ranked", "--param", "strength=0.7", "--filter", "surrogate",
       "--filter-param", "surrogate.model=demo", "--filter-param", "surrogate.mode=code",
       "--sheet-rows", "0", "--out", str(whole))
    lines = (whole / "manifest.jsonl").read_bytes().splitlines(keepends=True)
    assert len(lines) == 6
    cut = whole.parent / "cut"
    shutil.copytree(whole, cut)
    (cut / "manifest.jsonl").write_bytes(b"".join(lines[:2]))
    for image in sorted((cut / "images").iterdir())[2:]:
        image.unlink()
    ok("edit", "--plugin", "color", "--out", str(cut), "--resume")  # the README's line
    assert (cut / "manifest.jsonl").read_bytes() == (whole / "manifest.jsonl").read_bytes()
    assert config(cut) == config(whole)
    for image in (whole / "images").iterdir():
        assert (cut / "images" / image.name).read_bytes() == image.read_bytes()
    one_line_refusal(segtk("edit", "--out", str(cut), "--resume", "--min-area", "0.05"),
                     "holds a run with --min-area 0.01, not --min-area 0.05")
    one_line_refusal(segtk("edit", "--out", str(cut), "--resume", "--filter-param",
                           "surrogate.model=demo"), "filters.surrogate.mode", "code", "upper")


def test_bench_edits_resumes_with_only_out(tmp_path) -> None:
    whole = tmp_path / "whole"
    ok("bench", "edits", "--models", f"{MODEL},demo", "--data", DATA, "--classes-from-data",
       "--attributes", "color", "--values", "color=red,blue", "--param", "hue_jitter=2", "--limit", "3", "--seed", "3", "--pick", "all",
       "--all-images", "--min-area", "0.01", "--objects", "ranked", "--executor", "inline",
       "--out", str(whole))
    assert config(whole)["params"] == {"hue_jitter": "2"}
    cut = interrupted(whole, keep=3)
    ok("bench", "edits", "--out", str(cut), "--resume")  # the README's line
    assert read_results(cut / layout.RESULTS, key="key") == read_results(whole / layout.RESULTS, key="key")
    assert config(cut) == config(whole)
    assert (cut / "table.json").read_text() == (whole / "table.json").read_text()
    one_line_refusal(segtk("bench", "edits", "--out", str(cut), "--resume", "--pick", "one"),
                     "holds a run with --pick all, not --pick one")
    # a run made before --param was recorded: the option typed again, each subset checks it
    record = json.loads((cut / layout.RUN).read_text())
    del record["config"]["params"]
    (cut / layout.RUN).write_text(json.dumps(record))
    ok("bench", "edits", "--out", str(cut), "--resume", "--param", "hue_jitter=2")
    refused = segtk("bench", "edits", "--out", str(cut), "--resume", "--param", "hue_jitter=3")
    one_line_refusal(refused, str(cut / "edits" / "color"), "params.hue_jitter")


TRAINING = ["--model", "demo", "--data", DATA, "--classes-from-data", "--limit", "3",
            "--batch-size", "2", "--crop", "64x48", "--lr", "3e-3", "--seed", "3"]
TRAIN = [*TRAINING, "--augment", "cutmix:alpha=1,p=1"]


def test_train_resumes_with_only_out(tmp_path) -> None:
    whole, short, cut = tmp_path / "whole", tmp_path / "short", tmp_path / "cut"
    ok("train", *TRAIN, "--epochs", "2", "--out", str(whole))
    ok("train", *TRAIN, "--epochs", "1", "--out", str(short))
    ok("train", "--out", str(short), "--resume", "--epochs", "2")  # the README's line
    shutil.copytree(whole, cut)  # killed in epoch 2
    (cut / layout.RESULTS).write_text((whole / layout.RESULTS).read_text().splitlines()[0] + "\n")
    shutil.rmtree(cut / "checkpoints" / "epoch-0002")
    ok("train", "--out", str(cut), "--resume")  # finishes the recorded --epochs 2
    last = Path("checkpoints", "epoch-0002", "state.safetensors")
    for run in (short, cut):
        assert config(run) == config(whole)
        assert (run / last).read_bytes() == (whole / last).read_bytes()
        assert [json.loads(line)["loss"] for line in (run / layout.RESULTS).read_text().splitlines()] \
            == [json.loads(line)["loss"] for line in (whole / layout.RESULTS).read_text().splitlines()]
    for args, words in [(["--lr", "0.1"], "holds a run with --lr 0.003, not --lr 0.1"),
                        (["--crop", "64x40"], "with --crop 64x48, not --crop 64x40"),
                        (["--split", "train"], "with --split '', not --split train")]:
        one_line_refusal(segtk("train", "--out", str(cut), "--resume", *args), words)


def test_bench_augment_resumes_with_only_out(tmp_path) -> None:
    args = ["bench", "augment", *TRAINING, "--augment", "baseline,cutmix:alpha=1,p=1",
            "--eval-data", "demo", "--eval-limit", "2", "--attributes", "weather",
            "--values", "weather=fog"]
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    ok(*args, "--out", str(whole))
    ok(*args, "--out", str(cut))  # the same run in another folder (records name it), then killed
    (cut / layout.RESULTS).write_text((cut / layout.RESULTS).read_text().splitlines()[0] + "\n")
    shutil.rmtree(cut / "train" / "baseline")
    ok("bench", "augment", "--out", str(cut), "--resume")  # the README's line

    def records(out: Path) -> dict:
        text = (out / layout.RESULTS).read_text().replace(str(out), "OUT")
        return {r["key"]: r for r in map(json.loads, text.splitlines())}

    assert records(cut) == records(whole) and config(cut) == config(whole)
    assert (cut / "table.json").read_text().replace(str(cut), "OUT") \
        == (whole / "table.json").read_text().replace(str(whole), "OUT")


def _plugins(kind: str) -> list[str]:
    return sorted(i.name for i in registry.plugins() if i.kind == kind)


@pytest.mark.parametrize("name", _plugins("attack"))
def test_every_attacks_recorded_parameters_read_back(name) -> None:
    """What `segtk attack` gives --param on resume (run.json's params as text) builds the
    attack with the recorded parameters, whatever their types."""
    recorded = json.loads(json.dumps(run_settings(build("attack", name, {}, budget=7, eps=4.0, seed=3).params)))
    items = RECORDED["extra"].read(recorded["params"])
    again = build("attack", name, parse_pairs(items, "--param"), budget=7, eps=4.0, seed=3)
    assert json.loads(json.dumps(run_settings(again.params))) == recorded


@pytest.mark.parametrize("name", _plugins("editor"))
def test_every_editors_recorded_parameters_read_back(name) -> None:
    recorded = json.loads(json.dumps(build_editor(name, "classical", {}).parameters()))
    items = parse_pairs(pairs(recorded), "--param")
    assert json.loads(json.dumps(build_editor(name, "classical", items).parameters())) == recorded


@pytest.mark.parametrize(("value", "kind"), [
    (True, bool), (False, bool), (True, Any), (None, float | None), (None, Any), (3, int),
    (0.1 + 0.2, float), (1e-300, float), ("text, more", str), ([1, 2], list[int]),
    ((0.5, 0.25), tuple[float, float]), (["a", "b"], list[str]), ("none", str),
])
def test_recorded_values_read_back_as_text(value, kind) -> None:
    assert convert(as_text(value), kind) == value
