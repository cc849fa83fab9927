"""MMSegmentation 1.x adapter.

What `mmseg.apis.inference_model` does, batched and in float:

1. the test pipeline's `Resize` (scale + keep_ratio, or scale_factor) — here in torch
   (bilinear, like mmcv's cv2 INTER_LINEAR) on float images instead of uint8, so attack
   perturbations are not rounded away; images enter in the pipeline's BGR order, 0-255;
2. the model's own `data_preprocessor` (bgr_to_rgb, mean/std, test-time padding) and
   `test_step` (whole or slide inference, crop of the padding, resize back to the input
   size): labels are its `pred_sem_seg`, logits its `seg_logits`.

The checkpoint is loaded with `torch.load(weights_only=True)` unless the spec says `trust`
(OpenMMLab training checkpoints that carry a pickled message hub need it); classes come from
`meta.dataset_meta.classes` (mmseg 1.x), `meta.CLASSES` (0.x), the spec, or the config's
test dataset.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from segtk.core import ModelError, Segmenter, convert, parse_pairs

HINT = "syntax: mmseg:CONFIG.py,CHECKPOINT.pth[,classes=a;b;c][,opts=KEY=VALUE;KEY=VALUE][,trust]"


@dataclass
class Spec:
    config: Path
    checkpoint: Path
    classes: list[str] | None = None
    options: dict[str, Any] = field(default_factory=dict)  # cfg_options for Config.merge_from_dict
    trust: bool = False


def parse(arg: str) -> Spec:
    parts = [p.strip() for p in arg.split(",")] if arg else []
    if len(parts) < 2 or not parts[0] or not parts[1] or "=" in parts[0] or "=" in parts[1]:
        raise ModelError("mmseg needs a config file and a checkpoint", hint=HINT)
    spec = Spec(Path(parts[0]), Path(parts[1]))
    options = parse_pairs(parts[2:], "mmseg option", ["classes", "opts"], flags=["trust"],
                          error=ModelError, hint=HINT)
    if "classes" in options:
        spec.classes = convert(options["classes"], list[str], "classes", sep=";", error=ModelError,
                               hint=HINT)
    if "opts" in options:  # cfg_options: each value a Python literal if it is one ('3', 'True')
        pairs = parse_pairs([p for p in options["opts"].split(";") if p.strip()], "mmseg opts entry",
                            error=ModelError, hint=HINT)
        spec.options = {k: convert(v, Any, k, error=ModelError, hint=HINT) for k, v in pairs.items()}
    spec.trust = convert(options.get("trust", "false"), bool, "trust", error=ModelError, hint=HINT)
    return spec


def classes_from_checkpoint(checkpoint: Mapping[str, Any]) -> list[str] | None:
    """Class names in a checkpoint dict: meta.dataset_meta.classes (1.x) or meta.CLASSES (0.x)."""
    meta = checkpoint.get("meta") if isinstance(checkpoint, Mapping) else None
    if not isinstance(meta, Mapping):
        return None
    dataset_meta = meta.get("dataset_meta")
    if isinstance(dataset_meta, Mapping) and dataset_meta.get("classes"):
        return [str(c) for c in dataset_meta["classes"]]
    if meta.get("CLASSES"):
        return [str(c) for c in meta["CLASSES"]]
    return None


def state_dict_from_checkpoint(checkpoint: Mapping[str, Any]) -> dict[str, torch.Tensor]:
    state = checkpoint.get("state_dict", checkpoint) if isinstance(checkpoint, Mapping) else None
    if not isinstance(state, Mapping) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise ModelError("the checkpoint holds no state_dict of tensors",
                         hint="give a checkpoint saved by MMSegmentation (or {'state_dict': ...})")
    return {k.removeprefix("module."): v for k, v in state.items()}


def find_resize(pipeline: Sequence[Mapping[str, Any]] | None) -> dict[str, Any] | None:
    """The test pipeline's Resize step (None: images go in at their own size)."""
    for step in pipeline or []:
        if step.get("type") in ("Resize", "mmseg.Resize", "mmcv.Resize"):
            return dict(step)
    return None


def resized_shape(height: int, width: int, resize: Mapping[str, Any] | None) -> tuple[int, int]:
    """mmcv.transforms.Resize: (h, w) after the step, as mmcv.rescale_size / imresize compute it."""
    if not resize:
        return height, width
    scale, factor = resize.get("scale"), resize.get("scale_factor")
    if scale is None and factor is None:
        return height, width
    if scale is None:
        fx, fy = (factor, factor) if isinstance(factor, (int, float)) else tuple(factor or ())
        return int(height * fy + 0.5), int(width * fx + 0.5)
    if isinstance(scale, int):
        scale = (scale, scale)
    if resize.get("keep_ratio", False):
        long_edge, short_edge = max(scale), min(scale)
        ratio = min(long_edge / max(height, width), short_edge / min(height, width))
        return int(height * ratio + 0.5), int(width * ratio + 0.5)
    return int(scale[1]), int(scale[0])  # scale is (w, h)


