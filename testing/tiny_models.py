"""Tiny random transformers models built offline (save_pretrained into a folder), for tests of
plugins that load local weights: CLIP (filters, CLIP accuracy), DINOv2 (DINO distance,
Fréchet distance) and BLIP (captioning). Random weights: they check the plumbing and the
arithmetic, never the quality of a real model. Nothing is downloaded.
"""

from __future__ import annotations

import json
from pathlib import Path


def tiny_clip(folder: Path) -> Path:
    """A random CLIPModel (16-wide, one layer, 32-pixel images) and its processor in
    folder/clip, with a byte-level tokenizer that needs no merges."""
    import transformers as T
    from transformers.models.clip.tokenization_clip import bytes_to_unicode

    chars = list(bytes_to_unicode().values())
    vocab = {tok: i for i, tok in enumerate(chars + [c + "</w>" for c in chars]
                                             + ["<|startoftext|>", "<|endoftext|>"])}
    tok_dir = folder / "tok"
    tok_dir.mkdir(parents=True)
    (tok_dir / "vocab.json").write_text(json.dumps(vocab))
    (tok_dir / "merges.txt").write_text("#version: 0.2\n")
    tok = T.CLIPTokenizer(str(tok_dir / "vocab.json"), str(tok_dir / "merges.txt"))
    image_processor = T.CLIPImageProcessor(size={"shortest_edge": 32},
                                           crop_size={"height": 32, "width": 32})
    processor = T.CLIPProcessor(image_processor=image_processor, tokenizer=tok)
    eos = tok.convert_tokens_to_ids("<|endoftext|>")
    T.set_seed(0)
    model = T.CLIPModel(T.CLIPConfig(
        text_config={"vocab_size": len(tok), "hidden_size": 16, "intermediate_size": 16,
                     "num_hidden_layers": 1, "num_attention_heads": 2,
                     "max_position_embeddings": 77, "eos_token_id": eos, "pad_token_id": eos,
                     "bos_token_id": tok.convert_tokens_to_ids("<|startoftext|>")},
        vision_config={"hidden_size": 16, "intermediate_size": 16, "num_hidden_layers": 1,
                       "num_attention_heads": 2, "image_size": 32, "patch_size": 8},
        projection_dim=8))
    out = folder / "clip"
    model.save_pretrained(out)
    processor.save_pretrained(out)
    return out


def tiny_dinov2(folder: Path, seed: int = 0) -> Path:
    """A random Dinov2Model (16-wide, two layers, 32-pixel images, 8-pixel patches) and its image
    processor in folder/dinov2."""
    import transformers as T

    T.set_seed(seed)
    model = T.Dinov2Model(T.Dinov2Config(hidden_size=16, num_hidden_layers=2,
                                         num_attention_heads=2, mlp_ratio=2, image_size=32,
                                         patch_size=8))
    processor = T.BitImageProcessor(size={"shortest_edge": 32},
                                    crop_size={"height": 32, "width": 32},
                                    image_mean=[0.485, 0.456, 0.406],
                                    image_std=[0.229, 0.224, 0.225])
    out = folder / "dinov2"
    model.save_pretrained(out)
    processor.save_pretrained(out)
    return out


BLIP_WORDS = ("a", "photo", "of", "car", "road", "red", "the", "on", "picture", "an", "image",
              "with", "and", "street", "sky")


def tiny_blip(folder: Path) -> Path:
    """A random BlipForConditionalGeneration (16-wide, one layer, 32-pixel images) and its
    processor (a word-level BERT tokenizer over BLIP_WORDS) in folder/blip."""
    import transformers as T

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "[DEC]"]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "vocab.txt").write_text("\n".join([*specials, *BLIP_WORDS]) + "\n")
    tok = T.BertTokenizerFast(str(folder / "vocab.txt"), bos_token="[DEC]", do_lower_case=True)
    processor = T.BlipProcessor(image_processor=T.BlipImageProcessor(
        size={"height": 32, "width": 32}), tokenizer=tok)
    T.set_seed(0)
    model = T.BlipForConditionalGeneration(T.BlipConfig(
        text_config={"vocab_size": len(tok), "hidden_size": 16, "intermediate_size": 16,
                     "num_hidden_layers": 1, "num_attention_heads": 2,
                     "max_position_embeddings": 32, "encoder_hidden_size": 16,
                     "bos_token_id": tok.convert_tokens_to_ids("[DEC]"),
                     "pad_token_id": tok.pad_token_id, "sep_token_id": tok.sep_token_id,
                     "eos_token_id": tok.sep_token_id},
        vision_config={"hidden_size": 16, "intermediate_size": 16, "num_hidden_layers": 1,
                       "num_attention_heads": 2, "image_size": 32, "patch_size": 8},
        projection_dim=8))
    out = folder / "blip"
    model.save_pretrained(out)
    processor.save_pretrained(out)
    return out
