"""The standard training pipeline (random rescale, crop, flip) and the poly schedule of
`segtk train`: labels stay under their pixels, the learning rate follows MMSegmentation's
PolyLR step by step, a resumed run is bit-identical, the defaults train as before."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from segtk.cli import cli
from segtk.core import SegtkError
from segtk.jobs.train import TrainConfig, train
from segtk.jobs.train_samples import batch_of, pipeline, random_crop

IGNORE = 255
# One colour per class, none of them black (the image's padding) or a blend of two others.
PALETTE = torch.tensor([[200, 30, 30], [30, 200, 30], [30, 30, 200], [220, 220, 40]],
                       dtype=torch.uint8)


def painted(height: int = 60, width: int = 80, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """(image uint8 [3,H,W], label int64 [H,W]): blocks of 10x10 pixels, each a class drawn at
    random, the image showing each pixel's class colour (so any pixel moved without its label,
    or a label without its pixel, shows another colour than its label's)."""
    g = torch.Generator().manual_seed(seed)
    blocks = torch.randint(0, len(PALETTE), (height // 10, width // 10), generator=g)
    label = blocks.repeat_interleave(10, 0).repeat_interleave(10, 1)
    return PALETTE[label].permute(2, 0, 1).contiguous(), label


def nearest_class(images: torch.Tensor) -> torch.Tensor:
    """The class whose colour is closest to each pixel of float images [B,3,H,W] in [0,1]."""
    pixels = (images * 255).permute(0, 2, 3, 1)[..., None, :]
    return (pixels - PALETTE.float()).abs().sum(-1).argmin(-1)


def config(**kw) -> TrainConfig:
    base = dict(model="demo", data="demo", split=None, crop=(48, 40), scale=(0.5, 2.0),
                flip=True)
    return TrainConfig(**{**base, **kw})


def test_labels_stay_under_their_pixels_after_scale_crop_and_flip() -> None:
    items = [painted(seed=i) for i in range(4)]
    padded = mismatched = labelled = 0
    for step in range(12):
        generator = torch.Generator().manual_seed(step)
        images, labels = batch_of(items, [0, 1, 2, 3], config(), IGNORE, generator)
        assert images.shape == (4, 3, 40, 48) and labels.shape == (4, 40, 48)
        pad = labels == IGNORE
        assert bool((images.permute(0, 2, 3, 1)[pad] == 0).all())  # padding: black, ignored
        padded += int(pad.sum())
        keep = ~pad
        mismatched += int((nearest_class(images)[keep] != labels[keep]).sum())
        labelled += int(keep.sum())
    assert padded > 0  # some ratios below 1 made images smaller than the crop
    assert mismatched <= 0.03 * labelled  # only blends along block edges (bilinear image)


def test_flip_mirrors_the_sample_of_the_same_draws() -> None:
    """The flip is the last draw: with and without --flip the same scale and crop are taken,
    and each flipped sample is the mirror of the unflipped one (image and label alike)."""
    image, label = painted(seed=5)
    flipped = 0
    for seed in range(16):
        a = pipeline(image, label, config(flip=False), IGNORE, torch.Generator().manual_seed(seed))
        b = pipeline(image, label, config(flip=True), IGNORE, torch.Generator().manual_seed(seed))
        same = torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
        mirror = torch.equal(a[0].flip(-1), b[0]) and torch.equal(a[1].flip(-1), b[1])
        assert same or mirror
        flipped += not same
    assert 0 < flipped < 16


def test_the_defaults_draw_and_crop_as_before() -> None:
    """Without --scale and --flip a sample is the crop alone, drawn from the same numbers, so
    runs made before these options resume and repeat bit-identically."""
    image, label = painted(seed=1)
    plain = TrainConfig("demo", "demo", crop=(48, 40))
    for seed in range(4):
        ga, gb = torch.Generator().manual_seed(seed), torch.Generator().manual_seed(seed)
        a, b = pipeline(image, label, plain, IGNORE, ga), random_crop(image, label, (48, 40), gb)
        assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
        assert torch.equal(ga.get_state(), gb.get_state())
    assert not {"scale", "flip", "schedule"} & set(plain.record())  # older run.json files match



def recorded_rates(monkeypatch) -> list[float]:
    """The learning rate of every optimizer step, read from the optimizer as it steps."""
    rates: list[float] = []
    real = torch.optim.AdamW.step

    def step(self, *args, **kwargs):
        rates.append(self.param_groups[0]["lr"])
        return real(self, *args, **kwargs)

    monkeypatch.setattr(torch.optim.AdamW, "step", step)
    return rates


def demo_config(model: str, **kw) -> TrainConfig:
    base = dict(model=model, data="demo", split=None, limit=4, epochs=2, batch_size=2, lr=3e-3,
                crop=(64, 48), augment="baseline", scale=(0.5, 2.0), flip=True,
                schedule="poly")
    return TrainConfig(**{**base, **kw})


def test_the_lr_follows_the_poly_schedule_step_by_step(random_demo, tmp_path, monkeypatch) -> None:
    rates = recorded_rates(monkeypatch)
    train(demo_config(random_demo), tmp_path / "poly")
    steps = 2 * 2  # 2 epochs of 4 images in batches of 2
    assert rates == pytest.approx([3e-3 * (1 - t / steps) ** 0.9 for t in range(steps)], rel=1e-12)
    rates.clear()
    train(demo_config(random_demo, schedule="constant"), tmp_path / "constant")
    assert rates == [3e-3] * steps


def state(out: Path, epoch: int) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(out / "checkpoints" / f"epoch-{epoch:04d}" / "state.safetensors"))


def test_resume_is_bit_identical_with_scale_flip_and_poly(random_demo, tmp_path) -> None:
    cfg = demo_config(random_demo, epochs=3)
    full = train(cfg, tmp_path / "full")

    def crash(epoch: int, step: int, steps: int, loss: float) -> None:
        if epoch == 2 and step == 1:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train(cfg, tmp_path / "crash", on_step=crash)
    resumed = train(cfg, tmp_path / "crash", resume=True)
    assert [r.loss for r in resumed] == [r.loss for r in full]
    a, b = state(tmp_path / "full", 3), state(tmp_path / "crash", 3)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    config = json.loads((tmp_path / "crash" / "run.json").read_text())["config"]
    assert (config["scale"], config["flip"], config["schedule"]) == ([0.5, 2.0], True, "poly")
    with pytest.raises(SegtkError, match="other settings .*epochs"):  # poly: epochs are fixed
        train(demo_config(random_demo, epochs=4), tmp_path / "crash", resume=True)


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args))


