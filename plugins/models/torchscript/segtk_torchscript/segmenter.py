"""TorchScript adapter. The module maps normalised images [B,3,H,W] to logits [B,C,h,w].

How to normalise and which classes the outputs mean travel inside the file as an extra file
`segtk.json` (written by `save_with_metadata`), or are given in the model spec.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import torch

from segtk.core.errors import ModelError
from segtk.core.segmenter import Segmenter, labels_from_logits

META_FILE = "segtk.json"


@dataclass
class Preprocessing:
    """x_model = ((x * scale)[channels] - mean) / std, optionally resized to `size` (W,H)."""

    classes: list[str] = field(default_factory=list)
    mean: tuple[float, float, float] = (0.0, 0.0, 0.0)
    std: tuple[float, float, float] = (1.0, 1.0, 1.0)
    scale: float = 1.0
    bgr: bool = False
    size: tuple[int, int] | None = None


class TorchScriptSegmenter(Segmenter):
    def __init__(self, module: torch.jit.ScriptModule, prep: Preprocessing, name: str) -> None:
        if not prep.classes:
            raise ModelError(
                f"{name}: no class list",
                hint="save the model with save_with_metadata(...) or add classes=a;b;c to the spec",
            )
        self.module = module.eval()
        self.prep = prep
        self.name = name
        self.classes = list(prep.classes)
        self._mean = torch.tensor(prep.mean).view(1, 3, 1, 1)
        self._std = torch.tensor(prep.std).view(1, 3, 1, 1)

    def logits(self, images: torch.Tensor) -> torch.Tensor:
        h, w = images.shape[-2:]
        x = images * self.prep.scale
        if self.prep.bgr:
            x = x.flip(1)
        x = (x - self._mean) / self._std
        if self.prep.size is not None:
            x = torch.nn.functional.interpolate(x, size=self.prep.size[::-1], mode="bilinear",
                                                align_corners=False)
        with torch.inference_mode():
            out = self.module(x)
        if isinstance(out, (tuple, list)):
            out = out[0]
        if isinstance(out, dict):
            out = out.get("out", next(iter(out.values())))
        if out.dim() != 4:
            raise ModelError(f"{self.name} returned shape {tuple(out.shape)}, expected [B,C,h,w]")
        if out.shape[-2:] != (h, w):
            out = torch.nn.functional.interpolate(out, size=(h, w), mode="bilinear", align_corners=False)
        return out

    def predict(self, images: torch.Tensor) -> torch.Tensor:
        return labels_from_logits(self.logits(images))


def save_with_metadata(module: torch.jit.ScriptModule, path: str | Path, prep: Preprocessing) -> None:
    meta = {k: v for k, v in prep.__dict__.items()}
    torch.jit.save(module, str(path), _extra_files={META_FILE: json.dumps(meta)})


def _floats(raw: str) -> tuple[float, float, float]:
    values = tuple(float(v) for v in raw.split(";"))
    if len(values) != 3:
        raise ModelError(f"expected three values separated by ';', got {raw!r}")
    return values  # type: ignore[return-value]


def load(arg: str) -> TorchScriptSegmenter:
    path_str, *options = [part.strip() for part in arg.split(",")] if arg else [""]
    path = Path(path_str)
    if not path.is_file():
        raise ModelError(f"{path}: TorchScript file not found",
                         hint="syntax: torchscript:FILE.pt[,classes=a;b;c]")
    extra = {META_FILE: ""}
    try:
        module = torch.jit.load(str(path), map_location="cpu", _extra_files=extra)
    except Exception as exc:  # torch raises RuntimeError/ValueError for non-TorchScript files
        raise ModelError(f"{path}: not a TorchScript file ({type(exc).__name__})",
                         hint="export with torch.jit.script or torch.jit.trace, then torch.jit.save") from exc
    meta = json.loads(extra[META_FILE]) if extra[META_FILE] else {}
    prep = Preprocessing(**{k: (tuple(v) if isinstance(v, list) and k != "classes" else v)
                            for k, v in meta.items()})
    for option in options:
        key, _, value = option.partition("=")
        if key == "classes":
            prep.classes = [c for c in value.split(";") if c]
        elif key in ("mean", "std"):
            setattr(prep, key, _floats(value))
        elif key == "scale":
            prep.scale = float(value)
        elif key == "bgr":
            prep.bgr = True
        elif key == "size":
            w, _, h = value.partition("x")
            prep.size = (int(w), int(h))
        else:
            raise ModelError(f"unknown torchscript option {key!r}",
                             hint="options: classes=, mean=, std=, scale=, bgr, size=WxH")
    return TorchScriptSegmenter(module, prep, f"torchscript:{path.name}")
