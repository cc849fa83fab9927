"""LPIPS (Zhang et al., 2018; the `lpips` package, version 0.1, VGG variant) in plain torch,
without torchvision: VGG16's convolutional layers, the activations after relu1_2, relu2_2,
relu3_3, relu4_3 and relu5_3 normalised over channels, their squared differences weighted per
channel by LPIPS's learned 1x1 heads, upsampled to the image and summed: a distance map, whose
mean over the image is LPIPS (its `spatial=True` form).

The weights come from one safetensors file: `features.N.weight/bias` as in torchvision's
`vgg16().features` (N = 0, 2, 5, ...; see README for making the file) and `linK.model.1.weight`
(K = 0..4, shape [1, C, 1, 1]) as in lpips' `weights/v0.1/vgg.pth`. Layer widths are read from
the file, so a test can build a narrow network of the same layout.
"""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors.torch import load_file
from torch import nn

from segtk.core import PluginError

# VGG16 `features`: the indices of its convolutions (each followed by a ReLU) and max-pools.
CONVS = (0, 2, 5, 7, 10, 12, 14, 17, 19, 21, 24, 26, 28)
POOLS = (4, 9, 16, 23)
TAPS = (3, 8, 15, 22, 29)  # relu1_2, relu2_2, relu3_3, relu4_3, relu5_3
# lpips' ScalingLayer: inputs in [-1, 1] shifted and scaled to ImageNet statistics.
SHIFT = (-0.030, -0.088, -0.188)
SCALE = (0.458, 0.448, 0.450)


def read_weights(path: str | Path, option: str = "masked-lpips.weights") -> dict[str, torch.Tensor]:
    """The tensors of the safetensors file at `path`, checked to hold every LPIPS-VGG key."""
    file = Path(str(path)).expanduser()
    if not str(path).strip() or not file.is_file():
        raise PluginError(f"metric masked-lpips: no weights file {option}={str(path)!r}",
                          hint=f"pass {option}=FILE.safetensors (VGG16 features and LPIPS v0.1 "
                               "heads; the plugin's README says how to make it)")
    try:
        state = load_file(str(file))
    except Exception as exc:  # safetensors raises its own error types for a bad file
        raise PluginError(f"metric masked-lpips: cannot read {file} ({exc})",
                          hint="a .safetensors file written by safetensors.torch.save_file") from exc
    wanted = [f"features.{i}.{p}" for i in CONVS for p in ("weight", "bias")]
    wanted += [f"lin{k}.model.1.weight" for k in range(len(TAPS))]
    missing = [k for k in wanted if k not in state]
    if missing:
        raise PluginError(f"metric masked-lpips: {file} lacks {len(missing)} LPIPS-VGG tensors "
                          f"(first: {missing[0]})",
                          hint="keys features.N.weight/bias (torchvision vgg16().features) and "
                               "linK.model.1.weight (lpips v0.1 vgg.pth)")
    return state


class LpipsNet(nn.Module):
    """LPIPS-VGG built from its weights (`read_weights`); `forward(a, b)` takes two uint8-range
    float batches [B,3,H,W] and returns the distance map [B,1,H,W]."""

    def __init__(self, state: dict[str, torch.Tensor]) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        for i in range(TAPS[-1] + 1):
            if i in CONVS:
                weight = state[f"features.{i}.weight"]
                conv = nn.Conv2d(weight.shape[1], weight.shape[0], weight.shape[2],
                                 padding=weight.shape[2] // 2)
                conv.weight = nn.Parameter(weight.float().clone())
                conv.bias = nn.Parameter(state[f"features.{i}.bias"].float().clone())
                layers.append(conv)
            elif i in POOLS:
                layers.append(nn.MaxPool2d(2, 2))
            else:
                layers.append(nn.ReLU())
        self.features = nn.Sequential(*layers)
        self.heads = [state[f"lin{k}.model.1.weight"].float() for k in range(len(TAPS))]
        self.eval()

    def taps(self, x: torch.Tensor) -> list[torch.Tensor]:
        out = []
        for i, layer in enumerate(self.features):
            x = layer(x)
            if i in TAPS:
                out.append(x)
        return out

    @torch.no_grad()
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        size = a.shape[-2:]
        shift, scale = (torch.tensor(v, device=a.device).view(1, 3, 1, 1) for v in (SHIFT, SCALE))
        fa, fb = (self.taps((x / 127.5 - 1 - shift) / scale) for x in (a, b))
        total = torch.zeros(a.shape[0], 1, *size, device=a.device)
        for head, xa, xb in zip(self.heads, fa, fb, strict=True):
            na = xa / (xa.pow(2).sum(1, keepdim=True).sqrt() + 1e-10)
            nb = xb / (xb.pow(2).sum(1, keepdim=True).sqrt() + 1e-10)
            layer = F.conv2d((na - nb) ** 2, head.to(a.device))
            total += F.interpolate(layer, size=size, mode="bilinear", align_corners=False)
        return total
