"""A small encoder-decoder CNN and the `demo` Segmenter around it.

Small on purpose: the README's attack command must run in seconds on a laptop CPU, and the
weights ship inside the package (well under 2 MB).
"""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors.torch import load_file
from torch import nn

from segtk.core import ModelError, ModuleTrainable, Segmenter, labels_from_logits, save_safetensors
from segtk_demo.scenes import CLASSES

WEIGHTS = Path(__file__).resolve().parent / "weights" / "demo.safetensors"
STRIDE = 8  # total downsampling of the encoder; inputs are padded to a multiple of it


def conv_bn(cin: int, cout: int, stride: int = 1, dilation: int = 1) -> nn.Sequential:
    """3x3 conv + BatchNorm + ReLU, the only building block."""
    return nn.Sequential(
        nn.Conv2d(cin, cout, 3, stride, padding=dilation, dilation=dilation, bias=False),
        nn.BatchNorm2d(cout),
        nn.ReLU(inplace=True),
    )


class DemoNet(nn.Module):
    """Three stride-2 stages, dilated context at 1/8, two skip-connected upsampling steps.

    Logits come out at 1/2 resolution and are bilinearly upsampled: cheap, and the scenes'
    thinnest objects (poles) are still a few pixels wide at 1/2.
    """

    def __init__(self, num_classes: int = len(CLASSES), width: int = 16) -> None:
        super().__init__()
        c1, c2, c3 = width, 2 * width, 4 * width
        self.enc1 = nn.Sequential(conv_bn(3, c1, 2), conv_bn(c1, c1))
        self.enc2 = nn.Sequential(conv_bn(c1, c2, 2), conv_bn(c2, c2))
        self.enc3 = nn.Sequential(conv_bn(c2, c3, 2), conv_bn(c3, c3, dilation=2),
                                  conv_bn(c3, c3, dilation=4))
        self.dec2 = conv_bn(c3 + c2, c2)
        self.dec1 = conv_bn(c2 + c1, c1)
        self.head = nn.Conv2d(c1, num_classes, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """[B,3,H,W] in [0,1] with H,W multiples of STRIDE -> logits [B,K,H,W]."""
        x = (x - 0.5) / 0.25
        f1 = self.enc1(x)
        f2 = self.enc2(f1)
        f3 = self.enc3(f2)
        up = F.interpolate(f3, size=f2.shape[-2:], mode="bilinear", align_corners=False)
        d2 = self.dec2(torch.cat([up, f2], 1))
        up = F.interpolate(d2, size=f1.shape[-2:], mode="bilinear", align_corners=False)
        d1 = self.dec1(torch.cat([up, f1], 1))
        out = self.head(d1)
        return F.interpolate(out, size=x.shape[-2:], mode="bilinear", align_corners=False)


def padded_logits(net: nn.Module, images: torch.Tensor) -> torch.Tensor:
    """Run `net` on any H,W: replicate-pad to a multiple of STRIDE, crop the logits back."""
    h, w = images.shape[-2:]
    ph, pw = -h % STRIDE, -w % STRIDE
    if ph or pw:
        images = F.pad(images, (0, pw, 0, ph), mode="replicate")
    return net(images)[..., :h, :w]


def load_net(path: str | Path = WEIGHTS) -> DemoNet:
    """The trained network in eval mode; strict loading so a stale file fails loudly."""

    path = Path(path)
    if not path.is_file():
        raise ModelError(f"{path}: demo weights not found",
                         hint="retrain with `python -m segtk_demo.train --out PATH`")
    net = DemoNet()
    try:
        net.load_state_dict(load_file(str(path)), strict=True)
    except RuntimeError as exc:
        raise ModelError(f"{path}: weights do not fit the demo network ({exc})") from exc
    return net.eval()


class DemoSegmenter(Segmenter, ModuleTrainable):
    """The embedded street-scene model, ready for attacks without any download."""

    name = "demo"
    classes = list(CLASSES)

    def __init__(self, path: str | Path = WEIGHTS) -> None:
        self.net = load_net(path)

    def logits(self, images: torch.Tensor) -> torch.Tensor:
        """Scores [B,8,H,W]. One image per forward: as fast as batching on CPU here, and the
        result for an image never depends on what else is in the batch (oneDNN's batched
        convolutions differ in the last bit), so attacks stay batch-invariant."""
        images = images.to(self.device, torch.float32)
        if images.dim() != 4 or images.shape[1] != 3:
            raise ModelError(f"demo expects images [B,3,H,W], got {tuple(images.shape)}")
        if self.training:  # batched, with the graph: BatchNorm trains on batch statistics
            return padded_logits(self.net, images)
        with torch.inference_mode():
            if images.shape[0] == 0:
                return images.new_zeros(0, len(self.classes), *images.shape[2:])
            return torch.cat([padded_logits(self.net, x[None]) for x in images])

    def predict(self, images: torch.Tensor) -> torch.Tensor:
        return labels_from_logits(self.logits(images))

    def differentiable_logits(self, images: torch.Tensor) -> torch.Tensor:
        """`logits` with the graph back to `images` (eval mode, one image per forward, like
        `logits`): for white-box attacks."""
        images = images.to(self.device, torch.float32)
        if images.dim() != 4 or images.shape[1] != 3:
            raise ModelError(f"demo expects images [B,3,H,W], got {tuple(images.shape)}")
        if images.shape[0] == 0:
            return images.new_zeros(0, len(self.classes), *images.shape[2:])
        return torch.cat([padded_logits(self.net, x[None]) for x in images])

    # --- Trainable (segtk train) ---------------------------------------------------------------

    @property
    def trainable_module(self) -> torch.nn.Module:
        return self.net

    def save(self, directory: str | Path) -> str:
        """DIR/model.safetensors, loaded back by `--model demo:PATH`."""
        path = Path(directory) / "model.safetensors"
        save_safetensors(path, self.net.state_dict())
        return f"demo:{path}"
