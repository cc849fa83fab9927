"""`segtk bench attacks` attack specs (`NAME[:KEY=VALUE;...]`, one ablation row each) and ε
sweeps (`--eps 4,8,16`, one table per ε): parsed by core._params, keyed per spec and ε."""

from __future__ import annotations

import csv
import json
import types

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from segtk.benchmarks import attacks as bench_module
from segtk.benchmarks.attacks import Shard, parse_spec, plan, run_shard
from segtk.cli import cli
from segtk.core import PluginError, SegmenterPlugin, hookimpl, load_dataset, read_image, registry
from segtk.core._plugins import get_plugin_manager, reset_plugin_manager
from segtk.testing import RecordingSegmenter, TinySegmenter


@pytest.fixture
def tiny_model():
    """`--model tiny` through the plugin manager (as in test_cli.py)."""
    reset_plugin_manager()
    plugin = types.SimpleNamespace(register_models=hookimpl(lambda register: register(
        SegmenterPlugin("tiny", lambda arg: TinySegmenter(), "tiny", "--model tiny"))))
    get_plugin_manager().register(plugin, name="tiny-bench-specs")
    registry.reset()
    yield "tiny"
    reset_plugin_manager()
    registry.reset()


@pytest.fixture
def bench(tiny_model, folder_dataset, tmp_path):
    def invoke(*args: str, out: str = "b"):
        return CliRunner().invoke(cli, ["bench", "attacks", "--model", "tiny", "--data",
                                        f"folder:{folder_dataset}", "--budgets", "3", "--repeats", "1",
                                        "--executor", "inline", "--out", str(tmp_path / out), *args])
    return invoke


def records(path) -> list[dict]:
    return [json.loads(line) for line in (path / "results.jsonl").read_text().splitlines()]


# --- specs ----------------------------------------------------------------------------------------

def test_a_spec_reads_its_parameters_and_has_one_canonical_label() -> None:
    spec = parse_spec(" dla: direction = horizontal ; calibration=random ")
    assert spec.label == "dla:direction=horizontal;calibration=random"
    assert (spec.name, spec.params) == ("dla", {"direction": "horizontal", "calibration": "random"})
    assert parse_spec("dla").label == parse_spec("dla:").label == "dla"


@pytest.mark.parametrize("text,says", [
    ("dla:diagonal=1", "unknown parameter 'diagonal'"),
    ("dla:direction=diagonal", "unknown DLA direction 'diagonal'"),
    ("dla:exploration=lots", "cannot read exploration='lots': expected a number"),
    ("dla:direction", "expected KEY=VALUE"),
    ("dla:direction=horizontal;direction=vertical", "given twice"),
    ("dla:eps=4", "eps is set by --eps for every spec"),
])
def test_a_bad_spec_is_one_error_naming_it_and_the_allowed_keys(text, says) -> None:
    with pytest.raises(PluginError) as exc:
        parse_spec(text)
    assert f"bad attack spec {text!r}" in exc.value.message and says in exc.value.message
    assert "direction=iterative" in str(exc.value.hint) and "calibration=flip" in str(exc.value.hint)
    assert "eps=" not in str(exc.value.hint)  # the shared knobs have their own options


def test_an_unknown_attack_in_a_spec_is_named(tiny_model) -> None:
    with pytest.raises(PluginError, match="attack spec 'dlx:direction=horizontal'"):
        parse_spec("dlx:direction=horizontal")


def test_a_spec_s_parameters_reach_the_attack(monkeypatch, folder_dataset) -> None:
    """Every query of dla:direction=horizontal is row-constant (plain DLA also queries columns)."""
    data = load_dataset(f"folder:{folder_dataset}")
    for label, rows_only in (("dla:direction=horizontal", True), ("dla", False)):
        model = RecordingSegmenter()
        monkeypatch.setattr(bench_module, "cached_segmenter",
                            lambda spec, device="cpu", model=model: model)
        run_shard(Shard("m", f"folder:{folder_dataset}", None, label, 0, 12, (12,), tuple(data.names[:1]),
                        8.0, 0, 1))
        clean = model.seen[0]
        signs = [torch.sign((x - clean).round(decimals=6)) for x in model.seen[1:]]
        # one sign per row (a pixel clipped at 0 or 1 may not move at all)
        row_constant = [all(len(set(row[row != 0].tolist())) <= 1 for row in s.unbind(1))
                        for s in signs]
        assert all(row_constant) if rows_only else not all(row_constant), label


def test_an_ablation_is_one_row_per_spec_and_resumes_per_spec(bench, tmp_path) -> None:
    first = bench("--attacks", "dla,dla:direction=horizontal")
    assert first.exit_code == 0, first.output
    assert "dla:direction=horizontal" in first.output
    rows = json.loads((tmp_path / "b" / "table.json").read_text())
    assert [r["attack"] for r in rows] == ["clean", "dla", "dla:direction=horizontal"]
    before = (tmp_path / "b" / "results.jsonl").read_text().splitlines()
    assert {r["attack"] for r in records(tmp_path / "b")} == {"dla", "dla:direction=horizontal"}
    assert all(f"|{r['attack']}|" in r["key"] for r in records(tmp_path / "b"))
    grown = bench("--attacks", "dla:direction = horizontal,dla:calibration=random", "--resume")
    assert grown.exit_code == 0, grown.output
    after = (tmp_path / "b" / "results.jsonl").read_text().splitlines()
    assert after[: len(before)] == before and len(after) == len(before) + 3  # 3 images of the new spec
    # the run's every spec: this invocation's --attacks in their order, then what else it holds
    rows = json.loads((tmp_path / "b" / "table.json").read_text())
    assert [r["attack"] for r in rows] == ["clean", "dla:direction=horizontal",
                                           "dla:calibration=random", "dla"]


