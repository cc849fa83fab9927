"""segtk train (jobs/train.py): real training steps on a small CNN, determinism, resume."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from segtk.core.augment import require_trainable, save_safetensors
from segtk.core.errors import DataError, ModelError, PluginError, SegtkError
from segtk.core.specs import load_segmenter
from segtk.jobs.train import TrainConfig, read_spec, train


@pytest.fixture(scope="module")
def random_demo(tmp_path_factory) -> str:
    """A randomly initialised demo network: training from scratch shows a clear loss drop."""
    from segtk_demo.model import DemoNet

    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("weights") / "random.safetensors"
    save_safetensors(path, DemoNet().state_dict())
    return f"demo:{path}"


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
    model = require_trainable(load_segmenter(spec), spec)
    assert_same(model.state_dict(), state(tmp_path / "run", 1))
    images = torch.rand(2, 3, 48, 64)
    assert model.predict(images).shape == (2, 48, 64)


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

    from segtk.core.data import write_png

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
