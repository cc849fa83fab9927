"""Write a randomly initialised SegFormer-b0-sized model for CamVid's 11 classes (no pretraining).

    python scripts/segformer_scratch.py runs/segformer-b0-scratch

The folder loads as `--model hf:FOLDER` and is the start of `segtk train` from scratch: the
processor keeps the input size (no resize) and normalises with ImageNet's mean and std.
"""

from __future__ import annotations

import sys

import torch
from transformers import SegformerConfig, SegformerForSemanticSegmentation, SegformerImageProcessor

CAMVID = ["sky", "building", "pole", "road", "pavement", "tree", "signsymbol", "fence", "car",
          "pedestrian", "bicyclist"]


def main(out: str) -> None:
    config = SegformerConfig(
        num_labels=len(CAMVID), id2label=dict(enumerate(CAMVID)),
        label2id={name: i for i, name in enumerate(CAMVID)},
        depths=[2, 2, 2, 2], hidden_sizes=[32, 64, 160, 256], num_attention_heads=[1, 2, 5, 8],
        sr_ratios=[8, 4, 2, 1], decoder_hidden_size=256, drop_path_rate=0.1,
        semantic_loss_ignore_index=255)
    torch.manual_seed(0)
    SegformerForSemanticSegmentation(config).save_pretrained(out)
    SegformerImageProcessor(do_resize=False, do_rescale=True, do_normalize=True).save_pretrained(out)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "runs/segformer-b0-scratch")
