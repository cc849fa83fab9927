"""segtk plugin: exported ONNX segmentation models on ONNX Runtime (CPU)."""

from __future__ import annotations

from segtk.core import SegmenterPlugin, hookimpl

__version__ = "0.1.0"

SYNTAX = ("onnx:FILE.onnx[,classes=a;b;c][,mean=R;G;B][,std=R;G;B][,scale=255][,bgr]"
          "[,size=WxH][,threads=N]")


def load(arg: str):
    from segtk_onnx.segmenter import load as _load

    return _load(arg)


@hookimpl
def register_models(register) -> None:
    register(SegmenterPlugin(
        name="onnx",
        load=load,
        syntax=SYNTAX,
        example="--model onnx:model.onnx,classes=sky;road;car,mean=0.485;0.456;0.406,std=0.229;0.224;0.225",
        description="ONNX model: images -> logits [B,C,h,w] (or labels [B,h,w]); classes and "
                    "normalisation from the file's metadata_props key 'segtk' or the spec",
        requires=("onnxruntime",),
        install="pip install onnxruntime==1.32.0  (or: pip install -e plugins/models/onnx)",
        reads_classes=True,  # classes= is read by the adapter itself
    ))


def __getattr__(name: str):
    """`from segtk_onnx import Preprocessing, save_metadata` without importing ORT up front."""
    if name in ("Preprocessing", "save_metadata", "OnnxSegmenter"):
        from segtk_onnx import segmenter

        return getattr(segmenter, name)
    raise AttributeError(name)
