"""Any model object for the Python API: a spec, a `Segmenter`, or a plain `torch.nn.Module`.

A module that maps images to logits [B,K,H,W] becomes a Segmenter with `wrap` (its classes,
normalisation, input size and resize policy as keywords); the API functions take the same
keywords next to `model`, so `segtk.attack(net, data, classes=[...])` works as
`segtk.attack(segtk.wrap(net, classes=[...]), data)`. The wrapper gives logits and gradients,
so white-box attacks (pgd, segpgd, cospgd) run on it too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

import torch
import torch.nn.functional as F

from segtk.core import ModelError, Preprocessing, Segmenter, SegtkError, labels_from_logits

__all__ = ["ModuleSegmenter", "ModelKeywords", "wrap", "RESIZE"]

RESIZE = ("resize", "pad")  # how images meet the module's input size (see wrap)
WRAP_HINT = "e.g. segtk.wrap(net, classes=['road', 'car', ...], mean=(0.485, 0.456, 0.406), " \
            "std=(0.229, 0.224, 0.225)), see docs/python.md"


class ModuleSegmenter(Segmenter):
    """A torch module as a segtk model: images [B,3,H,W] in [0,1] are normalised (mean, std,
    scale, channel order), brought to the module's input size, and its logits brought back
    to the images' size (bilinear), so predictions are at the input resolution."""

    def __init__(self, net: torch.nn.Module, prep: Preprocessing, resize: str = "resize",
                 multiple: int = 1, name: str | None = None) -> None:
        self.net = net.eval()
        self.prep = prep
        self.resize = resize
        self.multiple = multiple
        self.name = name or type(net).__name__
        self.classes = list(prep.classes)
        self._outputs = 0  # channels of the last logits (0: none yet)
        param = next(iter(net.parameters()), None)
        self.device = param.device if param is not None else torch.device("cpu")

    @property
    def num_outputs(self) -> int:
        """The channels of its last logits (a module may have outputs past its classes, e.g.
        a void channel); the classes before the first call."""
        return self._outputs or self.num_classes

    def _forward(self, images: torch.Tensor) -> torch.Tensor:
        if images.dim() != 4 or images.shape[1] != 3:
            raise ModelError(f"{self.name} expects images [B,3,H,W], got {tuple(images.shape)}")
        h, w = images.shape[-2:]
        x = self.prep.normalise(images.to(self.device, torch.float32))
        pad_h, pad_w = -x.shape[-2] % self.multiple, -x.shape[-1] % self.multiple
        if pad_h or pad_w:
            x = F.pad(x, (0, pad_w, 0, pad_h), mode="replicate")
        out = self.net(x)
        if isinstance(out, dict):  # torchvision's segmentation models: {"out": ...}
            out = out["out"] if "out" in out else next(iter(out.values()))
        if isinstance(out, tuple | list):
            out = out[0]
        if not isinstance(out, torch.Tensor) or out.dim() != 4 or out.shape[0] != images.shape[0]:
            got = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
            raise ModelError(f"{self.name} returned {got}, expected logits [B,K,H,W]",
                             hint="wrap a module whose forward returns per-pixel class scores")
        if pad_h or pad_w:  # crop the padding back, at the logits' own scale
            sh, sw = out.shape[-2] / x.shape[-2], out.shape[-1] / x.shape[-1]
            out = out[..., :round((x.shape[-2] - pad_h) * sh), :round((x.shape[-1] - pad_w) * sw)]
        self._outputs = int(out.shape[1])
        if tuple(out.shape[-2:]) != (h, w):
            out = F.interpolate(out, size=(h, w), mode="bilinear", align_corners=False)
        return out

    def logits(self, images: torch.Tensor) -> torch.Tensor:
        with torch.inference_mode():
            return self._forward(images)

    def differentiable_logits(self, images: torch.Tensor) -> torch.Tensor:
        return self._forward(images)

    def predict(self, images: torch.Tensor) -> torch.Tensor:
        return labels_from_logits(self.logits(images))


