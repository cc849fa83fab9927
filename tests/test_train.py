"""segtk train (jobs/train.py): real training steps on a small CNN, determinism, resume."""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from segtk.benchmarks import augment as augment_bench
from segtk.benchmarks.augment import AugmentBench
from segtk.core import (
    DataError,
    ModelError,
    PluginError,
    SegtkError,
    load_segmenter,
    save_safetensors,
)
from segtk.core._specs import resolve_spec
from segtk.jobs import train as train_job
from segtk.jobs.checkpoints import checkpoint_hashes
from segtk.jobs.train import TrainConfig, read_spec, require_trainable, train
from segtk.storage.provenance import spec_file_hashes


def config(model: str, **kw) -> TrainConfig:
    base = dict(model=model, data="demo", split=None, epochs=2, batch_size=4, lr=3e-3,
                crop=(64, 48), augment="cutmix", seed=0)
    return TrainConfig(**{**base, **kw})


def state(out: Path, epoch: int) -> dict[str, torch.Tensor]:
    return load_file(str(out / "checkpoints" / f"epoch-{epoch:04d}" / "state.safetensors"))


def assert_same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(a[key], b[key]), key


@pytest.mark.slow
def test_loss_decreases(random_demo, tmp_path) -> None:
    results = train(config(random_demo, epochs=4, augment="baseline"), tmp_path / "run")
    losses = [r.loss for r in results]
    assert [r.epoch for r in results] == [1, 2, 3, 4]
    assert losses[-1] < 0.85 * losses[0], losses


def test_two_runs_are_bit_identical(random_demo, tmp_path) -> None:
    a = train(config(random_demo), tmp_path / "a")
    b = train(config(random_demo), tmp_path / "b")
    assert [r.loss for r in a] == [r.loss for r in b]
    assert_same(state(tmp_path / "a", 2), state(tmp_path / "b", 2))


def test_seed_changes_the_run(random_demo, tmp_path) -> None:
    a = train(config(random_demo, epochs=1), tmp_path / "a")
    b = train(config(random_demo, epochs=1, seed=1), tmp_path / "b")
    assert a[0].loss != b[0].loss


def test_resume_equals_uninterrupted(random_demo, tmp_path) -> None:
    full = train(config(random_demo, epochs=3), tmp_path / "full")
    train(config(random_demo, epochs=1), tmp_path / "part")
    resumed = train(config(random_demo, epochs=3), tmp_path / "part", resume=True)
    assert [r.loss for r in resumed] == [r.loss for r in full]
    assert_same(state(tmp_path / "full", 3), state(tmp_path / "part", 3))


def test_resume_after_a_crash_mid_epoch(random_demo, tmp_path) -> None:
    full = train(config(random_demo), tmp_path / "full")

    def crash(epoch: int, step: int, steps: int, loss: float) -> None:
        if epoch == 2 and step == 1:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train(config(random_demo), tmp_path / "crash", on_step=crash)
    assert not (tmp_path / "crash" / "checkpoints" / "epoch-0002").exists()
    resumed = train(config(random_demo), tmp_path / "crash", resume=True)
    assert [r.loss for r in resumed] == [r.loss for r in full]
    assert_same(state(tmp_path / "full", 2), state(tmp_path / "crash", 2))


def test_written_spec_loads_the_trained_weights(random_demo, tmp_path) -> None:
    train(config(random_demo, epochs=1), tmp_path / "run")
    spec = read_spec(tmp_path / "run")
    assert spec.startswith("demo:") and spec.endswith(".safetensors")
    segmenter = load_segmenter(spec)
    model = require_trainable(segmenter, spec)
    assert_same(model.state_dict(), state(tmp_path / "run", 1))
    images = torch.rand(2, 3, 48, 64)
    assert segmenter.predict(images).shape == (2, 48, 64)


def test_existing_run_needs_resume_and_the_same_settings(random_demo, tmp_path) -> None:
    train(config(random_demo, epochs=1), tmp_path / "run")
    with pytest.raises(SegtkError, match="--resume"):
        train(config(random_demo, epochs=1), tmp_path / "run")
    with pytest.raises(SegtkError, match="other settings .*lr"):
        train(config(random_demo, epochs=2, lr=1e-2), tmp_path / "run", resume=True)


def test_bad_input_is_one_clear_error(random_demo, tmp_path) -> None:
    with pytest.raises(DataError, match="--crop 999x48 is larger"):
        train(config(random_demo, crop=(999, 48)), tmp_path / "a")
    with pytest.raises(PluginError, match="no augmenter plugin named 'nope'"):
        train(config(random_demo, augment="nope"), tmp_path / "b")
    with pytest.raises(PluginError, match="unknown parameter 'beta'"):
        train(config(random_demo, augment="cutmix:beta=1"), tmp_path / "c")
    with pytest.raises(SegtkError, match="--epochs"):
        train(config(random_demo, epochs=0), tmp_path / "d")
    with pytest.raises(ModelError, match="cannot be trained"):
        require_trainable(object(), "http://localhost:1")


