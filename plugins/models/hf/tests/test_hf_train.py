"""SegFormer (hf) as a Trainable: segtk train fine-tunes it, and its saved folder loads back."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import transformers as T
from safetensors.torch import load_file

from segtk.core import ModelError, load_segmenter
from segtk.jobs.train import TrainConfig, read_spec, train
from segtk_demo.scenes import CLASSES
from segtk_hf.segmenter import HFSegmenter


@pytest.fixture(scope="module")
def segformer(tmp_path_factory) -> str:
    """A tiny random SegFormer with the demo's 8 classes, saved like a real checkpoint."""
    torch.manual_seed(0)
    labels = dict(enumerate(CLASSES))
    model = T.SegformerForSemanticSegmentation(T.SegformerConfig(
        num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[8, 16],
        patch_sizes=[7, 3], strides=[4, 2], num_attention_heads=[1, 1], mlp_ratios=[2, 2],
        decoder_hidden_size=16, num_labels=len(CLASSES), id2label=labels,
        label2id={v: k for k, v in labels.items()}))
    folder = tmp_path_factory.mktemp("hf") / "segformer"
    model.save_pretrained(folder)
    T.SegformerImageProcessor(size={"height": 48, "width": 64}).save_pretrained(folder)
    return f"hf:{folder}"


def config(spec: str, **kw) -> TrainConfig:
    return TrainConfig(**{**dict(model=spec, data="demo", split=None, epochs=3, batch_size=4,
                                 lr=3e-3, crop=(64, 48), augment="cutmix"), **kw})


@pytest.mark.slow
def test_segformer_trains_deterministically_and_saves_a_loadable_folder(segformer, tmp_path: Path) -> None:
    a = train(config(segformer), tmp_path / "a")
    b = train(config(segformer), tmp_path / "b")
    assert [r.loss for r in a] == [r.loss for r in b]
    assert a[-1].loss < a[0].loss, [r.loss for r in a]
    state = load_file(str(tmp_path / "a" / "checkpoints" / "epoch-0003" / "state.safetensors"))
    spec = read_spec(tmp_path / "a")
    assert spec == f"hf:{tmp_path / 'a' / 'checkpoints' / 'epoch-0003' / 'model'}"
    loaded = load_segmenter(spec)
    assert isinstance(loaded, HFSegmenter)
    assert loaded.classes == list(CLASSES)
    for key, value in loaded.state_dict().items():
        assert torch.equal(value, state[key]), key
    assert (tmp_path / "a" / "checkpoints" / "epoch-0003" / "model" / "model.safetensors").is_file()


def test_train_mode_keeps_the_graph_eval_mode_does_not(segformer) -> None:
    model = load_segmenter(segformer)
    assert isinstance(model, HFSegmenter)
    x = torch.rand(2, 3, 48, 64)
    assert not model.logits(x).requires_grad
    model.train()
    out = model.logits(x)
    assert out.requires_grad and out.shape == (2, len(CLASSES), 48, 64)
    out.sum().backward()
    assert any(p.grad is not None for p in model.parameters())
    model.eval()
    assert not model.training and not model.model.training


def test_mask_classification_models_refuse_training(tmp_path: Path) -> None:
    from segtk_hf.segmenter import UniversalSegmenter

    model = UniversalSegmenter.__new__(UniversalSegmenter)
    model.name, model.family = "hf:m2f", "mask classification"
    with pytest.raises(ModelError, match="cannot be trained"):
        model.train()
