"""transformers adapter on tiny random models built offline and loaded through the real path.

Every family is saved with save_pretrained (model + processor) and loaded with
`load_segmenter("hf:FOLDER")`; predictions must equal the processor's own
post_process_semantic_segmentation, batches must equal single images, the preprocessing must
match the processor's, and repo ids must resolve from the local cache only.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import PIL.Image
import pytest
import torch
import transformers as T
from click.testing import CliRunner
from transformers.models.clip.tokenization_clip import bytes_to_unicode

from segtk.cli import cli
from segtk.core import ModelError, Segmenter, load_segmenter
from segtk.testing import SegmenterSuite
from segtk_hf.segmenter import CLIPSegSegmenter, HFSegmenter, UniversalSegmenter, parse

ID2LABEL = {0: "sky", 1: "road", 2: "car"}
LABELS: dict[str, Any] = {"num_labels": 3, "id2label": ID2LABEL, "label2id": {v: k for k, v in ID2LABEL.items()}}


def swin() -> T.SwinConfig:
    return T.SwinConfig(image_size=64, patch_size=4, embed_dim=8, depths=[1, 1, 1, 1],
                        num_heads=[1, 1, 1, 1], window_size=2,
                        out_features=["stage1", "stage2", "stage3", "stage4"])


def tokenizer(folder: Path) -> T.CLIPTokenizer:
    """A byte-level CLIP tokenizer with no merges: every character is a token."""
    chars = list(bytes_to_unicode().values())
    vocab = {tok: i for i, tok in enumerate(chars + [c + "</w>" for c in chars]
                                             + ["<|startoftext|>", "<|endoftext|>"])}
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "vocab.json").write_text(json.dumps(vocab))
    (folder / "merges.txt").write_text("#version: 0.2\n")
    return T.CLIPTokenizer(str(folder / "vocab.json"), str(folder / "merges.txt"))


def build(kind: str, folder: Path) -> Path:
    torch.manual_seed(0)
    model: T.PreTrainedModel
    if kind == "segformer":
        model = T.SegformerForSemanticSegmentation(T.SegformerConfig(
            num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[8, 16],
            patch_sizes=[7, 3], strides=[4, 2], num_attention_heads=[1, 1], mlp_ratios=[2, 2],
            decoder_hidden_size=16, **LABELS))
        processor = T.SegformerImageProcessor(size={"height": 32, "width": 48})
    elif kind == "upernet-convnext":
        backbone = T.ConvNextConfig(hidden_sizes=[8, 16, 24, 32], depths=[1, 1, 1, 1],
                                    out_features=["stage1", "stage2", "stage3", "stage4"])
        model = T.UperNetForSemanticSegmentation(T.UperNetConfig(
            backbone_config=backbone, hidden_size=16, auxiliary_in_channels=24,
            auxiliary_channels=8, pool_scales=[1, 2], **LABELS))
        processor = T.SegformerImageProcessor(size={"height": 32, "width": 32})
    elif kind == "dpt":
        model = T.DPTForSemanticSegmentation(T.DPTConfig(
            hidden_size=16, num_hidden_layers=4, num_attention_heads=2, intermediate_size=16,
            image_size=32, patch_size=8, backbone_out_indices=[0, 1, 2, 3],
            neck_hidden_sizes=[8, 8, 16, 16], fusion_hidden_size=16, **LABELS))
        processor = T.DPTImageProcessor(size={"height": 32, "width": 32})
    elif kind == "beit":
        model = T.BeitForSemanticSegmentation(T.BeitConfig(
            hidden_size=16, num_hidden_layers=4, num_attention_heads=2, intermediate_size=16,
            image_size=32, patch_size=8, out_indices=[0, 1, 2, 3], use_auxiliary_head=False,
            pool_scales=[1, 2], use_relative_position_bias=True, **LABELS))
        processor = T.BeitImageProcessor(size={"height": 32, "width": 32}, do_center_crop=False)
    elif kind == "mask2former":
        model = T.Mask2FormerForUniversalSegmentation(T.Mask2FormerConfig(
            backbone_config=swin(),  # type: ignore[arg-type]  # a config: transformers takes it, its hint says dict
            feature_size=32, mask_feature_size=32, hidden_dim=32,
            encoder_feedforward_dim=16, dim_feedforward=16, encoder_layers=1, decoder_layers=2,
            num_attention_heads=2, num_queries=4, **LABELS))
        processor = T.Mask2FormerImageProcessor(size={"shortest_edge": 32, "longest_edge": 64},
                                                size_divisor=32)
    elif kind == "maskformer":
        decoder = T.DetrConfig(d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
                               decoder_attention_heads=2, encoder_ffn_dim=16, decoder_ffn_dim=16,
                               num_queries=4)
        model = T.MaskFormerForInstanceSegmentation(T.MaskFormerConfig(
            backbone_config=swin(),  # type: ignore[arg-type]  # a config: transformers takes it, its hint says dict
            decoder_config=decoder,  # type: ignore[arg-type]  # a config: transformers takes it, its hint says dict
            fpn_feature_size=32,
            mask_feature_size=32, **LABELS))
        processor = T.MaskFormerImageProcessor(size={"shortest_edge": 32, "longest_edge": 64},
                                               size_divisor=32)
    elif kind == "oneformer":
        folder.mkdir(parents=True, exist_ok=True)
        info = {str(k): {"name": v, "isthing": int(v == "car")} for k, v in ID2LABEL.items()}
        (folder / "class_info.json").write_text(json.dumps(info))
        image_processor = T.OneFormerImageProcessor(
            size={"shortest_edge": 32, "longest_edge": 64}, repo_path=None,
            class_info_file=str(folder / "class_info.json"), num_text=4)
        processor = T.OneFormerProcessor(image_processor=image_processor,
                                         tokenizer=tokenizer(folder / "tok"),
                                         max_seq_length=16, task_seq_length=16)
        model = T.OneFormerForUniversalSegmentation(T.OneFormerConfig(
            backbone_config=swin(),  # type: ignore[arg-type]  # a config: transformers takes it, its hint says dict
            num_queries=4, conv_dim=32, mask_dim=32, hidden_dim=32,
            encoder_feedforward_dim=32, dim_feedforward=32, encoder_layers=1, decoder_layers=2,
            num_attention_heads=2, task_seq_len=16, text_encoder_width=32,
            text_encoder_context_length=16, text_encoder_num_layers=1, text_encoder_vocab_size=514,
            text_encoder_n_ctx=4, query_dec_layers=1, is_training=False, **LABELS))
    elif kind == "clipseg":
        tok = tokenizer(folder / "tok")
        image_processor = T.ViTImageProcessor(size={"height": 32, "width": 32},
                                              resample=PIL.Image.Resampling.BICUBIC,
                                              image_mean=[0.481, 0.458, 0.408],
                                              image_std=[0.269, 0.261, 0.276])
        processor = T.CLIPSegProcessor(image_processor=image_processor, tokenizer=tok)
        eos = tok.convert_tokens_to_ids("<|endoftext|>")
        model = T.CLIPSegForImageSegmentation(T.CLIPSegConfig(
            text_config={"vocab_size": len(tok), "hidden_size": 16, "intermediate_size": 16,
                         "num_hidden_layers": 2, "num_attention_heads": 2,
                         "max_position_embeddings": 32, "eos_token_id": eos, "pad_token_id": eos,
                         "bos_token_id": tok.convert_tokens_to_ids("<|startoftext|>")},
            vision_config={"hidden_size": 16, "intermediate_size": 16, "num_hidden_layers": 2,
                           "num_attention_heads": 2, "image_size": 32, "patch_size": 8},
            projection_dim=16, extract_layers=[0, 1], reduce_dim=8, decoder_num_attention_heads=2,
            decoder_intermediate_size=16))
    else:
        raise AssertionError(kind)
    model.save_pretrained(folder)
    processor.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("hf")
    kinds = ["segformer", "upernet-convnext", "dpt", "beit", "mask2former", "maskformer",
             "oneformer", "clipseg"]
    return {k: build(k, root / k) for k in kinds}


def load_hf(spec: str) -> HFSegmenter:
    """`load_segmenter(spec)`, the hf plugin's segmenter."""
    model = load_segmenter(spec)
    assert isinstance(model, HFSegmenter)
    return model


