"""segtk plugin: detectron2 semantic segmentation models (built from source, not on PyPI)."""

from __future__ import annotations

from segtk.core import SegmenterPlugin, hookimpl

__version__ = "0.1.0"

SYNTAX = ("detectron2:CONFIG.yaml,WEIGHTS.pth[,classes=a;b;c|vocab=a;b;c]"
          "[,add_config=module:function][,dataset=NAME][,opts=KEY=VALUE;KEY=VALUE]")
INSTALL = ("detectron2 has no PyPI release and needs torchvision, which segtk's torch 2.13.0 CPU "
           "build cannot load: bash scripts/install-detectron2.sh builds it from source "
           "(../shared/src/detectron2-*.tar.gz, C++ compiler, no network) into its own "
           ".venv-detectron2 with torch 2.14.1 + torchvision 0.29.1; run segtk from "
           ".venv-detectron2/bin there")


def load(arg: str):
    from segtk_detectron2.segmenter import load as _load

    return _load(arg)


@hookimpl
def register_models(register) -> None:
    register(SegmenterPlugin(
        name="detectron2",
        load=load,
        syntax=SYNTAX,
        example="--model detectron2:sem_seg_R50_FPN.yaml,model_final.pkl,dataset=ade20k_sem_seg_val",
        description="detectron2 model (yacs .yaml or LazyConfig .py) returning sem_seg; classes "
                    "from classes= or the MetadataCatalog of cfg.DATASETS.TEST[0]",
        requires=("detectron2",),
        install=INSTALL,
        reads_classes=True,  # classes= is read by the adapter itself
    ))
