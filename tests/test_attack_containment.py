"""An attack plugin that misbehaves is named, and cannot change what is recorded: exceptions of
the attack's own code are told apart from the model's, and an attack writing to the oracle's
clean images (or labels, or ε-box) is refused with one line, its results void."""

from __future__ import annotations

import json
import os
import signal
import time
import types

import pytest
import torch
from click.testing import CliRunner

from segtk.cli import cli
from segtk.core import Attack, ModelError, hookimpl, load_dataset
from segtk.core import _plugins as plugins_module
from segtk.core._errors import AttackError
from segtk.core._plugins import reset_plugin_manager
from segtk.jobs.attack import attack_dataset
from segtk.storage.runs import RunDir, read_results
from segtk.testing import FakeEntryPoint, RecordingSegmenter, TinySegmenter, toy_batch
from segtk_dla import DLA


class Boom(Attack):
    """Queries the clean images, then fails in its own code."""

    name = "boom"

    def attack(self, oracle) -> None:
        oracle.query(oracle.clean)
        raise ZeroDivisionError("a bug in the attack's own step")


class Faulty(TinySegmenter):
    """A model that raises on its second call."""

    def predict(self, images):
        if self.calls >= 1:
            raise RuntimeError("CUDA fell over")
        return super().predict(images)


class Wrapping(Attack):
    """Catches the model's error and raises its own: still the model's failure."""

    name = "wrapping"

    def attack(self, oracle) -> None:
        for _ in range(3):
            try:
                oracle.query(oracle.clean)
            except Exception as exc:
                raise ValueError("query failed") from exc




@pytest.fixture
def installed(monkeypatch):
    """Install attack classes as if a distribution `segtk-NAME` 6.6.6 registered them."""
    real = list(plugins_module.entry_points())

    def install(*attacks: type[Attack]) -> None:
        fakes = [FakeEntryPoint(a.name, types.SimpleNamespace(
            register_attacks=hookimpl(lambda register, a=a: register(a))),
            types.SimpleNamespace(name=f"segtk-{a.name}", version="6.6.6")) for a in attacks]
        monkeypatch.setattr(plugins_module, "entry_points", lambda: real + fakes)
        reset_plugin_manager()

    monkeypatch.delenv("SEGTK_LOAD_PLUGINS", raising=False)
    yield install
    reset_plugin_manager()


def test_an_exception_in_the_attacks_code_names_the_attack_and_its_distribution(
        installed, tmp_path) -> None:
    installed(Boom)
    out = CliRunner().invoke(cli, ["attack", "--plugin", "boom", "--budget", "3", "--limit", "1",
                                   "--out", str(tmp_path / "r")])
    assert out.exit_code == 1 and "Traceback" not in out.output
    error = [line for line in out.output.splitlines() if line.startswith("Error:")]
    assert len(error) == 1
    assert "attack 'boom' from segtk-boom 6.6.6 raised ZeroDivisionError: a bug in the " \
           "attack's own step" in error[0]
    assert "the model" not in error[0] and "fix the model" not in out.output
    assert "not in the model" in out.output


def test_an_exception_in_the_model_names_the_model_not_the_attack(tmp_path, folder_dataset) -> None:
    data = load_dataset(f"folder:{folder_dataset}")
    run = RunDir(tmp_path / "r", {"budget": 4}, False, kind="attack")
    with pytest.raises(ModelError) as err:
        attack_dataset(DLA(budget=4), Faulty(), data, run, batch_size=1)
    assert err.value.message == "while attacking img0: the model raised RuntimeError: CUDA fell over"
    assert not isinstance(err.value, AttackError) and "fix the model" in str(err.value.hint)
    images, labels = toy_batch(1)
    with pytest.raises(ModelError, match="the model raised RuntimeError"):  # wrapped by the attack
        Wrapping(budget=3).run(Faulty(), images, labels)
    with pytest.raises(AttackError, match="^attack 'boom' raised ZeroDivisionError"):
        Boom(budget=3).run(TinySegmenter(), images, labels)


