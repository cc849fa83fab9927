"""segtk plugin: bring your own model as a TorchScript file."""

from segtk.core import SegmenterPlugin, hookimpl
from segtk_torchscript.segmenter import META_FILE, TorchScriptSegmenter, load, save_with_metadata

__all__ = ["META_FILE", "TorchScriptSegmenter", "load", "save_with_metadata"]


@hookimpl
def register_models(register) -> None:
    register(SegmenterPlugin(
        name="torchscript",
        load=load,
        syntax="torchscript:FILE.pt[,classes=a;b;c][,mean=R;G;B][,std=R;G;B][,bgr][,scale=255][,size=WxH]",
        example="--model torchscript:model.pt",
        description="TorchScript module: images -> logits [B,C,h,w]; metadata from segtk.json inside",
        reads_classes=True,  # classes= is read by the adapter itself
    ))