def wrap(net: torch.nn.Module, classes: Sequence[str] | None = None, *,
         mean: Sequence[float] | None = None, std: Sequence[float] | None = None,
         scale: float = 1.0, bgr: bool = False, size: tuple[int, int] | None = None,
         resize: str = "resize", multiple: int = 1, name: str | None = None) -> ModuleSegmenter:
    """`net` (images in, logits [B,K,H,W] out) as a segtk model.

    `classes`: the names of its K outputs, in order (required; checked against the data's);
    `mean`, `std`: the normalisation it was trained with, (x - mean) / std per channel on
    images in [0,1] (default none); `scale`: a factor applied to the images before it (255
    for a model trained on 0–255 inputs, with mean and std on that scale); `bgr`: feed
    BGR; `size`: (W, H) its input size, or None for any size; `resize`: how images meet
    `size`, "resize" (bilinear) or "pad" (replicate-pad to a multiple of `multiple`, cropped
    back); `multiple`: the stride its input sides must divide by (e.g. 8, 32). Logits at
    another size are resized (bilinear) to the image's; `name` is the model's name in records
    (default: the module's class name).
    """
    if not isinstance(net, torch.nn.Module):
        raise SegtkError(f"segtk.wrap takes a torch.nn.Module, not {type(net).__name__}",
                         hint=WRAP_HINT)
    if not classes:
        raise SegtkError(f"model {type(net).__name__} is a torch.nn.Module without classes=: "
                         "segtk needs the names of its outputs (and mean=, std= if it "
                         "normalises its inputs)", hint=WRAP_HINT)
    if isinstance(classes, str):
        classes = [c.strip() for c in classes.replace(";", ",").split(",") if c.strip()]
    if resize not in RESIZE:
        raise SegtkError(f"unknown resize={resize!r}", hint=f"use one of {', '.join(RESIZE)}")
    if resize == "pad" and size is not None:
        raise SegtkError("resize='pad' pads to multiple=, it takes no size=",
                         hint="use resize='resize' with size=(W, H), or multiple=N")
    if int(multiple) < 1:
        raise SegtkError(f"multiple must be at least 1, got {multiple}")
    prep = Preprocessing(classes=list(classes), mean=_triple(mean, "mean", 0.0),
                         std=_triple(std, "std", 1.0), scale=float(scale), bgr=bool(bgr),
                         size=None if size is None else (int(size[0]), int(size[1])))
    if any(s <= 0 for s in prep.std):
        raise SegtkError(f"std must be positive, got {prep.std}")
    return ModuleSegmenter(net, prep, resize, int(multiple) if resize == "pad" else 1, name)


def _triple(value: Sequence[float] | None, what: str, default: float) -> tuple[float, float, float]:
    if value is None:
        return (default, default, default)
    values = tuple(float(v) for v in value)
    if len(values) != 3:
        raise SegtkError(f"{what} must have 3 values (R, G, B), got {len(values)}",
                         hint=f"e.g. {what}=(0.485, 0.456, 0.406)")
    return (values[0], values[1], values[2])


@dataclass(frozen=True)
class ModelKeywords:
    """`wrap`'s keywords as the API functions take them next to `model` (all None: none)."""

    classes: Sequence[str] | None = None
    mean: Sequence[float] | None = None
    std: Sequence[float] | None = None
    size: tuple[int, int] | None = None

    def given(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)
                if getattr(self, f.name) is not None}

    def apply(self, model: Any) -> Any:
        """`model`, wrapped if it is a torch module; keywords with anything else are refused
        (a spec or a Segmenter knows its classes and normalisation)."""
        given = self.given()
        if isinstance(model, torch.nn.Module):
            return wrap(model, **given)
        if given:
            kind = "a spec" if isinstance(model, str) else type(model).__name__
            verb = "describes" if len(given) == 1 else "describe"
            raise SegtkError(f"{', '.join(f'{k}=' for k in given)} {verb} a torch.nn.Module; "
                             f"model is {kind}, which knows its own",
                             hint="drop them, or pass the module itself (see segtk.wrap)")
        return model
