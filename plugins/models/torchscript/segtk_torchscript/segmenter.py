"""TorchScript adapter. The module maps normalised images [B,3,H,W] to logits [B,C,h,w].

How to normalise and which classes the outputs mean travel inside the file as an extra file
`segtk.json` (written by `save_with_metadata`), or are given in the model spec.
"""

from __future__ import annotations

from pathlib import Path

import torch

from segtk.core import ModelError, Preprocessing, Segmenter, labels_from_logits, parse_options

META_FILE = "segtk.json"
HINT = "syntax: torchscript:FILE.pt[,classes=a;b;c][,mean=R;G;B][,std=R;G;B][,scale=255][,bgr][,size=WxH]"


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
        self._outputs = 0  # channels of the last logits (0: none yet)

    @property
    def num_outputs(self) -> int:
        """The channels of its last logits (a file may have outputs past its classes, e.g. a
        void channel); the classes before the first."""
        return self._outputs or self.num_classes

    def logits(self, images: torch.Tensor) -> torch.Tensor:
        h, w = images.shape[-2:]
        x = self.prep.normalise(images)
        with torch.inference_mode():
            out = self.module(x)
        if isinstance(out, (tuple, list)):
            out = out[0]
        if isinstance(out, dict):
            out = out.get("out", next(iter(out.values())))
        if out.dim() != 4:
            raise ModelError(f"{self.name} returned shape {tuple(out.shape)}, expected [B,C,h,w]")
        self._outputs = int(out.shape[1])
        if out.shape[-2:] != (h, w):
            out = torch.nn.functional.interpolate(out, size=(h, w), mode="bilinear", align_corners=False)
        return out

    def predict(self, images: torch.Tensor) -> torch.Tensor:
        return labels_from_logits(self.logits(images))


def save_with_metadata(module: torch.jit.ScriptModule, path: str | Path, prep: Preprocessing) -> None:
    torch.jit.save(module, str(path), _extra_files={META_FILE: prep.to_json()})


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
    prep = Preprocessing.from_json(extra[META_FILE]) if extra[META_FILE] else Preprocessing()
    override, _ = parse_options(options, "torchscript", HINT)
    for key, value in override.items():
        setattr(prep, key, value)
    return TorchScriptSegmenter(module, prep, f"torchscript:{path.name}")