def test_cli_records_the_options_and_resume_reads_them_back(random_demo, tmp_path) -> None:
    out = tmp_path / "run"
    args = ["train", "--model", random_demo, "--data", "demo", "--split", "", "--limit", "2",
            "--batch-size", "2", "--crop", "64x48", "--out", str(out)]
    made = invoke(*args, "--scale", "0.75,1.5", "--flip", "--schedule", "poly", "--epochs", "2")
    assert made.exit_code == 0, made.output
    config = json.loads((out / "run.json").read_text())["config"]
    assert (config["scale"], config["flip"], config["schedule"]) == ([0.75, 1.5], True, "poly")
    again = invoke("train", "--out", str(out), "--resume")  # everything from run.json
    assert again.exit_code == 0, again.output
    other = invoke("train", "--out", str(out), "--resume", "--schedule", "constant")
    assert other.exit_code != 0 and "Traceback" not in other.output
    assert "--schedule poly" in other.output


@pytest.mark.parametrize(("extra", "message"), [
    (["--scale", "0.5,2.0"], "--scale needs --crop"),
    (["--scale", "2,0.5", "--crop", "64x48"], "is not LO,HI"),
    (["--scale", "abc", "--crop", "64x48"], "is not LO,HI"),
])
def test_bad_pipeline_options_are_one_line(random_demo, tmp_path, extra, message) -> None:
    result = invoke("train", "--model", random_demo, "--data", "demo", "--split", "",
                    "--limit", "2", "--out", str(tmp_path / "bad"), *extra)
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert message in result.output
    assert not (tmp_path / "bad" / "run.json").exists()
