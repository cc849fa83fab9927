"""`segtk train` and `segtk bench augment` from the command line: help, a real run, errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from segtk.cli import cli
from segtk.jobs.train import read_spec


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args))



@pytest.mark.parametrize("command", [["train"], ["bench", "augment"]])
def test_help_has_examples(command) -> None:
    result = invoke(*command, "--help")
    assert result.exit_code == 0
    assert "Examples:" in result.output and "segtk " + " ".join(command) in result.output


def test_train_writes_a_spec_that_predict_accepts(random_demo, tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = invoke("train", "--model", random_demo, "--data", "demo", "--split", "",
                    "--augment", "cutmix:alpha=1,p=1", "--epochs", "2", "--batch-size", "4",
                    "--crop", "64x48", "--lr", "3e-3", "--out", str(out))
    assert result.exit_code == 0, result.output
    spec = read_spec(out)
    assert f"model: {spec}" in result.output.replace("\n", "")
    lines = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert [x["epoch"] for x in lines] == [1, 2]
    for model in (spec, str(out / "model.spec")):  # the spec, or the file holding it
        predicted = invoke("predict", "--model", model, "--data", "demo")
        assert predicted.exit_code == 0, predicted.output
    again = invoke("train", "--model", random_demo, "--data", "demo", "--split", "",
                   "--augment", "cutmix:alpha=1,p=1", "--epochs", "3", "--batch-size", "4",
                   "--crop", "64x48", "--lr", "3e-3", "--out", str(out), "--resume")
    assert again.exit_code == 0, again.output
    assert len((out / "results.jsonl").read_text().splitlines()) == 3


@pytest.mark.parametrize(("args", "message"), [
    (["--crop", "64"], "--crop '64' is not WIDTHxHEIGHT"),
    (["--augment", "mixup"], "no augmenter plugin named 'mixup'"),
    (["--augment", "cutout:label=zero"], "label=keep"),
    (["--crop", "999x48"], "--crop 999x48 is larger than a training image"),
    (["--data", "folder:/nonexistent"], "dataset folder not found"),
])
def test_bad_input_is_one_line_and_nonzero(random_demo, tmp_path: Path, args, message) -> None:
    base = {"--model": random_demo, "--data": "demo", "--split": "", "--crop": "64x48",
            "--out": str(tmp_path / "run")}
    for key, value in zip(args[::2], args[1::2]):
        base[key] = value
    result = invoke("train", *[x for kv in base.items() for x in kv])
    assert result.exit_code != 0
    assert message in result.output
    assert "Traceback" not in result.output


def test_untrainable_model_is_refused(tmp_path: Path) -> None:
    from segtk.core import ModelError
    from segtk.jobs.train import require_trainable
    from segtk.testing import TinySegmenter

    with pytest.raises(ModelError, match="cannot be trained.*trainable model plugins"):
        require_trainable(TinySegmenter(), "tiny")


@pytest.mark.slow
def test_bench_augment_prints_table_iv(random_demo, tmp_path: Path) -> None:
    out = tmp_path / "bench"
    args = ["bench", "augment", "--model", random_demo, "--data", "demo", "--split", "",
            "--eval-split", "", "--eval-limit", "3", "--augment", "baseline,cutmix",
            "--attributes", "weather", "--values", "weather=fog", "--crop", "64x48",
            "--batch-size", "4", "--lr", "3e-3", "--out", str(out)]
    result = invoke(*args)
    assert result.exit_code == 0, result.output
    for word in ("augmentation", "original", "weather", "mR appearance", "start", "baseline",
                 "cutmix"):
        assert word in result.output
    table = json.loads((out / "table.json").read_text())
    assert [r["augmentation"] for r in table["rows"]] == ["start", "baseline", "cutmix"]
    for row in table["rows"]:
        ref, edited = row["miou"]["original"], row["miou"]["weather"]
        assert row["mr_appearance"] == pytest.approx(edited / ref)
    assert (out / "miou.png").stat().st_size > 1000
    assert (out / "table.csv").read_text().startswith("augmentation,original,weather,mR_appearance")
    assert invoke(*args).exit_code != 0  # existing results need --resume
    more = invoke(*[a if a != "baseline,cutmix" else "baseline,cutmix,augmix" for a in args],
                  "--resume")
    assert more.exit_code == 0, more.output
    table = json.loads((out / "table.json").read_text())
    assert [r["augmentation"] for r in table["rows"]] == ["start", "baseline", "cutmix", "augmix"]


def test_resume_refusals_are_one_line(random_demo, tmp_path: Path) -> None:
    out = tmp_path / "run"
    args = ["train", "--model", random_demo, "--data", "demo", "--split", "", "--limit", "4",
            "--batch-size", "4", "--crop", "64x48", "--out", str(out)]
    assert invoke(*args, "--epochs", "2").exit_code == 0
    fewer = invoke(*args, "--epochs", "1", "--resume")
    assert fewer.exit_code != 0 and "Traceback" not in fewer.output
    assert "has 2 epochs done, more than --epochs 1" in fewer.output
    state = out / "checkpoints" / "epoch-0002" / "state.safetensors"
    data = bytearray(state.read_bytes())
    data[-1] ^= 1
    state.write_bytes(bytes(data))
    flipped = invoke(*args, "--epochs", "3", "--resume")
    assert flipped.exit_code != 0 and "Traceback" not in flipped.output
    assert "does not match the sha256" in flipped.output and "epoch-0002" in flipped.output