def test_images_of_different_sizes_need_size_or_crop(random_demo, tmp_path) -> None:
    import numpy as np

    from segtk.core import write_png
    root = tmp_path / "data"
    (root / "classes.txt").parent.mkdir(parents=True)
    from segtk_demo.scenes import CLASSES

    (root / "classes.txt").write_text("\n".join(CLASSES))
    for name, (h, w) in {"a": (48, 64), "b": (40, 64)}.items():
        write_png(root / "images" / f"{name}.png", np.zeros((h, w, 3), np.uint8))
        write_png(root / "labels" / f"{name}.png", np.zeros((h, w), np.uint8))
    with pytest.raises(DataError, match="differ in size"):
        train(config(random_demo, data=f"folder:{root}", crop=None, batch_size=2), tmp_path / "a")
    train(config(random_demo, data=f"folder:{root}", crop=None, size=(32, 24), batch_size=2,
                 epochs=1), tmp_path / "b")


def test_augmenter_setup_errors_write_no_run_folder(random_demo, tmp_path) -> None:
    with pytest.raises(DataError, match="not found"):
        train(config(random_demo, augment=f"edits:dir={tmp_path / 'nope'}"), tmp_path / "run")
    assert not (tmp_path / "run").exists()


# --- model.spec, checkpoints and resume under faults (issue 21) ------------------------------


def kill_before_spec_of(monkeypatch, epoch: int) -> None:
    """Kill the run after epoch `epoch`'s record, before model.spec is written."""
    real = train_job.write_spec

    def killed(out: Path, spec: str) -> None:
        if f"epoch-{epoch:04d}" in spec:
            raise KeyboardInterrupt
        real(out, spec)

    monkeypatch.setattr(train_job, "write_spec", killed)


def test_a_kill_between_the_record_and_model_spec_resumes_to_the_last_epoch(
        random_demo, tmp_path, monkeypatch) -> None:
    out = tmp_path / "run"
    with monkeypatch.context() as patch:
        kill_before_spec_of(patch, 2)
        with pytest.raises(KeyboardInterrupt):
            train(config(random_demo), out)
    records = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in records] == [1, 2] and "epoch-0001" in read_spec(out)  # the fault
    train(config(random_demo), out, resume=True)
    assert read_spec(out) == resolve_spec(records[-1]["spec"], out)
    assert_same(require_trainable(load_segmenter(read_spec(out)), "").state_dict(), state(out, 2))


def test_bench_augment_after_that_kill_equals_an_uninterrupted_run(tmp_path, monkeypatch) -> None:
    # From the trained demo model: its epochs 1 and 2 score differently (a random start's do not).
    bench = AugmentBench(config("demo", augment="baseline", limit=4), ("baseline",),
                         ("weather",), eval_split=None, eval_limit=2, values={"weather": ["fog"]})
    full = augment_bench.run(bench, tmp_path / "full")
    with monkeypatch.context() as patch:
        kill_before_spec_of(patch, 2)
        with pytest.raises(KeyboardInterrupt):
            augment_bench.run(bench, tmp_path / "cut")
    resumed = augment_bench.run(bench, tmp_path / "cut", resume=True)
    assert augment_bench.table_rows(resumed) == augment_bench.table_rows(full)


@pytest.mark.parametrize("epochs", [1, 2])
def test_a_killed_row_left_out_of_a_resume_is_scored_at_its_last_epoch(
        tmp_path, monkeypatch, epochs) -> None:
    # Killed after the last epoch's record, before model.spec; resumed with another --augment
    # that leaves the row out: the bench reads that row from its records, not model.spec.
    bench = AugmentBench(config("demo", augment="baseline", limit=4, epochs=epochs),
                         ("baseline",), ("weather",), eval_split=None, eval_limit=2,
                         values={"weather": ["fog"]})
    full = augment_bench.run(bench, tmp_path / "full")
    with monkeypatch.context() as patch:
        kill_before_spec_of(patch, epochs)
        with pytest.raises(KeyboardInterrupt):
            augment_bench.run(bench, tmp_path / "cut")
    spec_file = tmp_path / "cut" / "train" / "baseline" / "model.spec"
    assert not spec_file.exists() if epochs == 1 else "epoch-0001" in spec_file.read_text()
    resumed = augment_bench.run(replace(bench, augments=("cutout",)), tmp_path / "cut",
                                resume=True)

    def baseline(result: dict) -> list:
        return next(row for row in augment_bench.table_rows(result) if row[0] == "baseline")

    assert baseline(resumed) == baseline(full)


def test_a_copied_run_folder_loads_its_own_weights(random_demo, tmp_path) -> None:
    train(config(random_demo, epochs=1), tmp_path / "a")
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    shutil.rmtree(tmp_path / "a")  # a spec still pointing there cannot load
    spec = read_spec(tmp_path / "b")
    assert str(tmp_path / "b") in spec
    for model in (spec, str(tmp_path / "b" / "model.spec")):  # the spec, or its file
        loaded = require_trainable(load_segmenter(model), model)
        assert_same(loaded.state_dict(), state(tmp_path / "b", 1))


