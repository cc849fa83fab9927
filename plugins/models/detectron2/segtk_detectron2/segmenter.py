"""detectron2 adapter (run against detectron2 built from source; see the plugin README).

    cfg = get_cfg(); add_*_config(cfg)           # project hooks: add_config=module:function
    cfg.merge_from_file(CONFIG); cfg.merge_from_list(opts)
    model = build_model(cfg); DetectionCheckpointer(model).load(WEIGHTS); model.eval()
    model([{"image": CHW tensor in cfg.INPUT.FORMAT, 0-255, "height": H, "width": W}, ...])
        -> [{"sem_seg": [C,H,W] scores}, ...]

LazyConfig `.py` files are loaded with LazyConfig.load + instantiate(cfg.model).

Differences from DefaultPredictor, on purpose: images stay float (0-255 scale, not rounded to
uint8, so attack perturbations survive) and the test-time ResizeShortestEdge
(INPUT.MIN_SIZE_TEST / MAX_SIZE_TEST) runs in torch (antialiased bilinear) instead of on
uint8 with PIL/cv2; the model's own normalisation (PIXEL_MEAN/STD), padding and sem_seg
post-processing back to (height, width) are untouched.
"""

from __future__ import annotations

import hashlib
import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from segtk.core import ModelError, Segmenter, convert, labels_from_logits, parse_pairs

HINT = ("syntax: detectron2:CONFIG.yaml,WEIGHTS.pth[,classes=a;b;c|vocab=a;b;c]"
        "[,add_config=module:function][,dataset=NAME][,opts=KEY=VALUE;KEY=VALUE]")


@dataclass
class Spec:
    config: Path
    weights: str
    classes: list[str] | None = None
    add_config: list[str] = field(default_factory=list)  # "module:function", applied in order
    dataset: str | None = None
    opts: list[str] = field(default_factory=list)  # flat KEY, VALUE list for merge_from_list
    vocab: list[str] | None = None  # open-vocabulary class names (text prompts)


def parse(arg: str) -> Spec:
    """'cfg.yaml,w.pth,classes=a;b,add_config=m:f,opts=MODEL.X=1;INPUT.FORMAT=RGB'."""
    parts = [p.strip() for p in arg.split(",")] if arg else []
    if len(parts) < 2 or "=" in parts[0] or "=" in parts[1] or not parts[0] or not parts[1]:
        raise ModelError("detectron2 needs a config file and a weights file", hint=HINT)
    spec = Spec(Path(parts[0]), parts[1])
    options = parse_pairs(parts[2:], "detectron2 option",
                          ["classes", "vocab", "add_config", "dataset", "opts"], error=ModelError, hint=HINT)
    for key, value in options.items():
        if key == "classes":
            spec.classes = convert(value, list[str], key, sep=";", error=ModelError, hint=HINT)
        elif key == "add_config":
            for hook in (h.strip() for h in value.split(";") if h.strip()):
                module, sep, func = hook.partition(":")
                if not sep or not module or not func:
                    raise ModelError(f"add_config must be module:function, got {hook!r}",
                                     hint="e.g. add_config=mask_former:add_mask_former_config")
                spec.add_config.append(hook)
        elif key == "vocab":
            spec.vocab = convert(value, list[str], key, sep=";", error=ModelError, hint=HINT)
            if not spec.vocab:
                raise ModelError("vocab= names no class", hint="e.g. vocab=sky;road;car")
        elif key == "dataset":
            spec.dataset = value
        else:  # opts: merge_from_list reads each value itself
            pairs = parse_pairs([p for p in value.split(";") if p.strip()], "detectron2 opts entry",
                                error=ModelError, hint=HINT)
            spec.opts += [item for pair in pairs.items() for item in pair]
    if spec.vocab and (spec.classes or spec.dataset):
        raise ModelError("vocab= names the classes itself: give it without classes= or dataset=",
                         hint="vocab=a;b;c for open-vocabulary models, classes=a;b;c otherwise")
    return spec


def resize_shortest_edge(height: int, width: int, short: int, max_size: int) -> tuple[int, int]:
    """detectron2's ResizeShortestEdge.get_output_shape (test time: one short-edge length)."""
    if short <= 0:
        return height, width
    scale = short / min(height, width)
    newh, neww = (short, scale * width) if height < width else (scale * height, short)
    if max_size > 0 and max(newh, neww) > max_size:
        scale = max_size / max(newh, neww)
        newh, neww = newh * scale, neww * scale
    return int(newh + 0.5), int(neww + 0.5)


