"""How an exported model (TorchScript, ONNX) wants its input, and the spec options that say so.

x_model = ((x * scale)[RGB or BGR] - mean) / std, resized to `size` (W,H) if set.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

import torch
import torch.nn.functional as F

from segtk.core.errors import ModelError

OPTIONS = "classes=a;b;c, mean=R;G;B, std=R;G;B, scale=255, bgr, size=WxH"


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


def _floats(raw: str, n: int, hint: str) -> tuple[float, ...]:
    try:
        values = tuple(float(v) for v in raw.split(";"))
    except ValueError:
        values = ()
    if len(values) != n:
        raise ModelError(f"expected {n} number{'s' if n > 1 else ''} separated by ';', got {raw!r}",
                         hint=hint)
    return values


def parse_options(options: list[str], adapter: str, hint: str, extra: tuple[str, ...] = ()
                  ) -> tuple[dict[str, object], dict[str, str]]:
    """Spec options -> (Preprocessing overrides, the adapter's own `extra` options as text)."""
    override: dict[str, object] = {}
    own: dict[str, str] = {}
    for option in options:
        key, sep, value = option.partition("=")
        if key == "classes":
            override["classes"] = [c for c in value.split(";") if c]
        elif key in ("mean", "std"):
            override[key] = _floats(value, 3, hint)
        elif key == "scale":
            override["scale"] = _floats(value, 1, hint)[0]
        elif key == "bgr":
            override["bgr"] = value.lower() not in ("0", "false", "no") if sep else True
        elif key == "size":
            w, _, h = value.partition("x")
            if not (w.isdigit() and h.isdigit()):
                raise ModelError(f"size must be WxH, got {value!r}", hint=hint)
            override["size"] = (int(w), int(h))
        elif key in extra:
            own[key] = value
        else:
            names = OPTIONS + "".join(f", {e}=" for e in extra)
            raise ModelError(f"unknown {adapter} option {key!r}", hint=f"options: {names}")
    return override, own
