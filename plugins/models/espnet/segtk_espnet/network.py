"""ESPNet (Mehta et al., ECCV 2018), written from the paper; names match the published weights.

Building blocks: CBR (conv-BN-PReLU), BR (BN-PReLU), C (plain bias-free conv), CDilated,
the ESP block (reduce to n = nOut/5 channels, five parallel 3x3 dilated convs with dilation
1, 2, 4, 8, 16, hierarchical feature fusion, concat, optional residual, BN-PReLU) and its
down-sampling variant (strided 3x3 reduce, no residual). The encoder reinforces levels 1 and 2
with the average-pooled input; the light decoder fuses level 3, level 2 and level 1.

The published checkpoints come from PyTorch 0.3, so their BatchNorm layers carry no
`num_batches_tracked` counter: `BatchNorm` below has exactly weight, bias, running_mean and
running_var, so `state_dict()` equals the checkpoint's key list and strict loading works.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

BN_EPS = 1e-3


class BatchNorm(nn.Module):
    """BatchNorm2d(eps=1e-3) without the `num_batches_tracked` buffer of modern PyTorch."""

    running_mean: torch.Tensor
    running_var: torch.Tensor

    def __init__(self, channels: int, eps: float = BN_EPS, momentum: float = 0.1) -> None:
        super().__init__()
        self.eps, self.momentum = eps, momentum
        self.weight = nn.Parameter(torch.ones(channels))
        self.bias = nn.Parameter(torch.zeros(channels))
        self.register_buffer("running_mean", torch.zeros(channels))
        self.register_buffer("running_var", torch.ones(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.batch_norm(
            x, self.running_mean, self.running_var, self.weight, self.bias,
            self.training, self.momentum, self.eps,
        )  # fmt: skip


class CBR(nn.Module):
    """k x k conv (bias-free, 'same' padding) -> BN -> PReLU."""

    def __init__(self, n_in: int, n_out: int, k: int, stride: int = 1) -> None:
        super().__init__()
        self.conv = nn.Conv2d(n_in, n_out, k, stride=stride, padding=(k - 1) // 2, bias=False)
        self.bn = BatchNorm(n_out)
        self.act = nn.PReLU(n_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.bn(self.conv(x)))


class BR(nn.Module):
    """BN -> PReLU."""

    def __init__(self, n_out: int) -> None:
        super().__init__()
        self.bn = BatchNorm(n_out)
        self.act = nn.PReLU(n_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.bn(x))


class C(nn.Module):
    """Plain bias-free k x k conv with 'same' padding (optionally dilated or strided)."""

    def __init__(self, n_in: int, n_out: int, k: int, stride: int = 1, dilation: int = 1) -> None:
        super().__init__()
        pad = (k - 1) // 2 * dilation
        self.conv = nn.Conv2d(
            n_in, n_out, k, stride=stride, padding=pad, dilation=dilation, bias=False
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


CDilated = C  # the dilated 3x3 branches of an ESP block are plain convs with dilation


class ESP(nn.Module):
    """The ESP block: reduce, split-transform with dilations 1..16, HFF, merge.

    `down=True` is the down-sampling variant (strided 3x3 reduce, no residual, BN and PReLU as
    `bn`/`act`); otherwise a 1x1 reduce, the residual add if `add`, and a BR named `bn`.
    """

    DILATIONS = (1, 2, 4, 8, 16)

    def __init__(self, n_in: int, n_out: int, down: bool = False, add: bool = True) -> None:
        super().__init__()
        if n_out < 5:
            raise ValueError(f"an ESP block needs at least 5 output channels, got {n_out}")
        n = n_out // 5
        n1 = n_out - 4 * n
        self.down = down
        self.add = add and not down and n_in == n_out
        self.c1 = C(n_in, n, 3, stride=2) if down else C(n_in, n, 1)
        self.d1 = CDilated(n, n1, 3, dilation=1)
        self.d2 = CDilated(n, n, 3, dilation=2)
        self.d4 = CDilated(n, n, 3, dilation=4)
        self.d8 = CDilated(n, n, 3, dilation=8)
        self.d16 = CDilated(n, n, 3, dilation=16)
        if down:
            self.bn: nn.Module = BatchNorm(n_out)
            self.act = nn.PReLU(n_out)
        else:
            self.bn = BR(n_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        r = self.c1(x)
        # hierarchical feature fusion: add the larger receptive fields cumulatively
        add1 = self.d2(r)
        add2 = add1 + self.d4(r)
        add3 = add2 + self.d8(r)
        add4 = add3 + self.d16(r)
        out = torch.cat([self.d1(r), add1, add2, add3, add4], 1)
        if self.add:
            out = x + out
        out = self.bn(out)
        return self.act(out) if self.down else out


class InputProjection(nn.Module):
    """The input image average-pooled `times` times (3x3, stride 2, pad 1): input reinforcement."""

    def __init__(self, times: int) -> None:
        super().__init__()
        self.times = times

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for _ in range(self.times):
            x = F.avg_pool2d(x, 3, stride=2, padding=1)
        return x


class ESPNetEncoder(nn.Module):
    """ESPNet-C: the encoder with its 1x1 classifier at 1/8 resolution."""

    def __init__(self, classes: int, p: int = 2, q: int = 8) -> None:
        super().__init__()
        self.level1 = CBR(3, 16, 3, stride=2)
        self.sample1 = InputProjection(1)
        self.sample2 = InputProjection(2)
        self.b1 = BR(16 + 3)
        self.level2_0 = ESP(16 + 3, 64, down=True)
        self.level2 = nn.ModuleList([ESP(64, 64) for _ in range(p)])
        self.b2 = BR(128 + 3)
        self.level3_0 = ESP(128 + 3, 128, down=True)
        self.level3 = nn.ModuleList([ESP(128, 128) for _ in range(q)])
        self.b3 = BR(256)
        self.classifier = C(256, classes, 1)

    def features(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """(level-1 output [16], level-1 + pooled input [19], level-2 map [131], level-3 [256])."""
        out0 = self.level1(x)
        out0_cat = self.b1(torch.cat([out0, self.sample1(x)], 1))
        out1_0 = self.level2_0(out0_cat)
        out1 = out1_0
        for layer in self.level2:
            out1 = layer(out1)
        out1_cat = self.b2(torch.cat([out1, out1_0, self.sample2(x)], 1))
        out2_0 = self.level3_0(out1_cat)
        out2 = out2_0
        for layer in self.level3:
            out2 = layer(out2)
        out2_cat = self.b3(torch.cat([out2_0, out2], 1))
        return out0, out0_cat, out1_cat, out2_cat

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x)[-1])


def _up(channels: int) -> nn.ConvTranspose2d:
    return nn.ConvTranspose2d(channels, channels, 2, stride=2, padding=0, bias=False)


class ESPNet(nn.Module):
    """ESPNet with its light decoder. Input height and width must be multiples of 8.

    `l1_concat_pooled`: the decoder's level-1 concat takes the 19-channel "level-1 + pooled
    input" map (True; the CamVid checkpoint) or the 16-channel level-1 output (False; the
    Cityscapes checkpoint).
    """

    def __init__(self, classes: int, p: int = 2, q: int = 8, l1_concat_pooled: bool = True) -> None:
        super().__init__()
        if classes < 5:
            raise ValueError(f"ESPNet's decoder needs at least 5 classes, got {classes}")
        self.classes, self.p, self.q = classes, p, q
        self.l1_concat_pooled = l1_concat_pooled
        self.encoder = ESPNetEncoder(classes, p, q)
        self.level3_C = C(128 + 3, classes, 1)
        self.br = BatchNorm(classes)
        self.conv = CBR((19 if l1_concat_pooled else 16) + classes, classes, 3)
        self.up_l3 = nn.Sequential(_up(classes))
        self.combine_l2_l3 = nn.Sequential(BR(2 * classes), ESP(2 * classes, classes, add=False))
        self.up_l2 = nn.Sequential(_up(classes), BR(classes))
        self.classifier = _up(classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-2] % 8 or x.shape[-1] % 8:
            raise ValueError(f"ESPNet needs height and width divisible by 8, got {tuple(x.shape)}")
        out0, out0_cat, out1_cat, out2_cat = self.encoder.features(x)
        l3 = self.up_l3(self.br(self.encoder.classifier(out2_cat)))
        l2 = self.up_l2(self.combine_l2_l3(torch.cat([self.level3_C(out1_cat), l3], 1)))
        l1 = out0_cat if self.l1_concat_pooled else out0
        return self.classifier(self.conv(torch.cat([l2, l1], 1)))


@dataclass(frozen=True)
class ESPNetConfig:
    classes: int
    p: int
    q: int
    l1_concat_pooled: bool

    def build(self) -> ESPNet:
        return ESPNet(self.classes, self.p, self.q, self.l1_concat_pooled)


def flush_denormals_(module: nn.Module) -> int:
    """Set subnormal weights and buffers to zero, in place; returns how many there were.

    The published checkpoints hold thousands of subnormal values (< 1.2e-38: channels that
    weight decay drove to zero). They change no output (measured: bit-identical logits), but
    x86 arithmetic on subnormals is ~100x slower and they spread through BN and PReLU:
    without this, Cityscapes at 1024x512 runs ~12x slower and CamVid ~2.5x slower on CPU.
    Unlike `torch.set_flush_denormal`, this touches no process-wide (per-thread) FPU state.
    """
    count = 0
    with torch.no_grad():
        for tensor in module.state_dict().values():
            if tensor.is_floating_point():
                tiny = (tensor != 0) & (tensor.abs() < torch.finfo(tensor.dtype).tiny)
                count += int(tiny.sum())
                tensor.masked_fill_(tiny, 0)
    return count


def infer_config(state: Mapping[str, torch.Tensor]) -> ESPNetConfig:
    """Class count, p, q and the level-1 concat variant, read from a checkpoint's keys/shapes.

    Raises KeyError/ValueError for something that is not an ESPNet (with decoder) state dict.
    """
    cls = state["encoder.classifier.conv.weight"]
    classes = int(cls.shape[0])
    l1 = int(state["conv.conv.weight"].shape[1]) - classes
    if l1 not in (16, 19):
        raise ValueError(f"decoder conv takes {l1 + classes} channels: neither 16+C nor 19+C")

    def count(prefix: str) -> int:
        return len({k[len(prefix):].split(".", 1)[0] for k in state if k.startswith(prefix)})

    return ESPNetConfig(classes, count("encoder.level2."), count("encoder.level3."), l1 == 19)