def pack_inputs(images: torch.Tensor, input_format: str = "BGR", min_size: int = 0,
                max_size: int = 0) -> list[dict[str, Any]]:
    """[B,3,H,W] RGB in [0,1] -> detectron2's list of {"image": CHW 0-255 float, height, width}."""
    if input_format not in ("BGR", "RGB"):
        raise ModelError(f"INPUT.FORMAT {input_format!r} is not supported", hint="use BGR or RGB")
    b, _, h, w = images.shape
    x = images.detach().float() * 255.0
    if input_format == "BGR":
        x = x.flip(1)
    size = resize_shortest_edge(h, w, min_size, max_size)
    if size != (h, w):
        x = F.interpolate(x, size=size, mode="bilinear", align_corners=False, antialias=True)
    return [{"image": x[i], "height": h, "width": w} for i in range(b)]


def outputs_to_scores(outputs: Sequence[dict[str, Any]], images: torch.Tensor, name: str) -> torch.Tensor:
    """[{"sem_seg": [C,H,W]}] -> [B,C,H,W] scores at the input size, checked."""
    b, _, h, w = images.shape
    if not isinstance(outputs, (list, tuple)) or len(outputs) != b:
        raise ModelError(f"{name} returned {type(outputs).__name__} of length "
                         f"{len(outputs) if hasattr(outputs, '__len__') else '?'}, expected {b} dicts")
    scores = []
    for i, out in enumerate(outputs):
        sem = out.get("sem_seg") if isinstance(out, dict) else None
        if not isinstance(sem, torch.Tensor) or sem.dim() != 3:
            keys = ", ".join(out) if isinstance(out, dict) else type(out).__name__
            raise ModelError(f"{name}: output {i} has no sem_seg [C,H,W] (has: {keys})",
                             hint="the config must build a semantic segmentation model "
                                  "(e.g. MODEL.META_ARCHITECTURE SemanticSegmentor, MaskFormer with "
                                  "SEMANTIC_ON True)")
        sem = sem.float()
        if sem.shape[-2:] != (h, w):
            sem = F.interpolate(sem[None], size=(h, w), mode="bilinear", align_corners=False)[0]
        scores.append(sem.to(images.device))
    return torch.stack(scores)


class Detectron2Segmenter(Segmenter):
    """Any callable taking detectron2's batched inputs and returning [{"sem_seg": ...}]."""

    def __init__(self, model: Callable, classes: list[str], name: str, input_format: str = "BGR",
                 min_size: int = 0, max_size: int = 0, num_outputs: int | None = None) -> None:
        if not classes:
            raise ModelError(f"{name}: no class list",
                             hint="add classes=a;b;c, or dataset=NAME of a registered dataset "
                                  "whose metadata has stuff_classes")
        if num_outputs is not None and num_outputs != len(classes):
            raise ModelError(f"{name} predicts {num_outputs} classes but {len(classes)} are named",
                             hint="give one name per output class, in id order")
        self.model = model
        self.classes = list(classes)
        self.name = name
        self.input_format = input_format
        self.min_size, self.max_size = int(min_size), int(max_size)

    def logits(self, images: torch.Tensor) -> torch.Tensor:
        inputs = pack_inputs(images, self.input_format, self.min_size, self.max_size)
        with torch.inference_mode():
            outputs = self.model(inputs)
        scores = outputs_to_scores(outputs, images, self.name)
        if scores.shape[1] != len(self.classes):
            raise ModelError(f"{self.name} returned {scores.shape[1]} score channels but "
                             f"{len(self.classes)} classes are named",
                             hint="give one name per output channel, in id order (classes=)")
        return scores

    def predict(self, images: torch.Tensor) -> torch.Tensor:
        if images.shape[0] == 0:
            return torch.empty(0, *images.shape[2:], dtype=torch.long)
        return labels_from_logits(self.logits(images))


def run_hooks(hooks: list[str], cfg: Any) -> None:
    """add_config=module:function hooks (e.g. mask_former:add_mask_former_config)."""
    for hook in hooks:
        module_name, _, func_name = hook.partition(":")
        try:
            func = getattr(importlib.import_module(module_name), func_name)
        except (ImportError, AttributeError) as exc:
            raise ModelError(f"add_config hook {hook!r} not found ({type(exc).__name__}: {exc})",
                             hint="install the project (CATSeg, OVSeg, ODISE, X-Decoder, SEEM, ...) "
                                  "or put it on PYTHONPATH") from exc
        func(cfg)


def metadata_classes(dataset: str | None) -> list[str] | None:
    if not dataset:
        return None
    from detectron2.data import MetadataCatalog

    meta = MetadataCatalog.get(dataset)
    classes = getattr(meta, "stuff_classes", None)
    return list(classes) if classes else None


