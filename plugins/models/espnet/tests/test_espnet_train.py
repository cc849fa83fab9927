"""ESPNet as a Trainable, on the real CamVid checkpoint and CamVid train images (../shared)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from segtk.core import load_segmenter
from segtk.jobs.train import TrainConfig, read_spec, train
from segtk.testing import shared
from segtk_espnet import ESPNetSegmenter

pytestmark = [pytest.mark.shared, pytest.mark.slow]


def test_fine_tuning_lowers_the_loss_and_saves_a_loadable_checkpoint(tmp_path: Path) -> None:
    weights = shared("models/espnet_camvid.safetensors")
    data = shared("data/camvid/train")
    spec = f"espnet:camvid={weights}"
    cfg = TrainConfig(spec, f"camvid:{data.parent}", "train", 4, "cutmix", epochs=3,
                      batch_size=4, lr=1e-3, crop=(96, 72), size=(240, 180))
    results = train(cfg, tmp_path / "run")
    losses = [r.loss for r in results]
    assert losses[-1] < losses[0], losses
    out = read_spec(tmp_path / "run")
    assert out.startswith("espnet:camvid=") and out.endswith("model.safetensors")
    model = load_segmenter(out)
    assert isinstance(model, ESPNetSegmenter)
    state = load_file(str(tmp_path / "run" / "checkpoints" / "epoch-0003" / "state.safetensors"))
    for key, value in model.state_dict().items():
        # loading flushes subnormal weights to zero (bit-identical outputs): compare the rest
        expected = state[key]
        tiny = expected.abs() < torch.finfo(torch.float32).tiny
        assert torch.equal(value[~tiny], expected[~tiny]), key
    original = load_segmenter(spec)
    assert isinstance(original, ESPNetSegmenter)
    before = original.state_dict()
    assert any(not torch.equal(before[k], state[k]) for k in before)