def images(n: int = 3, h: int = 40, w: int = 56, seed: int = 0) -> torch.Tensor:
    return torch.rand(n, 3, h, w, generator=torch.Generator().manual_seed(seed))


def as_uint8(x: torch.Tensor) -> tuple[list[np.ndarray], torch.Tensor]:
    u8 = (x * 255).round().to(torch.uint8)
    return list(u8.permute(0, 2, 3, 1).numpy()), u8.float() / 255


@pytest.mark.parametrize("kind", ["segformer", "upernet-convnext", "dpt", "beit"])
def test_per_pixel_heads(models, kind) -> None:
    model = load_hf(f"hf:{models[kind]}")
    assert type(model).__name__ == "HFSegmenter" and model.classes == ["sky", "road", "car"]
    x = images()
    labels, logits = model.predict(x), model.logits(x)
    assert labels.shape == (3, 40, 56) and labels.dtype == torch.int64
    assert logits.shape == (3, 3, 40, 56) and torch.equal(logits.argmax(1), labels)
    single = [model.predict(x[i:i + 1]) for i in range(3)]
    assert torch.equal(torch.cat(single), labels)
    # The processor's own post-processing on the same model outputs gives the same labels.
    with torch.inference_mode():
        out = model.model(pixel_values=model.preprocess(x))
    ref = model.image_processor.post_process_semantic_segmentation(out, target_sizes=[(40, 56)] * 3)
    assert torch.equal(torch.stack(ref), labels)
    # Preprocessing = the processor's: target size exactly, values up to PIL's 8-bit resize.
    arrays, x8 = as_uint8(x)
    theirs = model.image_processor(images=arrays, return_tensors="pt")["pixel_values"]
    ours = model.preprocess(x8)
    assert ours.shape == theirs.shape and float((ours - theirs).abs().max()) < 0.1
    h, w = model.model_size(40, 56)  # at the model's size there is no resize: exact
    arrays, x8 = as_uint8(images(2, h, w, seed=1))
    theirs = model.image_processor(images=arrays, return_tensors="pt")["pixel_values"]
    assert torch.allclose(model.preprocess(x8), theirs, atol=1e-5)


