"""ESPNet behind the segtk `Segmenter` contract: preprocessing, resizing, batching."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from segtk.core import ModuleTrainable, Segmenter, labels_from_logits, save_safetensors
from segtk_espnet.network import ESPNet, flush_denormals_


@dataclass(frozen=True)
class Variant:
    """How a checkpoint was trained: its classes, normalisation (BGR order) and input size."""

    name: str
    classes: tuple[str, ...]
    outputs: int  # model channels; the ones past `classes` (void/background) count as wrong
    mean_bgr: tuple[float, float, float]
    std_bgr: tuple[float, float, float]
    size: tuple[int, int] | None = None  # (H, W) the network runs at; None = the input size


CAMVID = Variant(
    "camvid",
    ("sky", "building", "pole", "road", "pavement", "tree", "signsymbol", "fence", "car",
     "pedestrian", "bicyclist"),
    12,  # + "void"
    (110.3314, 108.4092, 105.0335),
    (72.1252, 72.6885, 69.9026),
)  # fmt: skip

CITYSCAPES = Variant(
    "cityscapes",
    ("road", "sidewalk", "building", "wall", "fence", "pole", "traffic light", "traffic sign",
     "vegetation", "terrain", "sky", "person", "rider", "car", "truck", "bus", "train",
     "motorcycle", "bicycle"),
    20,  # + background
    (72.3923, 82.9089, 73.1584),
    (45.3192, 46.1529, 44.9148),
    size=(512, 1024),
)  # fmt: skip

VARIANTS = {v.name: v for v in (CAMVID, CITYSCAPES)}


class ESPNetSegmenter(Segmenter, ModuleTrainable):
    """ESPNet (p=2, q=8) on RGB [0,1] images, batched, in eval/inference mode.

    Preprocessing as trained: RGB [0,1] -> BGR x*255, minus mean, over std, then over 255.
    CamVid runs at the input size (padded by edge replication to a multiple of 8 and cropped
    back when needed); Cityscapes runs at 1024x512 with bilinear resizing of the input and of
    the logits back to the input size. `net` is used in place: put in eval mode, gradients
    off, and its subnormal weights set to zero (see `flush_denormals_`: bit-identical logits).
    """

    def __init__(
        self,
        net: ESPNet,
        variant: Variant,
        device: str | torch.device = "cpu",
        batch_size: int = 8,
    ) -> None:
        if net.classes != variant.outputs:
            raise ValueError(f"{variant.name} needs {variant.outputs} outputs, net has {net.classes}")
        self.name = f"espnet-{variant.name}"
        self.variant = variant
        self.classes = list(variant.classes)
        self.device = torch.device(device)
        self.batch_size = batch_size
        self.net = net.to(self.device).eval()
        for param in self.net.parameters():
            param.requires_grad_(False)
        self.flushed = flush_denormals_(self.net)  # bit-identical outputs, much faster on CPU
        # NHWC convolutions: about 25% faster on one CPU thread (bench/attack_overhead.py)
        self.net = self.net.to(memory_format=torch.channels_last)  # type: ignore[call-overload]  # torch's Module.to overloads omit memory_format
        # [1,3,1,1] constants in BGR order, made once
        self._mean = torch.tensor(variant.mean_bgr, device=self.device).view(1, 3, 1, 1)
        self._std = torch.tensor(variant.std_bgr, device=self.device).view(1, 3, 1, 1)

    @property
    def num_outputs(self) -> int:
        return self.variant.outputs

    def preprocess(self, images: torch.Tensor) -> torch.Tensor:
        """RGB [0,1] [B,3,H,W] -> the network's input (BGR, normalised, /255)."""
        bgr = images.to(self.device, torch.float32).flip(1) * 255
        return ((bgr - self._mean) / self._std / 255).contiguous(memory_format=torch.channels_last)

    def _forward(self, images: torch.Tensor) -> torch.Tensor:
        h, w = images.shape[-2:]
        x = self.preprocess(images)
        size = self.variant.size
        if size is not None:
            if (h, w) != size:
                x = F.interpolate(x, size=size, mode="bilinear", align_corners=False)
            out = self.net(x)
            if (h, w) != size:
                out = F.interpolate(out, size=(h, w), mode="bilinear", align_corners=False)
            return out
        ph, pw = -h % 8, -w % 8
        if ph or pw:
            x = F.pad(x, (0, pw, 0, ph), mode="replicate")
        return self.net(x)[..., :h, :w]

    def logits(self, images: torch.Tensor) -> torch.Tensor:
        """Scores [B, outputs, H, W] at the input size (the last output is void/background)."""
        _check(images, self.name)
        if images.shape[0] == 0:
            return torch.empty(0, self.num_outputs, *images.shape[2:], device=self.device)
        with torch.inference_mode(not self.training):  # train mode keeps the graph
            chunks = [self._forward(part) for part in images.split(self.batch_size)]
        return chunks[0] if len(chunks) == 1 else torch.cat(chunks)

    def differentiable_logits(self, images: torch.Tensor) -> torch.Tensor:
        """`logits` with the graph back to `images`, in eval mode: for white-box attacks."""
        _check(images, self.name)
        if images.shape[0] == 0:
            return torch.empty(0, self.num_outputs, *images.shape[2:], device=self.device)
        chunks = [self._forward(part) for part in images.split(self.batch_size)]
        return chunks[0] if len(chunks) == 1 else torch.cat(chunks)

    def predict(self, images: torch.Tensor) -> torch.Tensor:
        _check(images, self.name)
        if images.shape[0] == 0:
            return torch.empty(0, *images.shape[2:], dtype=torch.long, device=self.device)
        with torch.inference_mode():
            labels = [labels_from_logits(self._forward(p)) for p in images.split(self.batch_size)]
        return labels[0] if len(labels) == 1 else torch.cat(labels)

    # --- Trainable (segtk train) ---------------------------------------------------------------

    @property
    def trainable_module(self) -> torch.nn.Module:
        return self.net

    def train(self, mode: bool = True) -> ESPNetSegmenter:
        """Train mode: BatchNorm uses batch statistics, gradients flow, `logits` keeps the graph."""
        super().train(mode)
        for param in self.net.parameters():
            param.requires_grad_(mode)
        return self

    def save(self, directory: str | Path) -> str:
        """DIR/model.safetensors (the published checkpoint's keys): `espnet:VARIANT=PATH`."""
        path = Path(directory) / "model.safetensors"
        save_safetensors(path, self.net.state_dict(), {"variant": self.variant.name})
        return f"espnet:{self.variant.name}={path}"


def _check(images: torch.Tensor, name: str) -> None:
    if images.dim() != 4 or images.shape[1] != 3 or images.shape[2] < 1 or images.shape[3] < 1:
        raise ValueError(f"{name} expects images [B,3,H,W] with H,W >= 1, got {tuple(images.shape)}")
