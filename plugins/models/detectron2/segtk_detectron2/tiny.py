"""Two small detectron2 meta-architectures, so the adapter's mask-classification and
open-vocabulary paths run for real on a CPU without downloaded weights or extra projects.

detectron2 core and the projects/ of its source tree ship no MaskFormer/Mask2Former and no
open-vocabulary model (those live in their own repositories), so these are registered the way
such projects register theirs: importing this module (the `add_config=` hook does) adds the
meta-architectures to detectron2's META_ARCH_REGISTRY.

- `TinyMaskFormer` (hook `segtk_detectron2.tiny:add_mask_former_config`): Mask2Former-style
  mask classification in semantic mode. N learned queries go through a transformer decoder
  whose cross-attention is *masked* by the previous layer's mask prediction (sigmoid < 0.5
  masked) and visits three FPN levels round-robin; each query predicts K+1 class logits
  ("no object" last) and a mask embedding dotted with per-pixel mask features; the semantic map
  is MaskFormer's `einsum("qc,qhw->chw", softmax(cls)[..., :-1], sigmoid(masks))`. Unlike
  Mask2Former, the pixel decoder is detectron2's FPN (as MaskFormer's BasePixelDecoder) instead
  of multi-scale deformable attention, and only inference is implemented.
- `TinyOpenVocabSeg` (hook `segtk_detectron2.tiny:add_open_vocab_config`): per-pixel embeddings
  from an FPN, classified by cosine similarity with CLIP text embeddings of prompts built from
  the class names of `MetadataCatalog.get(DATASETS.TEST[0]).stuff_classes` (what the adapter's
  `vocab=` sets), computed once when the model is built. The text encoder is loaded by path
  (MODEL.OPEN_VOCAB.TEXT_ENCODER: a transformers CLIP folder) and is not part of the
  checkpoint, so the vocabulary changes without touching the weights.

Both are meant for random weights: they test the plumbing, not segmentation quality.
"""

from __future__ import annotations

import math

import torch
from detectron2.config import CfgNode
from detectron2.data import MetadataCatalog
from detectron2.modeling import META_ARCH_REGISTRY, build_backbone
from detectron2.modeling.postprocessing import sem_seg_postprocess
from detectron2.structures import ImageList
from torch import nn
from torch.nn import functional as F


def add_mask_former_config(cfg: CfgNode) -> None:
    """Keys named as in Mask2Former's add_maskformer2_config (the subset used here)."""
    cfg.MODEL.MASK_FORMER = CfgNode()
    cfg.MODEL.MASK_FORMER.NUM_OBJECT_QUERIES = 16
    cfg.MODEL.MASK_FORMER.HIDDEN_DIM = 32
    cfg.MODEL.MASK_FORMER.NHEADS = 4
    cfg.MODEL.MASK_FORMER.DIM_FEEDFORWARD = 64
    cfg.MODEL.MASK_FORMER.DEC_LAYERS = 3
    cfg.MODEL.MASK_FORMER.IN_FEATURES = ["p5", "p4", "p3"]  # cross-attention levels, coarse first
    cfg.MODEL.MASK_FORMER.MASK_FEATURE = "p2"
    cfg.MODEL.SEM_SEG_HEAD.MASK_DIM = 32


def add_open_vocab_config(cfg: CfgNode) -> None:
    cfg.MODEL.OPEN_VOCAB = CfgNode()
    cfg.MODEL.OPEN_VOCAB.TEXT_ENCODER = ""  # a transformers CLIP folder (model + tokenizer)
    cfg.MODEL.OPEN_VOCAB.PROMPT = "a photo of a {}."
    cfg.MODEL.OPEN_VOCAB.IN_FEATURES = ["p2", "p3", "p4", "p5"]
    cfg.MODEL.OPEN_VOCAB.LOGIT_SCALE = 50.0