def pack_inputs(images: torch.Tensor, resize: Mapping[str, Any] | None) -> tuple[list[torch.Tensor], list[dict]]:
    """[B,3,H,W] RGB [0,1] -> pipeline-order (BGR) 0-255 float CHW tensors + their metainfo."""
    b, _, h, w = images.shape
    x = images.detach().to("cpu", torch.float32).flip(1) * 255.0  # what LoadImageFromFile gives
    size = resized_shape(h, w, resize)
    if size != (h, w):
        x = F.interpolate(x, size=size, mode="bilinear", align_corners=False)
    meta = {"ori_shape": (h, w), "img_shape": size, "scale_factor": (size[1] / w, size[0] / h),
            "flip": False, "flip_direction": None, "reduce_zero_label": False}
    return [x[i] for i in range(b)], [dict(meta) for _ in range(b)]


class MMSegSegmenter(Segmenter):
    def __init__(self, model, classes: list[str], name: str, resize: dict | None) -> None:
        num = getattr(getattr(model, "decode_head", None), "num_classes", None)
        out_channels = getattr(getattr(model, "decode_head", None), "out_channels", num)
        if not classes:
            raise ModelError(f"{name}: no class list in the checkpoint or config",
                             hint="add classes=a;b;c to the spec")
        if num is not None and num != len(classes) and not (out_channels == 1 and len(classes) == 2):
            raise ModelError(f"{name} predicts {num} classes but {len(classes)} are named",
                             hint="give one name per output class, in id order")
        self.model = model
        self.classes = list(classes)
        self.name = name
        self.resize = resize

    def _run(self, images: torch.Tensor):
        from mmseg.structures import SegDataSample

        inputs, metas = pack_inputs(images, self.resize)
        samples = [SegDataSample(metainfo=m) for m in metas]
        with torch.inference_mode():
            results = self.model.test_step({"inputs": inputs, "data_samples": samples})
        logits = torch.stack([r.seg_logits.data for r in results]).float()
        if not torch.isfinite(logits).all():
            raise ModelError(f"{self.name} returned NaN or infinite scores")
        labels = torch.stack([r.pred_sem_seg.data[0] for r in results]).long()
        return logits.to(images.device), labels.to(images.device)

    def logits(self, images: torch.Tensor) -> torch.Tensor:
        return self._run(images)[0]

    def predict(self, images: torch.Tensor) -> torch.Tensor:
        if images.shape[0] == 0:
            return torch.empty(0, *images.shape[2:], dtype=torch.long)
        return self._run(images)[1]


def _config_classes(cfg) -> list[str] | None:
    """Classes of the config's test dataset: its metainfo, else its class's METAINFO."""
    try:
        dataset = cfg.test_dataloader.dataset
    except AttributeError:
        return None
    meta = dataset.get("metainfo") or {}
    if meta.get("classes"):
        return [str(c) for c in meta["classes"]]
    from mmseg.registry import DATASETS

    cls = DATASETS.get(dataset.get("type", ""))
    classes = getattr(cls, "METAINFO", {}).get("classes") if cls else None
    return [str(c) for c in classes] if classes else None


def load(arg: str) -> MMSegSegmenter:
    spec = parse(arg)
    if not spec.config.is_file():
        raise ModelError(f"{spec.config}: config not found", hint=HINT)
    if not spec.checkpoint.is_file():
        raise ModelError(f"{spec.checkpoint}: checkpoint not found",
                         hint="give a local .pth (nothing is downloaded at run time)")
    from mmengine.config import Config
    from mmengine.model import revert_sync_batchnorm
    from mmengine.runner.checkpoint import load_state_dict
    from mmseg.apis import init_model

    try:
        cfg = Config.fromfile(str(spec.config))
    except Exception as exc:  # mmengine raises many kinds for a bad config
        raise ModelError(f"{spec.config}: unreadable MMSegmentation config ({type(exc).__name__}: {exc})",
                         hint="give a config .py from MMSegmentation 1.x (or its .mim/configs)") from exc
    if spec.options:
        cfg.merge_from_dict(spec.options)
    try:
        checkpoint = torch.load(str(spec.checkpoint), map_location="cpu", weights_only=not spec.trust)
    except Exception as exc:
        trust = "" if spec.trust else " ; if it is a trusted OpenMMLab training checkpoint, add ,trust"
        raise ModelError(f"{spec.checkpoint}: cannot load checkpoint ({type(exc).__name__}: "
                         f"{str(exc).splitlines()[0]})", hint=f"give a torch .pth file{trust}") from exc
    state = state_dict_from_checkpoint(checkpoint)
    model = revert_sync_batchnorm(init_model(cfg, None, device="cpu"))  # no weights yet
    try:
        load_state_dict(model, state, strict=True)
    except RuntimeError as exc:
        raise ModelError(f"{spec.checkpoint} does not fit {spec.config.name}: "
                         f"{str(exc).splitlines()[0][:300]}",
                         hint="use the checkpoint trained with this config") from exc
    model.eval()
    classes = spec.classes or classes_from_checkpoint(checkpoint) or _config_classes(cfg)
    model.dataset_meta = {"classes": tuple(classes or ())}
    pipeline = cfg.get("test_pipeline") or cfg.get("test_dataloader", {}).get("dataset", {}).get("pipeline")
    return MMSegSegmenter(model, classes or [], f"mmseg:{spec.config.stem}", find_resize(pipeline))
