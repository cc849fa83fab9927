"""`--device` on every command and `device=` in Python: cpu by default, auto takes CUDA where
present, a device the machine lacks is one line (exit 1, nothing written), and run.json
records the device so that --resume reads it back (runs made before it resume as cpu).
The tests at the end need a CUDA device and skip without one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

import segtk
from segtk.cli import cli, pm_commands
from segtk.core import Segmenter, SegtkError
from segtk.core._device import resolve_device
from segtk_demo.model import DemoSegmenter

CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
MISSING = "cuda:99"  # no machine has it: refused with or without CUDA


def invoke(*args: str):
    pm_commands()  # `segtk serve` comes from the http plugin
    return CliRunner().invoke(cli, list(args))


def config(out: Path) -> dict:
    return json.loads((out / "run.json").read_text())["config"]


def one_line(text: str) -> str:
    return " ".join(text.split())


# --- resolving a device ----------------------------------------------------------------------


def test_cpu_is_the_default_and_auto_takes_cuda_only_where_present(monkeypatch) -> None:
    assert resolve_device(None) == resolve_device("cpu") == resolve_device("CPU") == torch.device("cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto") == torch.device("cpu")
    with pytest.raises(SegtkError, match="CUDA is not available") as caught:
        resolve_device("cuda")
    assert "--device cpu" in (caught.value.hint or "")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 1)
    assert resolve_device("auto") == resolve_device("cuda") == torch.device("cuda", 1)
    assert resolve_device("cuda:0") == torch.device("cuda", 0)
    with pytest.raises(SegtkError, match=r"has 2 CUDA devices \(cuda:0 to cuda:1\)"):
        resolve_device("cuda:2")


@pytest.mark.parametrize("name", ["gpu", "mps", "cuda:x", ""])
def test_an_unknown_device_names_the_choices(name: str) -> None:
    with pytest.raises(SegtkError) as caught:
        resolve_device(name)
    assert repr(name) in caught.value.message and "auto" in (caught.value.hint or "")


class TwoPlaces(Segmenter):
    """A model with a module and a tensor of its own, to see `to_device` move both."""

    classes = ["a", "b"]

    def __init__(self) -> None:
        self.net = torch.nn.Conv2d(3, 2, 1)
        self.mean = torch.zeros(3)
        self.label = "not a tensor"

    def predict(self, images: torch.Tensor) -> torch.Tensor:
        return self.net(images - self.mean.view(1, 3, 1, 1)).argmax(1)


def test_to_device_moves_every_module_and_tensor_of_a_model() -> None:
    model = TwoPlaces()
    model.to_device(torch.device("meta"))  # a device every machine has, without memory
    assert model.device == torch.device("meta")
    assert all(p.device.type == "meta" for p in model.net.parameters())
    assert model.mean.device.type == "meta" and model.label == "not a tensor"


# --- the commands ------------------------------------------------------------------------------

COMMANDS = {  # each command with --device, as a new user would run it (tiny sizes)
    "attack": ["attack", "--plugin", "random", "--limit", "1", "--budget", "2"],
    "bench attacks": ["bench", "attacks", "--attacks", "random", "--budgets", "2", "--repeats",
                      "1", "--limit", "1", "--executor", "inline"],
    "edit": ["edit", "--plugin", "color", "--values", "red", "--limit", "1", "--sheet-rows", "0"],
    "bench edits": ["bench", "edits", "--attributes", "color", "--values", "color=red",
                    "--limit", "2", "--executor", "inline"],
    "train": ["train", "--model", "demo", "--data", "demo", "--limit", "2", "--batch-size", "2",
              "--crop", "64x48"],
    "bench augment": ["bench", "augment", "--model", "demo", "--data", "demo", "--limit", "2",
                      "--batch-size", "2", "--crop", "64x48", "--augment", "baseline",
                      "--attributes", "color", "--values", "color=red", "--eval-limit", "2"],
    "predict": ["predict", "--limit", "1"],
    "serve": ["serve", "--port", "0"],
}
WITH_OUT = [name for name in COMMANDS if name not in ("predict", "serve")]


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_missing_device_is_one_line_and_writes_nothing(tmp_path: Path, command: str) -> None:
    out = tmp_path / "out"
    args = COMMANDS[command] + ["--device", MISSING] + (["--out", str(out)] if command in WITH_OUT else [])
    done = invoke(*args)
    assert done.exit_code == 1
    assert "Traceback" not in done.output
    lines = done.output.strip().splitlines()
    assert lines[0].startswith(f"Error: device '{MISSING}': ") and lines[1].startswith("hint: ")
    assert len(lines) == 2
    assert not out.exists()


@pytest.mark.parametrize("command", WITH_OUT)
def test_every_run_records_its_device(tmp_path: Path, command: str) -> None:
    out = tmp_path / "out"
    done = invoke(*COMMANDS[command], "--device", "auto", "--out", str(out))
    assert done.exit_code == 0, done.output
    assert config(out)["device"] == str(resolve_device("auto"))  # cpu on a machine without CUDA


def test_resume_reads_the_device_and_refuses_another(tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert invoke(*COMMANDS["attack"], "--device", "cpu", "--out", str(out)).exit_code == 0
    done = invoke("attack", "--out", str(out), "--resume", "--limit", "2")
    assert done.exit_code == 0, done.output
    assert config(out)["device"] == "cpu" and len((out / "results.jsonl").read_text().splitlines()) == 2
    done = invoke("attack", "--out", str(out), "--resume", "--limit", "3", "--device", MISSING)
    assert done.exit_code == 1
    assert f"holds a run with --device cpu, not --device {MISSING}" in one_line(done.output)
    assert len((out / "results.jsonl").read_text().splitlines()) == 2


def test_a_run_made_before_devices_resumes_on_cpu(tmp_path: Path) -> None:
    """A run.json without a device (every run before --device) is a cpu run."""
    out = tmp_path / "old"
    assert invoke(*COMMANDS["attack"], "--out", str(out)).exit_code == 0
    record = json.loads((out / "run.json").read_text())
    del record["config"]["device"]
    (out / "run.json").write_text(json.dumps(record))
    done = invoke("attack", "--out", str(out), "--resume", "--limit", "2")
    assert done.exit_code == 0, done.output
    assert config(out)["device"] == "cpu"


# --- Python --------------------------------------------------------------------------------------


def test_python_takes_device_and_records_it(tmp_path: Path) -> None:
    with pytest.raises(SegtkError, match=f"device '{MISSING}'"):
        segtk.load_model("demo", device=MISSING)
    with pytest.raises(SegtkError, match=f"device '{MISSING}'"):
        segtk.attack("demo", "demo", "random", budget=2, limit=1, out=tmp_path / "no", device=MISSING)
    assert not (tmp_path / "no").exists()
    model = segtk.load_model("demo", device="auto")
    assert model.device == resolve_device("auto")
    segtk.attack(model, "demo", "random", budget=2, limit=1, out=tmp_path / "run")
    assert config(tmp_path / "run")["device"] == str(resolve_device("auto"))


# --- on a GPU ------------------------------------------------------------------------------------


@CUDA
def test_an_attack_runs_on_cuda(tmp_path: Path) -> None:
    model = segtk.load_model("demo", device="cuda")
    assert isinstance(model, DemoSegmenter)
    assert all(p.device.type == "cuda" for p in model.net.parameters())
    result = segtk.attack(model, "demo", "dla", budget=10, limit=2, out=tmp_path / "run")
    assert config(tmp_path / "run")["device"] == str(resolve_device("cuda"))
    assert [r["queries"] for r in result.records] == [10, 10]
    assert all(r["linf"] <= 8 for r in result.records)
    on_cpu = segtk.attack("demo", "demo", "dla", budget=10, limit=2)
    assert abs(result.clean_miou - on_cpu.clean_miou) < 1  # % : the same model, another device


@CUDA
def test_benchmarks_and_training_run_on_cuda(tmp_path: Path) -> None:
    for command in ("bench attacks", "train"):
        out = tmp_path / command.replace(" ", "-")
        done = invoke(*COMMANDS[command], "--device", "cuda", "--out", str(out))
        assert done.exit_code == 0, done.output
        assert config(out)["device"] == str(resolve_device("cuda"))
    done = invoke("predict", "--limit", "2", "--device", "cuda", "--json", "--quiet")
    assert done.exit_code == 0, done.output
    on_cpu = invoke("predict", "--limit", "2", "--json", "--quiet")
    assert abs(json.loads(done.output)["miou"] - json.loads(on_cpu.output)["miou"]) < 0.01