@pytest.mark.parametrize("kind", ["mask2former", "maskformer", "oneformer"])
def test_mask_classification_through_post_processing(models, kind) -> None:
    model = load_hf(f"hf:{models[kind]}")
    assert isinstance(model, UniversalSegmenter) and model.classes == ["sky", "road", "car"]
    x = images()
    labels = model.predict(x)  # = image_processor.post_process_semantic_segmentation
    assert labels.shape == (3, 40, 56) and labels.dtype == torch.int64
    logits = model.logits(x)
    assert logits.shape == (3, 3, 40, 56) and torch.equal(logits.argmax(1), labels)
    assert torch.equal(torch.cat([model.predict(x[i:i + 1]) for i in range(3)]), labels)
    kwargs = {"task_inputs": ["semantic"]} if kind == "oneformer" else {}
    arrays, _ = as_uint8(x)
    theirs = model.image_processor(images=arrays, return_tensors="pt", **kwargs)["pixel_values"]
    expected = (32, 44) if kind == "oneformer" else (32, 64)  # shortest edge 32 (then /32)
    assert tuple(theirs.shape[-2:]) == model.model_size(40, 56) == expected


def test_clipseg_open_vocabulary(models) -> None:
    folder = models["clipseg"]
    with pytest.raises(ModelError, match="needs classes"):
        load_segmenter(f"hf:{folder}")
    model = load_hf(f"hf:{folder},classes=background;road;sky,prompt=a photo of {{}}")
    assert isinstance(model, CLIPSegSegmenter) and model.classes == ["background", "road", "sky"]
    assert model.prompts == ["a photo of background", "a photo of road", "a photo of sky"]
    x = images(2, 32, 32)  # the processor's size: no resize, so exact against transformers
    logits = model.logits(x)
    assert logits.shape == (2, 3, 32, 32)
    assert torch.equal(model.predict(x), logits.argmax(1))
    arrays, x8 = as_uint8(x)
    proc = T.CLIPSegProcessor.from_pretrained(folder)
    inputs = proc(text=model.prompts * 2, images=[a for a in arrays for _ in range(3)],
                  padding=True, return_tensors="pt")
    with torch.no_grad():
        ref = model.model(**inputs).logits.reshape(2, 3, 32, 32)
    assert torch.allclose(model.logits(x8), ref, atol=1e-5)
    y = images(3, 20, 28)
    assert model.predict(y).shape == (3, 20, 28)
    assert torch.equal(torch.cat([model.predict(y[i:i + 1]) for i in range(3)]), model.predict(y))


