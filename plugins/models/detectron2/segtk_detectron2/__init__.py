"""segtk plugin: detectron2 semantic segmentation models (built from source, not on PyPI)."""

from __future__ import annotations

from segtk.core.hookspecs import hookimpl
from segtk.core.registry import SegmenterPlugin

__version__ = "0.1.0"

SYNTAX = ("detectron2:CONFIG.yaml,WEIGHTS.pth[,classes=a;b;c][,add_config=module:function]"
          "[,dataset=NAME][,opts=KEY=VALUE;KEY=VALUE]")
INSTALL = ("detectron2 has no PyPI release: build it from source (needs network to GitHub, a C++ "
           "compiler and torchvision matching torch): pip install --no-build-isolation "
           "'git+https://github.com/facebookresearch/detectron2.git'")


def load(arg: str):
    from segtk_detectron2.segmenter import load as _load

    return _load(arg)


@hookimpl
def register_segmenters(register) -> None:
    register(SegmenterPlugin(
        name="detectron2",
        load=load,
        syntax=SYNTAX,
        example="--model detectron2:sem_seg_R50_FPN.yaml,model_final.pkl,dataset=ade20k_sem_seg_val",
        description="detectron2 model (yacs .yaml or LazyConfig .py) returning sem_seg; classes "
                    "from classes= or the MetadataCatalog of cfg.DATASETS.TEST[0]",
        requires=("detectron2",),
        install=INSTALL,
    ))
