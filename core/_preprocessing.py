"""How an exported model (TorchScript, ONNX) wants its input, and the spec options that say so.

x_model = ((x * scale)[RGB or BGR] - mean) / std, resized to `size` (W,H) if set. Spec options:
classes=a;b;c, mean=R;G;B, std=R;G;B, scale=255, bgr (or bgr=false), size=WxH.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

import torch
import torch.nn.functional as F

from segtk.core._errors import ModelError
from segtk.core._params import convert, parse_pairs


@dataclass
class Preprocessing:
    classes: list[str] = field(default_factory=list)
    mean: tuple[float, float, float] = (0.0, 0.0, 0.0)
    std: tuple[float, float, float] = (1.0, 1.0, 1.0)
    scale: float = 1.0
    bgr: bool = False
    size: tuple[int, int] | None = None

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> Preprocessing:
        raw = json.loads(text)
        if not isinstance(raw, dict):
            raise ValueError("segtk metadata must be a JSON object")
        known = {k: v for k, v in raw.items() if k in cls.__dataclass_fields__}
        for key in ("mean", "std", "size"):
            if known.get(key) is not None:
                known[key] = tuple(known[key])
        return cls(**known)

    def normalise(self, images: torch.Tensor) -> torch.Tensor:
        """[B,3,H,W] in [0,1] -> the model's input (float32)."""
        x = images.to(torch.float32) * self.scale
        if self.bgr:
            x = x.flip(1)
        mean = torch.tensor(self.mean, dtype=torch.float32, device=x.device).view(1, 3, 1, 1)
        std = torch.tensor(self.std, dtype=torch.float32, device=x.device).view(1, 3, 1, 1)
        x = (x - mean) / std
        if self.size is not None and tuple(x.shape[-2:]) != self.size[::-1]:
            x = F.interpolate(x, size=self.size[::-1], mode="bilinear", align_corners=False)
        return x


# each option's type; lists and triples are separated by ';' (',' separates the spec's options)
OPTION_KINDS: dict[str, object] = {"classes": list[str], "mean": tuple[float, float, float],
                                   "std": tuple[float, float, float], "scale": float, "bgr": bool,
                                   "size": tuple[int, int]}


def parse_options(options: list[str], adapter: str, hint: str, extra: tuple[str, ...] = ()
                  ) -> tuple[dict[str, object], dict[str, str]]:
    """Spec options -> (Preprocessing overrides, the adapter's own `extra` options as text)."""
    pairs = parse_pairs(options, f"{adapter} option", [*OPTION_KINDS, *extra], flags=("bgr",),
                        error=ModelError)
    override = {key: convert(value, OPTION_KINDS[key], key, sep="x" if key == "size" else ";",
                             error=ModelError, hint=hint)
                for key, value in pairs.items() if key in OPTION_KINDS}
    own = {key: value for key, value in pairs.items() if key not in OPTION_KINDS}
    return override, own