class _Inference(nn.Module):
    """What detectron2 semantic models share: normalise, pad, run, crop and resize back."""

    def __init__(self, cfg: CfgNode) -> None:
        super().__init__()
        self.backbone = build_backbone(cfg)
        self.register_buffer("pixel_mean", torch.tensor(cfg.MODEL.PIXEL_MEAN).view(-1, 1, 1), False)
        self.register_buffer("pixel_std", torch.tensor(cfg.MODEL.PIXEL_STD).view(-1, 1, 1), False)

    def forward(self, batched_inputs: list[dict]) -> list[dict]:
        if self.training:
            raise NotImplementedError(f"{type(self).__name__} implements inference only")
        images = [(x["image"].to(self.pixel_mean.device) - self.pixel_mean) / self.pixel_std
                  for x in batched_inputs]
        images = ImageList.from_tensors(images, self.backbone.size_divisibility,
                                        padding_constraints=self.backbone.padding_constraints)
        scores = self.semantic(self.backbone(images.tensor), images.tensor.shape[-2:])
        out = []
        for s, inp, size in zip(scores, batched_inputs, images.image_sizes):
            height, width = inp.get("height", size[0]), inp.get("width", size[1])
            out.append({"sem_seg": self.finish(s, size, height, width)})
        return out

    def semantic(self, features: dict[str, torch.Tensor], size: torch.Size) -> list:
        raise NotImplementedError

    def finish(self, result, size, height: int, width: int) -> torch.Tensor:
        return sem_seg_postprocess(result, size, height, width)


def sine_position(height: int, width: int, dim: int, device: torch.device) -> torch.Tensor:
    """DETR's normalised 2-D sine position encoding, [H*W, dim]."""
    quarter = dim // 4
    freq = 10000 ** (torch.arange(quarter, device=device, dtype=torch.float32) / quarter)
    ys = (torch.arange(height, device=device, dtype=torch.float32) + 0.5) / height * 2 * math.pi
    xs = (torch.arange(width, device=device, dtype=torch.float32) + 0.5) / width * 2 * math.pi
    y, x = torch.meshgrid(ys, xs, indexing="ij")
    parts = [f(t[..., None] / freq) for t in (y, x) for f in (torch.sin, torch.cos)]
    return torch.cat(parts, dim=-1).flatten(0, 1)


class _DecoderLayer(nn.Module):
    """Mask2Former's order: masked cross-attention, self-attention, FFN (post-norm)."""

    def __init__(self, dim: int, heads: int, ffn: int) -> None:
        super().__init__()
        self.cross = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.self_attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.ffn = nn.Sequential(nn.Linear(dim, ffn), nn.ReLU(), nn.Linear(ffn, dim))
        self.norms = nn.ModuleList(nn.LayerNorm(dim) for _ in range(3))

    def forward(self, q, qpos, memory, mpos, attn_mask):
        q = self.norms[0](q + self.cross(q + qpos, memory + mpos, memory, attn_mask=attn_mask)[0])
        q = self.norms[1](q + self.self_attn(q + qpos, q + qpos, q)[0])
        return self.norms[2](q + self.ffn(q))


@META_ARCH_REGISTRY.register()
class TinyMaskFormer(_Inference):
    """Mask2Former-style mask classification (see the module docstring for what differs)."""

    def __init__(self, cfg: CfgNode) -> None:
        super().__init__(cfg)
        mf = cfg.MODEL.MASK_FORMER
        dim, mask_dim = mf.HIDDEN_DIM, cfg.MODEL.SEM_SEG_HEAD.MASK_DIM
        shapes = self.backbone.output_shape()
        if dim % 4:
            raise ValueError(f"MODEL.MASK_FORMER.HIDDEN_DIM must be a multiple of 4, got {dim}")
        self.in_features, self.mask_feature, self.heads = list(mf.IN_FEATURES), mf.MASK_FEATURE, mf.NHEADS
        self.input_proj = nn.ModuleList(nn.Conv2d(shapes[f].channels, dim, 1) for f in self.in_features)
        self.level_embed = nn.Embedding(len(self.in_features), dim)
        self.mask_proj = nn.Conv2d(shapes[self.mask_feature].channels, mask_dim, 3, padding=1)
        self.query_feat = nn.Embedding(mf.NUM_OBJECT_QUERIES, dim)
        self.query_embed = nn.Embedding(mf.NUM_OBJECT_QUERIES, dim)
        self.layers = nn.ModuleList(_DecoderLayer(dim, mf.NHEADS, mf.DIM_FEEDFORWARD)
                                    for _ in range(mf.DEC_LAYERS))
        self.decoder_norm = nn.LayerNorm(dim)
        self.class_embed = nn.Linear(dim, cfg.MODEL.SEM_SEG_HEAD.NUM_CLASSES + 1)
        self.mask_embed = nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, dim),
                                        nn.ReLU(), nn.Linear(dim, mask_dim))

    def predict_heads(self, q, mask_features, attn_size):
        """Class logits, masks, and the next layer's attention mask (True = not attended)."""
        d = self.decoder_norm(q)
        masks = torch.einsum("bqc,bchw->bqhw", self.mask_embed(d), mask_features)
        small = F.interpolate(masks, size=attn_size, mode="bilinear", align_corners=False)
        attn = (small.sigmoid().flatten(2) < 0.5)[:, None].expand(-1, self.heads, -1, -1)
        attn = attn.flatten(0, 1).clone()
        attn[attn.all(-1)] = False  # a query masked everywhere attends everywhere
        return self.class_embed(d), masks, attn

    def semantic(self, features, size):
        mask_features = self.mask_proj(features[self.mask_feature])
        memory, pos, sizes = [], [], []
        for i, name in enumerate(self.in_features):
            f = self.input_proj[i](features[name])
            sizes.append(f.shape[-2:])
            pos.append(sine_position(*f.shape[-2:], f.shape[1], f.device)[None])
            memory.append(f.flatten(2).transpose(1, 2) + self.level_embed.weight[i])
        b = mask_features.shape[0]
        q = self.query_feat.weight[None].expand(b, -1, -1)
        qpos = self.query_embed.weight[None].expand(b, -1, -1)
        cls, masks, attn = self.predict_heads(q, mask_features, sizes[0])
        for i, layer in enumerate(self.layers):
            level = i % len(memory)
            q = layer(q, qpos, memory[level], pos[level], attn)
            cls, masks, attn = self.predict_heads(q, mask_features, sizes[(i + 1) % len(memory)])
        masks = F.interpolate(masks, size=size, mode="bilinear", align_corners=False)
        return list(zip(cls, masks))

    def finish(self, result, size, height, width):
        cls, masks = result
        masks = sem_seg_postprocess(masks, size, height, width)
        return torch.einsum("qc,qhw->chw", cls.softmax(-1)[..., :-1], masks.sigmoid())


