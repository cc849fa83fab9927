"""segtk plugin: MMSegmentation 1.x models from a config file and a checkpoint."""

from __future__ import annotations

from segtk.core import SegmenterPlugin, hookimpl

__version__ = "0.1.0"

SYNTAX = "mmseg:CONFIG.py,CHECKPOINT.pth[,classes=a;b;c][,opts=KEY=VALUE;KEY=VALUE][,trust]"
INSTALL = ("bash scripts/install-mmseg.sh (from the segtk repository: builds full mmcv 2.1.0 "
           "with its compiled ops against this environment's torch, about 17 min once, then "
           "mmengine and mmsegmentation; mmcv-lite is not enough)")


def load(arg: str):
    from segtk_mmseg.segmenter import load as _load

    return _load(arg)


@hookimpl
def register_models(register) -> None:
    register(SegmenterPlugin(
        name="mmseg",
        load=load,
        syntax=SYNTAX,
        example="--model mmseg:segformer_mit-b0_8xb2-160k_ade20k-512x512.py,segformer_b0_ade.pth",
        description="MMSegmentation 1.x EncoderDecoder models: classes from the checkpoint's "
                    "meta.dataset_meta, the config's data preprocessor and test Resize honoured",
        requires=("mmengine", "mmseg", "mmcv", "mmcv._ext"),
        install=INSTALL,
        reads_classes=True,  # classes= is read by the adapter itself
    ))