class Scribbler(Attack):
    """Writes to one of the oracle's tensors (`target`, `how`), then queries as if nothing
    happened: the bug of an attack doing `x = oracle.clean; x -= step`."""

    name = "scribbler"
    target, how = "clean", "torch"

    def attack(self, oracle) -> None:
        tensor = getattr(oracle, self.target)
        if self.how == "numpy":  # no version counter sees a write through numpy
            tensor.numpy()[...] = 0
        else:
            tensor.zero_()
        oracle.query(oracle.clean)
        oracle.query_each([0], [oracle.clean[:1] + oracle.eps_unit])


@pytest.mark.parametrize("target,how", [("clean", "torch"), ("clean", "numpy"),
                                        ("labels", "torch"), ("labels", "numpy")])
def test_an_attack_writing_to_the_oracles_tensors_is_refused(target, how) -> None:
    images, labels = toy_batch(2)
    given = images.clone(), labels.clone()
    attack = type("Scribbler", (Scribbler,), {"target": target, "how": how})(budget=4)
    with pytest.raises(AttackError, match=f"^attack 'scribbler' wrote to oracle.{target} in place"):
        attack.run(TinySegmenter(), images, labels)
    assert torch.equal(images, given[0]) and torch.equal(labels, given[1])  # put back


class BoxWriter(Attack):
    """Asks, through the ways in that project, for candidates far outside its ε-box."""

    name = "box-writer"

    def attack(self, oracle) -> None:
        far = [torch.stack([oracle.clean[i] + 0.5, oracle.clean[i] - 0.5]) for i in range(2)]
        oracle.query_each([0, 1], far)
        oracle.verified.score([oracle.verified.project(0, torch.ones_like(oracle.clean[0]))])


def test_the_ways_in_that_project_project_onto_the_oracles_own_box() -> None:
    images, labels = toy_batch(2)
    model = RecordingSegmenter()
    BoxWriter(budget=4, eps=8).run(model, images, labels)
    for batch, owners in zip(model.batches, ([0, 0, 1, 1], [0]), strict=True):
        assert float((batch - images[owners]).abs().max()) <= 8 / 255 + 1e-6


def test_the_job_refuses_it_and_records_no_mutated_clean_score(tmp_path, installed) -> None:
    installed(Scribbler)
    out = CliRunner().invoke(cli, ["attack", "--plugin", "scribbler", "--budget", "3", "--limit",
                                   "2", "--out", str(tmp_path / "r")])
    assert out.exit_code == 1 and "Traceback" not in out.output
    error = [line for line in out.output.splitlines() if line.startswith("Error:")]
    assert len(error) == 1 and "attack 'scribbler' from segtk-scribbler 6.6.6 wrote to " \
                               "oracle.clean in place" in error[0]
    assert not read_results(tmp_path / "r" / "results.jsonl")  # nothing recorded



# --- an attack that tries to end the run, or records nothing ------------------------------------


class Exits(Attack):
    """Queries its batch's clean images, then, from its `after`-th batch on, raises `raises`:
    a plugin calling sys.exit, or raising KeyboardInterrupt, as if it were the user."""

    name = "exits"
    raises: BaseException = SystemExit(0)
    after, batches = 0, 0

    def attack(self, oracle) -> None:
        oracle.query(oracle.clean)
        type(self).batches += 1
        if type(self).batches > self.after:
            raise self.raises


def exits(raises: BaseException, after: int = 0) -> type[Exits]:
    return type("Exits", (Exits,), {"raises": raises, "after": after, "batches": 0})


@pytest.mark.parametrize("raises,shown", [
    (SystemExit(0), "SystemExit: 0 (the plugin tried to end segtk)"),
    (SystemExit(), "SystemExit (the plugin tried to end segtk)"),
    (KeyboardInterrupt(), "KeyboardInterrupt"),
    (GeneratorExit("odd"), "GeneratorExit: odd"),
])
def test_an_attack_ending_the_process_is_the_attacks_failure(raises, shown) -> None:
    images, labels = toy_batch(2)
    given = images.clone()
    with pytest.raises(AttackError) as err:
        exits(raises)(budget=3).run(TinySegmenter(), images, labels)
    assert err.value.message == f"attack 'exits' raised {shown}"
    assert torch.equal(images, given)