def load(arg: str) -> Detectron2Segmenter:
    spec = parse(arg)
    if not spec.config.is_file():
        raise ModelError(f"{spec.config}: detectron2 config not found", hint=HINT)
    if "://" not in spec.weights and not Path(spec.weights).is_file():
        raise ModelError(f"{spec.weights}: weights not found",
                         hint="give a local .pth/.pkl (nothing is downloaded at run time)")
    if "://" in spec.weights:
        raise ModelError(f"{spec.weights}: remote weights are not fetched",
                         hint="download the checkpoint once and give its local path")
    from detectron2.checkpoint import DetectionCheckpointer

    name = f"detectron2:{spec.config.name}"
    if spec.config.suffix == ".py":
        from detectron2.config import LazyConfig, instantiate

        if spec.add_config or spec.vocab:
            raise ModelError("add_config= and vocab= apply to yacs .yaml configs",
                             hint="a LazyConfig .py file imports what it needs itself; set its "
                                  "model's vocabulary with opts=")
        cfg = LazyConfig.load(str(spec.config))
        if spec.opts:
            cfg = LazyConfig.apply_overrides(cfg, [f"{k}={v}" for k, v in zip(spec.opts[::2], spec.opts[1::2])])
        model = instantiate(cfg.model).to("cpu").eval()
        DetectionCheckpointer(model).load(spec.weights)
        dataset = spec.dataset or _lazy_test_dataset(cfg)
        input_format = getattr(model, "input_format", "BGR")
        min_size, max_size = _lazy_resize(cfg)
        num = None
    else:
        from detectron2.config import get_cfg
        from detectron2.modeling import build_model

        cfg = get_cfg()
        run_hooks(spec.add_config, cfg)
        cfg.merge_from_file(str(spec.config))
        cfg.merge_from_list(spec.opts + ["MODEL.WEIGHTS", spec.weights, "MODEL.DEVICE", "cpu"])
        if spec.vocab:
            cfg.DATASETS.TEST = (register_vocabulary(spec.vocab),)
        cfg.freeze()
        model = build_model(cfg).eval()
        DetectionCheckpointer(model).load(spec.weights)
        dataset = spec.dataset or (cfg.DATASETS.TEST[0] if cfg.DATASETS.TEST else None)
        input_format = cfg.INPUT.FORMAT
        min_size, max_size = _yacs_resize(cfg)
        num = getattr(getattr(cfg.MODEL, "SEM_SEG_HEAD", None), "NUM_CLASSES", None)
    # classes= and vocab= are taken as given (open-vocabulary models take any list); catalog
    # classes are checked against SEM_SEG_HEAD.NUM_CLASSES; every answer's channel count is
    # checked against the names.
    classes = spec.vocab or spec.classes or metadata_classes(dataset)
    return Detectron2Segmenter(model, classes or [], name, input_format, min_size, max_size,
                               num_outputs=None if spec.classes or spec.vocab else num)


def register_vocabulary(names: list[str]) -> str:
    """Register `names` as the stuff_classes of a dataset named after them, for models that
    read their vocabulary from MetadataCatalog.get(cfg.DATASETS.TEST[0]) when built (OVSeg
    does; segtk_detectron2.tiny.TinyOpenVocabSeg too)."""
    from detectron2.data import MetadataCatalog

    digest = hashlib.sha1("\n".join(names).encode()).hexdigest()[:12]
    dataset = f"segtk_vocab_{digest}"
    meta = MetadataCatalog.get(dataset)
    if getattr(meta, "stuff_classes", None) != names:
        meta.set(stuff_classes=list(names))
    return dataset


def _yacs_resize(cfg: Any) -> tuple[int, int]:
    short = cfg.INPUT.MIN_SIZE_TEST
    short = short[0] if isinstance(short, (list, tuple)) else short
    return int(short), int(cfg.INPUT.MAX_SIZE_TEST)


def _lazy_test_dataset(cfg: Any) -> str | None:
    try:
        names = cfg.dataloader.test.dataset.names
    except AttributeError:
        return None
    return names if isinstance(names, str) else (names[0] if names else None)


def _lazy_resize(cfg: Any) -> tuple[int, int]:
    """The ResizeShortestEdge of a LazyConfig test loader, if it has one."""
    try:
        augs = cfg.dataloader.test.mapper.augmentations
    except AttributeError:
        return 0, 0
    for aug in augs or []:
        short = getattr(aug, "short_edge_length", None)
        if short is not None:
            short = short[0] if isinstance(short, (list, tuple)) else short
            return int(short), int(getattr(aug, "max_size", 0) or 0)
    return 0, 0