def test_a_bad_spec_fails_before_any_work(bench, tmp_path) -> None:
    result = bench("--attacks", "random,dla:direction=diagonal")
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "bad attack spec 'dla:direction=diagonal'" in result.output and "direction=iterative" in result.output
    assert not (tmp_path / "b" / "results.jsonl").exists()


# --- ε sweeps -------------------------------------------------------------------------------------

def test_plan_keys_every_record_by_eps() -> None:
    shards = plan(["m"], "d", None, ["random"], [5], 1, ["a"], 1, [4, 8.0, 4], 0, 1)
    assert [s.eps for s in shards] == [4.0, 8.0]
    assert len({s.key("a") for s in shards}) == 2


def test_an_eps_sweep_prints_a_table_per_eps_and_writes_eps(bench, tmp_path) -> None:
    result = bench("--attacks", "random,dla", "--eps", "2,8")
    assert result.exit_code == 0, result.output
    assert "ε=2" in result.output and "ε=8" in result.output
    rows = list(csv.DictReader((tmp_path / "b" / "table.csv").open()))
    assert {(r["attack"], r["eps"]) for r in rows} == {("clean", ""), ("random", "2.0"), ("random", "8.0"),
                                                        ("dla", "2.0"), ("dla", "8.0")}
    assert {r["eps"] for r in json.loads((tmp_path / "b" / "table.json").read_text())} == {None, 2.0, 8.0}
    assert set(json.loads((tmp_path / "b" / "curves.json").read_text())["tiny"]) == {
        "random ε=2", "random ε=8", "dla ε=2", "dla ε=8"}
    assert {r["eps"] for r in records(tmp_path / "b")} == {2.0, 8.0}
    clean = read_image(next((tmp_path / "data" / "images").glob("img0.png")))
    for eps in (2, 8):  # each ε reached the attack: the stored image moves by exactly ε
        stored = read_image(tmp_path / "b" / "sheet" / "dla" / f"eps{eps}_3_img0.png")
        assert np.abs(stored.astype(int) - clean.astype(int)).max() == eps
    grown = bench("--attacks", "random,dla", "--eps", "2,8,4", "--resume")
    assert grown.exit_code == 0, grown.output
    assert {r["eps"] for r in records(tmp_path / "b")} == {2.0, 4.0, 8.0}
    assert len(records(tmp_path / "b")) == 3 * 2 * 3  # ε = 2 and 8 were not run again


def test_a_single_eps_keeps_one_table(bench, tmp_path) -> None:
    result = bench("--attacks", "random", "--eps", "8")
    assert result.exit_code == 0, result.output
    assert result.output.count("dataset mIoU %") == 1 and "ε=8" in result.output
    assert json.loads((tmp_path / "b" / "run.json").read_text())["config"]["eps"] == [8.0]


def test_an_eps_on_the_unit_scale_is_refused_in_a_sweep(bench, tmp_path) -> None:
    """torchattacks' eps=8/255 read as 0-255 would change nothing: refused, never run."""
    result = bench("--attacks", "random", "--eps", "8,0.0314")
    assert result.exit_code == 2, result.output
    assert "--eps=0.0314 looks like a fraction of the [0,1] range" in result.output
    assert "pass --eps=8 for 8/255" in result.output
    assert not (tmp_path / "b").exists()


@pytest.mark.parametrize("value,says", [("0,8", "must be in (0, 255]"), ("4,x", "cannot read --eps"),
                                        ("300", "must be in (0, 255]"), (",", "at least one value")])
def test_a_bad_eps_list_is_a_usage_error(bench, value, says) -> None:
    result = bench("--attacks", "random", "--eps", value)
    assert result.exit_code == 2 and says in result.output, result.output


def test_the_report_of_a_sweep_has_a_table_per_eps(bench, tmp_path) -> None:
    result = bench("--attacks", "random,dla:direction=vertical", "--eps", "2,8", "--report")
    assert result.exit_code == 0, result.output
    page = (tmp_path / "b" / "report.html").read_text()
    assert "tiny, ε=2" in page and "tiny, ε=8" in page and "dla:direction=vertical" in page
    for r in json.loads((tmp_path / "b" / "table.json").read_text()):
        if r["attack"] != "clean":
            assert f"{r['miou_mean']:.2f} ± {r['miou_std']:.2f}" in page
    assert page.count("<polyline") == 4  # one proxy curve per spec and ε
    assert "stored 8-bit image" in page and "float candidates" in page


def test_the_report_of_an_old_run_says_its_table_scored_float_candidates(bench, tmp_path) -> None:
    assert bench("--attacks", "random").exit_code == 0
    path = tmp_path / "b" / "results.jsonl"
    old = [{k: v for k, v in r.items() if k != "eps"} for r in records(tmp_path / "b")]
    path.write_text("".join(json.dumps(r) + "\n" for r in old))
    shown = CliRunner().invoke(cli, ["report", str(tmp_path / "b")])
    assert shown.exit_code == 0, shown.output
    assert "float candidates, not the stored 8-bit images" in (tmp_path / "b" / "report.html").read_text()
