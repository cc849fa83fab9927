"""Write a randomly initialised DeepLabV3 with a MobileNetV2 backbone for CamVid's 11 classes
(no pretraining): segtk's third architecture, a convolutional network unlike ESPNet's dilated
pyramid and SegFormer's transformer.

    python scripts/deeplabv3_scratch.py runs/deeplabv3-mobilenetv2-scratch

The folder loads as `--model hf:FOLDER` and is the start of `segtk train` from scratch (the
command that made models/deeplabv3-camvid is in its README). Output
stride 16 (logits at 1/16 of the input, upsampled bilinearly by the hf adapter) keeps a training
step about 4x cheaper on a CPU than stride 8. The processor keeps the input size (no resize, no
crop) and normalises with ImageNet's mean and std.
"""

from __future__ import annotations

import sys

import torch
from transformers import (
    MobileNetV2Config,
    MobileNetV2ForSemanticSegmentation,
    MobileNetV2ImageProcessor,
)

CAMVID = ["sky", "building", "pole", "road", "pavement", "tree", "signsymbol", "fence", "car",
          "pedestrian", "bicyclist"]
IMAGENET_MEAN = [0.485, 0.456, 0.406]
IMAGENET_STD = [0.229, 0.224, 0.225]


def main(out: str) -> None:
    config = MobileNetV2Config(
        num_labels=len(CAMVID), id2label=dict(enumerate(CAMVID)),
        label2id={name: i for i, name in enumerate(CAMVID)},
        output_stride=16, classifier_dropout_prob=0.1, semantic_loss_ignore_index=255)
    torch.manual_seed(0)
    MobileNetV2ForSemanticSegmentation(config).save_pretrained(out)
    MobileNetV2ImageProcessor(do_resize=False, do_center_crop=False, do_rescale=True,
                              do_normalize=True, image_mean=IMAGENET_MEAN,
                              image_std=IMAGENET_STD).save_pretrained(out)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "runs/deeplabv3-mobilenetv2-scratch")
