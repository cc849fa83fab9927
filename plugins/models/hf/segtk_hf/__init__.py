"""segtk plugin: Hugging Face transformers semantic segmentation models, loaded offline."""

from __future__ import annotations

from segtk.core import SegmenterPlugin, hookimpl

__version__ = "0.1.0"

SYNTAX = ("hf:FOLDER_OR_REPO_ID[,classes=a;b;c][,prompt=a photo of {}][,size=WxH][,revision=R]"
          "[,download]")


def load(arg: str):
    from segtk_hf.segmenter import load as _load

    return _load(arg)


@hookimpl
def register_models(register) -> None:
    register(SegmenterPlugin(
        name="hf",
        load=load,
        syntax=SYNTAX,
        example="--model hf:nvidia/segformer-b0-finetuned-ade-512-512",
        description="transformers SegFormer/UperNet/BEiT/DPT/MobileViT (logits), MaskFormer/"
                    "Mask2Former/OneFormer (semantic post-processing), CLIPSeg (classes= prompts); "
                    "a local folder or a cached repo id, never downloaded unless ',download'",
        requires=("transformers", "scipy"),
        install="pip install transformers==4.57.6 scipy  (or: pip install -e plugins/models/hf)",
        reads_classes=True,  # classes= is read by the adapter itself
    ))
