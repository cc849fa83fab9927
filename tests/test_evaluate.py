"""segtk evaluate / segtk leaderboard: the ensemble's worst case, the card's bytes under a
resumed and sharded run, the leaderboard's refusals, and CLI = Python."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from segtk.benchmarks.attacks import bench_records
from segtk.cli import cli
from segtk.core import SegtkError, load_dataset, write_png
from segtk.core._metrics import mean_iou
from segtk.evaluation import evaluate, leaderboard
from segtk.evaluation.ensemble import Member, worst_case
from segtk.evaluation.run import editors_missing
from segtk.storage import layout
from segtk.storage.runs import read_results

LIMIT = 4  # demo images: enough for a worst case that differs from every member


@pytest.fixture(scope="module")
def local(tmp_path_factory) -> Path:
    """The quick profile on 4 demo images, in this process (inline executor)."""
    out = tmp_path_factory.mktemp("evaluate") / "local"
    evaluate("demo", "demo", profile="quick", out=out, limit=LIMIT, executor="inline")
    return out


def _card(out: Path) -> dict:
    return json.loads((out / "card.json").read_text())


def test_worst_case_is_at_or_below_every_member_on_every_image(local):
    card = _card(local)
    records = bench_records(read_results(local / "black-box" / layout.RESULTS, key="key").values(),
                            None)
    assert card["black_box"], "no black-box results"
    for entry in card["black_box"]:
        assert set(entry["members"]) == {"colour-blocks", "signhunter", "dla"}
        for p in entry["per_image"]:
            assert p["worst"] <= min(p["members"].values())
            assert p["members"][p["by"]] == p["worst"]
            for attack, value in p["members"].items():  # the members' numbers are the records'
                rec = next(r for r in records if r.attack == attack and r.image == p["image"]
                           and str(entry["budget"]) in r.confusions)
                conf = torch.tensor(rec.confusions[str(entry["budget"])])
                assert value == pytest.approx(100 * float(mean_iou(conf)), abs=1e-4)
        for member in entry["members"].values():
            assert entry["miou"] <= member["miou"]
            assert entry["image_miou"] <= member["image_miou"]
        assert entry["queries"] == 3 * LIMIT * entry["budget"]  # budgets spent in full here
    # the white-box floor is its own section, never a member of the black-box ensemble
    assert card["white_box"]["ran"] and card["white_box"]["results"][0]["budget"] == 10
    assert card["protocol"] == {"name": "segtk-robustness", "version": "1.0",
                                "profile": card["protocol"]["profile"]}
    assert card["edits"]["ran"] and set(card["edits"]["attributes"]) == {"color", "size"}


def test_worst_case_dataset_number_is_never_above_a_member():
    """A per-image choice can raise a dataset IoU summed over images (here: 38.46 for the
    selection, 34.39 for b alone): the dataset number is the lowest of that selection and each
    member alone."""
    def conf(rows: list[list[int]]) -> torch.Tensor:  # 2 classes, K+1 columns
        return torch.tensor([[*r, 0] for r in rows])

    a = Member("a", {"x": conf([[36, 7], [25, 5]]), "y": conf([[23, 7], [2, 38]])}, {"x": 5, "y": 4})
    b = Member("b", {"x": conf([[1, 12], [11, 45]]), "y": conf([[7, 30], [13, 46]])}, {"x": 5, "y": 5})
    result = worst_case([a, b], ["x", "y"])
    picked = {p["image"]: p["by"] for p in result["per_image"]}
    selection = sum((a if picked[i] == "a" else b).confusions[i] for i in ("x", "y"))
    assert 100 * float(mean_iou(selection)) > result["members"]["b"]["miou"]
    assert result["selection"] == "b" and result["miou"] == result["members"]["b"]["miou"]
    assert result["miou"] <= min(m["miou"] for m in result["members"].values())
    assert result["queries"] == 19


def killed_copy(run: Path, copy: Path) -> None:
    """`run` copied as a kill would leave it: a third of each sub-run's records, no card."""
    shutil.copytree(run, copy)
    for sub in ("black-box", "white-box", "edits"):
        lines = (copy / sub / layout.RESULTS).read_bytes().splitlines(keepends=True)
        (copy / sub / layout.RESULTS).write_bytes(b"".join(lines[: len(lines) // 3]))
    (copy / "card.json").unlink()
    (copy / "card.html").unlink()


def test_card_is_bit_identical_after_a_kill_and_a_sharded_resume(local, tmp_path):
    """Cut each sub-run's records short (a kill), drop the card, resume over a process pool
    in shards of one image: the same card.json and card.html, byte for byte."""
    resumed = tmp_path / "resumed"
    killed_copy(local, resumed)
    with pytest.raises(SegtkError, match="already holds"):
        evaluate("demo", "demo", profile="quick", out=resumed, limit=LIMIT)
    evaluate("demo", "demo", profile="quick", out=resumed, limit=LIMIT, resume=True,
             executor="local", workers=2, chunk=1)
    assert (resumed / "card.json").read_bytes() == (local / "card.json").read_bytes()
    assert (resumed / "card.html").read_bytes() == (local / "card.html").read_bytes()


def test_cli_gives_the_python_card(local, tmp_path):
    out = tmp_path / "cli"
    result = CliRunner().invoke(cli, ["evaluate", "--model", "demo", "--data", "demo",
                                      "--profile", "quick", "--limit", str(LIMIT),
                                      "--executor", "inline", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert (out / "card.json").read_bytes() == (local / "card.json").read_bytes()
    assert "worst-case" in result.output


def test_report_on_a_card_folder_points_at_the_card_and_the_sub_runs_reports(local, tmp_path):
    """card.html is the evaluate run's page; segtk report names it and reports each sub-run."""
    local = Path(shutil.copytree(local, tmp_path / "card"))
    result = CliRunner().invoke(cli, ["report", str(local)])
    assert result.exit_code != 0
    assert "card.html" in result.output and "segtk report" in result.output, result.output
    sub = CliRunner().invoke(cli, ["report", str(local / "black-box")])
    assert sub.exit_code == 0, sub.output
    assert (local / "black-box" / "report.html").is_file()


def test_leaderboard_ranks_and_refuses_mixed_protocols_and_data(local, tmp_path):
    other = tmp_path / "other"
    shutil.copytree(local, other)
    card = _card(other)
    card["model"]["spec"] = "other-model"
    for entry in card["black_box"]:
        entry["miou"] = entry["miou"] + 1
    (other / "card.json").write_text(json.dumps(card))
    rows = leaderboard([local, other], tmp_path / "board")
    assert [r["model"] for r in rows] == ["other-model", "demo"]
    csv_lines = (tmp_path / "board" / "leaderboard.csv").read_text().splitlines()
    assert csv_lines[1].startswith("1,other-model,")
    assert 'href="../other/card.html"' in (tmp_path / "board" / "leaderboard.html").read_text()
    newer = dict(card, protocol=dict(card["protocol"], version="2.0"))
    (other / "card.json").write_text(json.dumps(newer))
    with pytest.raises(SegtkError, match="segtk-robustness 2.0 .*segtk-robustness 1.0"):
        leaderboard([local, other], tmp_path / "board2")
    elsewhere = dict(card, data=dict(card["data"], spec="camvid:x", sha256="0" * 64))
    (other / "card.json").write_text(json.dumps(elsewhere))
    with pytest.raises(SegtkError, match="camvid:x"):
        leaderboard([local, other], tmp_path / "board3")
    result = CliRunner().invoke(cli, ["leaderboard", str(local), str(other), "--out",
                                      str(tmp_path / "board4")])
    assert result.exit_code == 1 and "camvid:x" in result.output


def test_label_free_card_says_so(tmp_path):
    """Images without labels: every score against the clean prediction, no floor, no edits."""
    data = tmp_path / "unlabelled"
    demo = load_dataset("demo", limit=2)
    for item in demo:
        write_png(data / "images" / f"{item.name}.png", item.image)
    (data / "classes.txt").write_text("\n".join(demo.classes) + "\n")
    card = evaluate("demo", f"folder:{data}", profile="quick", executor="inline",
                    out=tmp_path / "card")
    assert card["label_free"] and card["data"]["scored_against"] == "prediction"
    assert card["clean"]["miou"] == 100.0
    assert not card["white_box"]["ran"] and "labels" in card["white_box"]["reason"]
    assert not card["edits"]["ran"] and "labels" in card["edits"]["reason"]
    assert all(set(e["members"]) == {"colour-blocks:reference=prediction",
                                     "signhunter:reference=prediction",
                                     "dla:reference=prediction"} for e in card["black_box"])
    page = (tmp_path / "card" / "card.html").read_text()
    assert "Label-free" in page and "against the model&#39;s clean prediction" in page


def test_cli_resume_reads_the_options_it_is_not_given(local, tmp_path):
    """`segtk evaluate --out OUT --resume` alone: model, data, limit and profile from run.json."""
    again = tmp_path / "again"
    shutil.copytree(local, again)
    (again / "card.json").unlink()
    result = CliRunner().invoke(cli, ["evaluate", "--out", str(again), "--resume",
                                      "--executor", "inline"])
    assert result.exit_code == 0, result.output
    assert (again / "card.json").read_bytes() == (local / "card.json").read_bytes()
    result = CliRunner().invoke(cli, ["evaluate", "--out", str(again), "--resume",
                                      "--profile", "standard"])
    assert result.exit_code == 1 and "protocol" in result.output


def test_editors_that_cannot_run_are_named_not_skipped_silently():
    assert editors_missing(("color", "size")) is None
    assert "nosuch" in (editors_missing(("color", "nosuch")) or "")


@pytest.mark.parametrize("command", ["evaluate", "leaderboard"])
def test_help_has_examples(command):
    result = CliRunner().invoke(cli, [command, "--help"])
    assert result.exit_code == 0 and "Example" in result.output


def test_card_is_bit_identical_after_a_kill_and_a_resume_over_ray(local, tmp_path):
    """The same card, byte for byte, when the rest of a killed run is sharded one image a task
    over Ray (the kill keeps a third of each sub-run's records: the resume's cost is the rest)."""
    ray = pytest.importorskip("ray")
    resumed = tmp_path / "ray"
    killed_copy(local, resumed)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        evaluate("demo", "demo", profile="quick", out=resumed, limit=LIMIT, resume=True,
                 executor="ray", chunk=1)
    finally:
        ray.shutdown()
    assert (resumed / "card.json").read_bytes() == (local / "card.json").read_bytes()
    assert (resumed / "card.html").read_bytes() == (local / "card.html").read_bytes()