def test_repo_ids_resolve_from_the_local_cache_only(models, tmp_path, monkeypatch) -> None:
    import huggingface_hub.constants
    import transformers.utils.hub

    cache = tmp_path / "hub"
    for mod, attr in ((huggingface_hub.constants, "HF_HUB_CACHE"),
                      (transformers.utils.hub, "TRANSFORMERS_CACHE")):
        monkeypatch.setattr(mod, attr, str(cache))
    with pytest.raises(ModelError) as err:
        load_segmenter("hf:tiny-org/segformer")
    assert "not in the local Hugging Face cache" in err.value.message
    assert "hf:tiny-org/segformer,download" in str(err.value.hint)
    # The standard cache layout: refs/main -> snapshots/<commit>/...
    repo = cache / "models--tiny-org--segformer"
    commit = "0" * 40
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    shutil.copytree(models["segformer"], repo / "snapshots" / commit)
    model = load_hf("hf:tiny-org/segformer")
    assert model.name == "hf:tiny-org/segformer" and model.classes == ["sky", "road", "car"]
    assert torch.equal(model.predict(images(1)), load_segmenter(f"hf:{models['segformer']}").predict(images(1)))


def test_spec_options_and_errors(models, tmp_path) -> None:
    assert parse("org/m,classes=a;b,size=64x32,revision=v1,download") == (
        "org/m", {"classes": ["a", "b"], "prompt": "{}", "size": (32, 64), "revision": "v1",
                  "download": True})
    with pytest.raises(ModelError, match="unknown hf option"):
        parse("org/m,colour=red")
    with pytest.raises(ModelError, match="prompt must contain"):
        parse("org/m,prompt=a photo")
    model = load_hf(f"hf:{models['segformer']},classes=a;b;c,size=24x16")
    assert model.classes == ["a", "b", "c"] and model.model_size(40, 56) == (16, 24)
    assert model.predict(images(1)).shape == (1, 40, 56)
    with pytest.raises(ModelError, match="predicts 3 classes, classes= names 2"):
        load_segmenter(f"hf:{models['segformer']},classes=a;b")
    with pytest.raises(ModelError, match="not a model folder"):
        load_segmenter(f"hf:{tmp_path / 'nowhere'}")
    bare = tmp_path / "no-processor"
    shutil.copytree(models["segformer"], bare)
    (bare / "preprocessor_config.json").unlink()
    with pytest.raises(ModelError, match="no usable image processor"):
        load_segmenter(f"hf:{bare}")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelError, match="no usable config.json"):
        load_segmenter(f"hf:{tmp_path / 'empty'}")
    rows = json.loads(CliRunner().invoke(cli, ["plugins", "--json"]).output)
    assert [r["status"] for r in rows if r["name"] == "hf"] == ["ok"]


class HFContract(SegmenterSuite):
    """The segmenter contract (segtk.testing), on the tiny random models saved offline."""

    kind = "segformer"
    options = ""

    @pytest.fixture(autouse=True)
    def _folders(self, models: dict[str, Path]) -> None:
        self.folder = models[self.kind]

    def make(self) -> Segmenter:
        return load_segmenter(f"hf:{self.folder}{self.options}")


class TestSegFormerContract(HFContract):
    kind = "segformer"  # a per-pixel head, with gradients (white-box attacks)


class TestMask2FormerContract(HFContract):
    kind = "mask2former"  # mask classification, through the processor's post-processing

    @pytest.mark.xfail(strict=True, reason="transformers' Mask2Former answers an image "
                       "differently inside a batch than alone (its class logits move by ~0.2 in "
                       "eval mode): found by this suite, not fixed yet")
    def test_batched_equals_one_at_a_time(self) -> None:
        super().test_batched_equals_one_at_a_time()


class TestCLIPSegContract(HFContract):
    kind = "clipseg"  # open vocabulary: the classes are prompts
    options = ",classes=background;road;car"
