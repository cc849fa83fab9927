"""--resume and the model files: run.json records each one's sha256, and a resume whose weights
changed since (retrained at the same path, a `model.spec` now pointing to a later epoch) is
refused in one line, before run.json or the records change: its records would mix two models.
And --resume on a folder holding no run is refused, naming the folder."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from segtk.cli import cli
from segtk.core import save_safetensors
from segtk.storage import layout
from segtk.storage.provenance import spec_file_hashes, weights_change

ATTACK = ["attack", "--plugin", "random", "--budget", "2", "--limit", "1"]
BENCH = ["bench", "attacks", "--attacks", "random", "--budgets", "2", "--repeats", "1",
         "--limit", "1", "--executor", "inline"]
TRAIN = ["train", "--model", "demo", "--data", "demo", "--limit", "2", "--batch-size", "2",
         "--crop", "64x48", "--augment", "baseline"]


def segtk(*args: str):
    return CliRunner().invoke(cli, list(args))


def ok(*args: str):
    result = segtk(*args)
    assert result.exit_code == 0, result.output
    return result


def refused(result, *words: str, hint: str = "another --out") -> None:
    """A refusal: exit 1, no traceback, one `Error:` line holding every word, a hint saying
    the way out."""
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    error = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert len(error) == 1 and all(w in error[0] for w in words), result.output
    assert "hint: " in result.output and hint in result.output, result.output


def demo_weights(path: Path, seed: int) -> str:
    """A demo network's weights (initialised with `seed`) saved at `path`; its spec."""
    from segtk_demo.model import DemoNet

    torch.manual_seed(seed)
    save_safetensors(path, DemoNet().state_dict())
    return f"demo:{path}"


def untouched(out: Path) -> tuple[bytes, bytes]:
    return (out / layout.RUN).read_bytes(), (out / layout.RESULTS).read_bytes()


def recorded_weights(out: Path) -> dict[str, str]:
    return json.loads((out / layout.RUN).read_text())["weights"]


def sha256_of(spec: str) -> str:
    (digest,) = spec_file_hashes([spec]).values()
    return digest


@pytest.fixture(autouse=True)
def own_hash_cache(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


@pytest.mark.parametrize("command", [ATTACK, BENCH], ids=["attack", "bench-attacks"])
def test_weights_retrained_at_the_same_path_are_refused_on_resume(command, tmp_path) -> None:
    pytest.importorskip("segtk_demo")
    weights = tmp_path / "w.safetensors"
    spec = demo_weights(weights, seed=0)
    out = tmp_path / "run"
    ok(*command, "--model", spec, "--out", str(out))
    then = recorded_weights(out)[str(weights)]
    before = untouched(out)
    demo_weights(weights, seed=1)  # retrained at the same path
    now = sha256_of(spec)
    assert now != then
    refused(segtk(*command, "--model", spec, "--out", str(out), "--resume", "--limit", "2"),
            str(out), str(weights), then[:12], now[:12], hint="restore the weights")
    assert untouched(out) == before  # nothing appended, the recorded hashes kept
    demo_weights(weights, seed=0)  # the weights restored: the run goes on
    ok(*command, "--model", spec, "--out", str(out), "--resume", "--limit", "2")


def test_a_model_spec_followed_to_a_later_epoch_is_refused(tmp_path) -> None:
    pytest.importorskip("segtk_demo")
    trained, out = tmp_path / "t", tmp_path / "a"
    ok(*TRAIN, "--epochs", "1", "--out", str(trained))
    spec = str(trained / layout.MODEL_SPEC)
    ok(*ATTACK, "--model", spec, "--out", str(out))
    ok("train", "--out", str(trained), "--resume")  # the same epochs: model.spec names the same
    ok("attack", "--out", str(out), "--resume", "--limit", "2")
    before = untouched(out)
    ok("train", "--out", str(trained), "--resume", "--epochs", "2")  # model.spec moves on
    refused(segtk("attack", "--out", str(out), "--resume", "--limit", "3"),
            str(out), spec, "epoch-0002", "epoch-0001", "sha256")
    assert untouched(out) == before


def test_bench_edits_refuses_retrained_weights_too(tmp_path) -> None:
    pytest.importorskip("segtk_demo")
    weights = tmp_path / "w.safetensors"
    spec = demo_weights(weights, seed=0)
    out = tmp_path / "b"
    ok("bench", "edits", "--models", spec, "--attributes", "color", "--values", "color=red",
       "--limit", "1", "--executor", "inline", "--out", str(out))
    before = untouched(out)
    demo_weights(weights, seed=1)
    refused(segtk("bench", "edits", "--out", str(out), "--resume"), str(weights), "sha256")
    assert untouched(out) == before


def test_weights_change_compares_weights_not_the_spec_files_text(tmp_path) -> None:
    first, second = tmp_path / "e1.safetensors", tmp_path / "e2.safetensors"
    demo_weights(first, seed=0)
    demo_weights(second, seed=1)
    spec_file = tmp_path / "model.spec"
    spec_file.write_text(f"demo:{first}\n")
    recorded = spec_file_hashes([str(spec_file)])
    spec_file.write_text("demo:./e1.safetensors\n")  # other text, the same weights
    assert weights_change(recorded, [str(spec_file)]) is None
    spec_file.write_text("demo:./e2.safetensors\n")
    change = weights_change(recorded, [str(spec_file)])
    assert change is not None and str(second) in change and str(first) in change
    shutil.copy(second, first)  # the recorded file itself rewritten
    change = weights_change(recorded, [f"demo:{first}"])
    assert change is not None and change.startswith(str(first))
    assert weights_change({}, [f"demo:{first}"]) is None  # a run.json without hashes


# --- --resume without a run -----------------------------------------------------------------

NO_RUN = [
    ["attack", "--plugin", "random"],
    ["bench", "attacks"],
    ["bench", "attacks", "--table-only"],
    ["edit", "--plugin", "color"],
    ["bench", "edits"],
    ["train", "--model", "demo", "--data", "demo"],
    ["bench", "augment"],
]


@pytest.mark.parametrize("command", NO_RUN, ids=lambda c: " ".join(c))
@pytest.mark.parametrize("where", ["missing", "empty", "mistyped"])
def test_resume_on_a_folder_without_a_run_is_refused_naming_it(command, where, tmp_path) -> None:
    out = tmp_path / "run"
    if where == "empty":
        out.mkdir()
    if where == "mistyped":  # a run beside it, the folder typed one letter off
        (tmp_path / "runs").mkdir()
        (tmp_path / "runs" / layout.RUN).write_text("{}")
    flags = [] if "--table-only" in command else ["--resume"]
    refused(segtk(*command, "--out", str(out), *flags), str(out), "holds no run",
            hint="check --out")
    assert sorted(p.name for p in tmp_path.rglob("*") if p.name != "cache") \
        == sorted({"missing": [], "empty": ["run"], "mistyped": ["runs", layout.RUN]}[where])