class Waits(Attack):
    """Queries, then waits for the user's Ctrl-C (sent to the process here)."""

    name = "waits"

    def attack(self, oracle) -> None:
        oracle.query(oracle.clean)
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(10)  # the signal's handler raises KeyboardInterrupt here


def test_the_users_ctrl_c_during_an_attack_is_still_an_interrupt() -> None:
    # Python's own handler, as in a terminal: a background job (`cmd &`) starts with SIGINT
    # ignored, where no Ctrl-C can arrive at all.
    outer = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        before = signal.getsignal(signal.SIGINT)
        images, labels = toy_batch(1)
        started = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            Waits(budget=3).run(TinySegmenter(), images, labels)
        assert time.monotonic() - started < 5 and signal.getsignal(signal.SIGINT) is before
    finally:
        signal.signal(signal.SIGINT, outer)


@pytest.mark.parametrize("raises", [SystemExit(0), KeyboardInterrupt()])
def test_segtk_attack_names_the_plugin_exits_1_and_keeps_the_records_so_far(
        raises, installed, tmp_path) -> None:
    installed(exits(raises, after=1))
    out = CliRunner().invoke(cli, ["attack", "--plugin", "exits", "--budget", "3", "--limit", "3",
                                   "--batch-size", "1", "--out", str(tmp_path / "r")])
    assert out.exit_code == 1 and "Traceback" not in out.output
    error = [line for line in out.output.splitlines() if line.startswith("Error:")]
    assert len(error) == 1 and f"attack 'exits' from segtk-exits 6.6.6 raised " \
                               f"{type(raises).__name__}" in error[0]
    assert len(read_results(tmp_path / "r" / "results.jsonl")) == 1  # the first image's


def test_segtk_bench_attacks_names_the_plugin_exits_1_and_keeps_the_records_so_far(
        installed, tmp_path) -> None:
    installed(exits(SystemExit(0)))
    out = CliRunner().invoke(cli, ["bench", "attacks", "--attacks", "random,exits", "--budgets", "2",
                                   "--repeats", "1", "--limit", "2", "--executor", "inline",
                                   "--out", str(tmp_path / "b")])
    assert out.exit_code == 1 and "Traceback" not in out.output
    error = [line for line in out.output.splitlines() if line.startswith("Error:")]
    assert len(error) == 1 and "attack 'exits' from segtk-exits 6.6.6 raised SystemExit: 0" in error[0]
    kept = strict(tmp_path / "b" / "results.jsonl")
    assert kept and {r["attack"] for r in kept} == {"random"}


class Idle(Attack):
    """Makes no query at all (a legal, if useless, attack)."""

    name = "idle"

    def attack(self, oracle) -> None:
        pass


def strict(path) -> list[dict]:
    """The lines of a JSONL file, read as strict JSON (NaN and Infinity refused)."""
    def refuse(constant: str) -> None:
        raise ValueError(f"{path}: {constant} is not JSON")
    return [json.loads(line, parse_constant=refuse) for line in path.read_text().splitlines()]


def test_an_attack_without_a_query_records_strict_json(installed, tmp_path) -> None:
    installed(Idle)
    out = CliRunner().invoke(cli, ["attack", "--plugin", "idle", "--budget", "3", "--limit", "1",
                                   "--out", str(tmp_path / "r")])
    assert out.exit_code == 0, out.output
    (line,) = strict(tmp_path / "r" / "results.jsonl")
    assert line["attack_proxy"] is None and line["queries"] == 0 and line["history"] == []
    bench = CliRunner().invoke(cli, ["bench", "attacks", "--attacks", "idle", "--budgets", "2",
                                     "--repeats", "1", "--limit", "1", "--executor", "inline",
                                     "--out", str(tmp_path / "b")])
    assert bench.exit_code == 0, bench.output
    (record,) = strict(tmp_path / "b" / "results.jsonl")
    assert record["visibility"]["psnr"] is None  # an unchanged image: inf, which JSON lacks
    (row,) = [r for r in json.loads((tmp_path / "b" / "table.json").read_text())
              if r["attack"] == "idle"]
    assert row["psnr"] is None and row["changed_pct"] == 0