def test_an_older_absolute_model_spec_is_read_as_it_is(random_demo, tmp_path) -> None:
    train(config(random_demo, epochs=1), tmp_path / "run")
    weights = tmp_path / "run" / "checkpoints" / "epoch-0001" / "model" / "model.safetensors"
    (tmp_path / "run" / "model.spec").write_text(f"demo:{weights}\n")
    assert read_spec(tmp_path / "run") == f"demo:{weights}"
    assert_same(require_trainable(load_segmenter(str(tmp_path / "run" / "model.spec")), "")
                .state_dict(), state(tmp_path / "run", 1))


def flip_a_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[-3] ^= 0x10  # in the tensors' data (not a header): the file still loads
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("name", ["state.safetensors", "optimizer.pt", "model/model.safetensors"])
def test_a_bit_flipped_checkpoint_is_refused_on_resume(random_demo, tmp_path, name) -> None:
    out = tmp_path / "run"
    train(config(random_demo, epochs=1), out)
    flip_a_byte(out / "checkpoints" / "epoch-0001" / name)
    with pytest.raises(SegtkError, match=f"epoch-0001/{name} does not match the sha256") as exc:
        train(config(random_demo), out, resume=True)
    assert f"delete {out / 'checkpoints' / 'epoch-0001'}" in str(exc.value.hint)


def test_a_checkpoint_of_nan_weights_is_named(random_demo, tmp_path) -> None:
    out = tmp_path / "run"
    train(config(random_demo, epochs=1), out)
    folder = out / "checkpoints" / "epoch-0001"
    weights = state(out, 1)
    key = next(k for k, v in weights.items() if v.is_floating_point())
    weights[key] = torch.full_like(weights[key], float("nan"))
    save_safetensors(folder / "state.safetensors", weights)
    done = json.loads((folder / "checkpoint.json").read_text())
    (folder / "checkpoint.json").write_text(json.dumps({**done, "sha256": checkpoint_hashes(folder)}))
    with pytest.raises(SegtkError, match=f"{folder / 'state.safetensors'} holds NaN or infinite"):
        train(config(random_demo), out, resume=True)


def test_the_nan_loss_hint_names_the_checkpoint(random_demo, tmp_path, monkeypatch) -> None:
    out = tmp_path / "run"
    train(config(random_demo, epochs=1), out)
    real = train_job.segmentation_loss
    calls = []

    def nan_at_the_second_step(*args):
        calls.append(1)
        return real(*args) * (float("nan") if len(calls) == 2 else 1.0)

    monkeypatch.setattr(train_job, "segmentation_loss", nan_at_the_second_step)
    with pytest.raises(ModelError, match="epoch 2 step 2: the loss is nan") as exc:
        train(config(random_demo), out, resume=True)
    assert str(out / "checkpoints" / "epoch-0001") in str(exc.value.hint)
    assert "--lr" in str(exc.value.hint)


def test_resume_with_fewer_epochs_than_done_is_refused(random_demo, tmp_path) -> None:
    out = tmp_path / "run"
    train(config(random_demo), out)
    before = (out / "run.json").read_text()
    with pytest.raises(SegtkError, match="has 2 epochs done, more than --epochs 1") as exc:
        train(config(random_demo, epochs=1), out, resume=True)
    assert "--epochs 2" in str(exc.value.hint)
    assert (out / "run.json").read_text() == before


def test_nan_weights_are_never_checkpointed(random_demo, tmp_path, monkeypatch) -> None:
    real = torch.optim.AdamW.step

    def poisoned(self, *args, **kwargs):  # a step that leaves NaN weights, the loss still finite
        out = real(self, *args, **kwargs)
        with torch.no_grad():
            self.param_groups[0]["params"][0].fill_(float("nan"))
        return out

    monkeypatch.setattr(torch.optim.AdamW, "step", poisoned)
    with pytest.raises(ModelError, match="epoch 1: the weights became NaN or infinite") as exc:
        train(config(random_demo, epochs=1, limit=4, batch_size=4), tmp_path / "run")
    assert "--lr" in str(exc.value.hint) and random_demo in str(exc.value.hint)
    assert not (tmp_path / "run" / "checkpoints" / "epoch-0001").exists()


def test_a_spec_file_s_weights_are_hashed_for_run_json(random_demo, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    train(config(random_demo, epochs=1), tmp_path / "run")
    weights = tmp_path / "run" / "checkpoints" / "epoch-0001" / "model" / "model.safetensors"
    hashes = spec_file_hashes([str(tmp_path / "run" / "model.spec")])
    assert hashes[str(weights)] == hashlib.sha256(weights.read_bytes()).hexdigest()