@META_ARCH_REGISTRY.register()
class TinyOpenVocabSeg(_Inference):
    """Per-pixel embeddings classified by the CLIP text embeddings of the class names."""

    def __init__(self, cfg: CfgNode) -> None:
        super().__init__(cfg)
        ov = cfg.MODEL.OPEN_VOCAB
        names = vocabulary(cfg)
        embeds = text_embeddings(ov.TEXT_ENCODER, [ov.PROMPT.format(n) for n in names])
        self.register_buffer("text_embeds", embeds, persistent=False)  # not in the checkpoint
        shapes = self.backbone.output_shape()
        dim = embeds.shape[1]
        self.in_features = list(ov.IN_FEATURES)
        self.lateral = nn.ModuleList(nn.Conv2d(shapes[f].channels, dim, 1) for f in self.in_features)
        self.head = nn.Conv2d(dim, dim, 3, padding=1)
        self.logit_scale = float(ov.LOGIT_SCALE)

    def semantic(self, features, size):
        first = features[self.in_features[0]]
        x = sum(F.interpolate(lat(features[f]), size=first.shape[-2:], mode="bilinear",
                              align_corners=False)
                for lat, f in zip(self.lateral, self.in_features))
        x = F.normalize(self.head(F.relu(x)), dim=1)
        logits = self.logit_scale * torch.einsum("bdhw,kd->bkhw", x, self.text_embeds)
        return list(F.interpolate(logits, size=size, mode="bilinear", align_corners=False))


def vocabulary(cfg: CfgNode) -> list[str]:
    """The class names of the test dataset's metadata, as OVSeg-style models read them."""
    if not cfg.DATASETS.TEST:
        raise ValueError("TinyOpenVocabSeg reads its class names from DATASETS.TEST[0]'s "
                         "stuff_classes; none is set (the segtk adapter sets it from vocab=)")
    names = getattr(MetadataCatalog.get(cfg.DATASETS.TEST[0]), "stuff_classes", None)
    if not names:
        raise ValueError(f"dataset {cfg.DATASETS.TEST[0]!r} has no stuff_classes")
    return list(names)


def text_embeddings(path: str, prompts: list[str]) -> torch.Tensor:
    """L2-normalised CLIP text embeddings [K, D] of the prompts (transformers, local folder)."""
    if not path:
        raise ValueError("MODEL.OPEN_VOCAB.TEXT_ENCODER is empty: give a local transformers CLIP folder")
    from transformers import AutoTokenizer, CLIPTextModelWithProjection

    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    model = CLIPTextModelWithProjection.from_pretrained(path, local_files_only=True).eval()
    with torch.no_grad():
        tokens = tokenizer(prompts, padding=True, return_tensors="pt")
        return F.normalize(model(**tokens).text_embeds.float(), dim=-1)
