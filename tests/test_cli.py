"""The CLI end to end (in-process): help, predict, attack, resume, errors."""

from __future__ import annotations

import json
import types

import pytest
from click.testing import CliRunner

from segtk.cli import cli
from segtk.core import SegmenterPlugin, hookimpl, registry
from segtk.core._plugins import get_plugin_manager, reset_plugin_manager
from segtk.testing import TinySegmenter, shared


@pytest.fixture
def tiny_model():
    """Registers `--model tiny` through the plugin manager, like any plugin object."""
    reset_plugin_manager()
    plugin = types.SimpleNamespace(
        register_models=hookimpl(lambda register: register(
            SegmenterPlugin("tiny", lambda arg: TinySegmenter(), "tiny", "--model tiny")))
    )
    get_plugin_manager().register(plugin, name="tiny-test")
    registry.reset()
    yield "tiny"
    reset_plugin_manager()


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


@pytest.mark.parametrize("command", [[], ["attack"], ["predict"], ["plugins"], ["models"],
                                     ["datasets"], ["bench"], ["bench", "attacks"],
                                     ["models", "convert"]])
def test_every_command_has_help_with_examples(command) -> None:
    result = invoke(*command, "--help")
    assert result.exit_code == 0
    assert "Example" in result.output


def test_predict_writes_labels_and_prints_miou(tmp_path, folder_dataset, tiny_model) -> None:
    result = invoke("predict", "--model", "tiny", "--data", f"folder:{folder_dataset}",
                    "--out", str(tmp_path / "p"))
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "p" / "summary.json").read_text())
    assert summary["images"] == 3 and summary["miou"] == 1.0  # labels are the model's own output
    assert (tmp_path / "p" / "labels" / "img0.png").exists()


def test_attack_then_resume(tmp_path, folder_dataset, tiny_model) -> None:
    args = ["attack", "--plugin", "dla", "--model", "tiny", "--data", f"folder:{folder_dataset}",
            "--budget", "6", "--out", str(tmp_path / "a"), "--batch-size", "2"]
    first = invoke(*args)
    assert first.exit_code == 0, first.output
    assert "dataset mIoU" in first.output
    run = json.loads((tmp_path / "a" / "run.json").read_text())
    assert run["config"]["params"]["budget"] == 6 and "torch" in run["versions"]
    again = invoke(*args)
    assert again.exit_code == 1 and "already holds results" in again.output
    resumed = invoke(*args, "--resume")
    assert resumed.exit_code == 0
    assert resumed.output.split("dataset mIoU")[1] == first.output.split("dataset mIoU")[1]


@pytest.mark.parametrize("args,message", [
    (["attack", "--plugin", "nope"], "no attack plugin named 'nope'"),
    (["attack", "--plugin", "dla", "--model", "tiny", "--data", "folder:/no/such/dir"], "/no/such/dir"),
    (["attack", "--plugin", "dla", "--model", "zzz:1"], "no model plugin named 'zzz'"),
    (["attack", "--plugin", "dla", "--param", "bogus=1"], "unknown parameter 'bogus'"),
])
def test_errors_are_one_line_with_hint(args, message, tiny_model) -> None:
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 1
    assert message in result.output
    assert "Traceback" not in result.output and "hint:" in result.output


def test_bench_resume_adds_an_attack_and_table_only_runs_nothing(tmp_path, folder_dataset, tiny_model) -> None:
    out = tmp_path / "b"
    args = ["bench", "attacks", "--model", "tiny", "--data", f"folder:{folder_dataset}", "--budgets", "3,5",
            "--repeats", "1", "--executor", "inline", "--out", str(out)]
    assert invoke(*args, "--attacks", "random").exit_code == 0
    first = (out / "results.jsonl").read_text().splitlines()
    grown = invoke(*args, "--attacks", "random,signhunter", "--resume")
    assert grown.exit_code == 0, grown.output
    lines = (out / "results.jsonl").read_text().splitlines()
    assert lines[: len(first)] == first and len(lines) == 2 * len(first)  # random kept, not rerun
    assert {r["attack"] for r in json.loads((out / "table.json").read_text())} == {"clean", "random", "signhunter"}
    other_seed = invoke(*args, "--attacks", "random", "--seed", "4", "--resume")  # (--eps may add ε values)
    assert other_seed.exit_code == 1 and "holds a run with --seed 0, not --seed 4" in other_seed.output
    shown = invoke(*args, "--attacks", "signhunter", "--table-only")
    assert shown.exit_code == 0 and "signhunter" in shown.output
    assert (out / "results.jsonl").read_text().splitlines() == lines  # nothing was run
    empty = invoke(*args[:-1], str(tmp_path / "none"), "--attacks", "random", "--table-only")
    assert empty.exit_code == 1 and "holds no run to read" in empty.output


@pytest.fixture
def five_class_dataset(folder_dataset):
    """The tiny model's images and labels, but a class list one longer than the model's."""
    (folder_dataset / "classes.txt").write_text("\n".join(TinySegmenter().classes + ["extra"]) + "\n")
    return folder_dataset


@pytest.mark.parametrize("command", [["predict"], ["attack", "--plugin", "dla", "--budget", "3"]])
def test_model_classes_must_match_the_datasets(command, tmp_path, five_class_dataset, tiny_model) -> None:
    out = tmp_path / "out"
    result = CliRunner().invoke(cli, [*command, "--model", "tiny", "--data", f"folder:{five_class_dataset}",
                                      "--out", str(out)])
    assert result.exit_code == 1, result.output
    assert "predicts 4 classes but dataset folder:data has 5" in result.output
    assert "hint:" in result.output and "Traceback" not in result.output
    assert not out.exists()  # refused before any run directory or output is written


@pytest.mark.parametrize("command", [["predict"], ["attack", "--plugin", "dla"]])
def test_camvid_model_on_demo_data_is_refused(command) -> None:
    weights = shared("models/espnet_camvid.safetensors")
    result = CliRunner().invoke(cli, [*command, "--model", f"espnet:camvid={weights}", "--data", "demo"])
    assert result.exit_code == 1 and "predicts 11 classes but dataset demo has 8" in result.output
