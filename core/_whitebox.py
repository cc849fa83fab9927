"""L∞ projected gradient descent on segmentation losses: the loop that the white-box reference
attacks (PGD, SegPGD, CosPGD) share, so that each of them is only its per-pixel loss.

The budget counts model passes per image, each a forward and a backward pass through
`Oracle.loss_and_grad` (one query). Pass t evaluates the iterate x_{t−1} and takes its
gradient, so a budget of B runs the papers' T = B − 1 iterations (x_0 is the random start) and
evaluates their output x_T with the last pass, whose gradient no query is left to use. As for
every segtk attack, the result is the best iterate the oracle saw (the papers keep the last).
"""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass
from functools import partial
from typing import TypeVar

import torch
import torch.nn.functional as F

from segtk.core._attack import Attack, AttackParams
from segtk.core._errors import SegtkError
from segtk.core._oracle import Oracle, project, uniform_noise


@dataclass
class PGDParams(AttackParams):
    """Knobs of the L∞ PGD loop that the white-box attacks share (budget: forward and backward
    passes per image; B passes are T = B − 1 iterations plus the evaluation of the last one).

    step: the step size α as a fraction of ε. 0.25 is α = 2/255 at ε = 8/255: Madry et al.'s
        CIFAR-10 PGD (ε = 8, step 2) and torchattacks' PGD default (eps=8/255, alpha=2/255).
    random_start: start from a uniform point of the ε-ball (Madry et al.), not the clean image.
    """

    step: float = 0.25
    random_start: bool = True

    def validate(self) -> None:
        super().validate()
        if not 0 < self.step <= 2:
            raise SegtkError(f"step must be in (0, 2] (a fraction of ε), got {self.step}",
                             hint="e.g. step=0.25 for α = ε/4")


# The params of one gradient attack: PGDParams or a subclass (`CosPGDAttack` has its own).
G = TypeVar("G", bound=PGDParams)


class GradientAttack(Attack[G]):
    """L∞ PGD on a per-pixel loss: x_t = Π_ε(x_{t−1} + α·sign(∇ loss(x_{t−1}))), from a random
    start. Subclasses give `pixel_loss`; the loop, the random start and the projection are here."""

    white_box = True
    Params = PGDParams

    @abstractmethod
    def pixel_loss(self, logits: torch.Tensor, targets: torch.Tensor, iteration: int,
                   iterations: int) -> torch.Tensor:
        """The loss to ascend, per pixel [N,H,W], at iteration t = `iteration` of T =
        `iterations` (t = T + 1 for the last pass, whose gradient is not used). `targets` are
        class ids everywhere: ignored pixels hold 0, and their loss is zeroed afterwards."""

    def attack(self, oracle: Oracle) -> None:
        p = self.params
        assert isinstance(p, PGDParams)
        alpha = p.step * oracle.eps_unit
        clean = oracle.clean.clone()
        x = start(oracle, clean, p.random_start)
        iterations = oracle.budget - 1  # the last pass only evaluates x_T
        ignore = oracle.proxy.ignore_index
        for t in range(1, oracle.budget + 1):
            active = oracle.active()
            if active.numel() == 0:
                return
            loss = partial(self.image_loss, ignore_index=ignore, iteration=t, iterations=iterations)
            grad = oracle.loss_and_grad(x[active], loss, active).grad
            if t <= iterations:
                step = x[active] + alpha * grad.sign()
                x[active] = project(step, clean[active], oracle.eps_unit)

    def image_loss(self, logits: torch.Tensor, labels: torch.Tensor, *, ignore_index: int,
                   iteration: int, iterations: int) -> torch.Tensor:
        """One loss per image: the pixel loss summed over the scored pixels, over H·W (the
        papers' 1/(H·W); a per-image scale leaves the sign of the gradient unchanged)."""
        valid = scored(labels, ignore_index, logits.shape[1])
        targets = torch.where(valid, labels, torch.zeros_like(labels))
        per_pixel = self.pixel_loss(logits, targets, iteration, iterations)
        h, w = labels.shape[-2:]
        return (per_pixel * valid).flatten(1).sum(1) / (h * w)


def start(oracle: Oracle, clean: torch.Tensor, random: bool) -> torch.Tensor:
    """x_0: the clean images, or a uniform point of each one's ε-ball cut to [0,1], drawn from
    that image's own stream (batch-invariant)."""
    if not random or clean.shape[0] == 0:
        return clean.clone()
    noise = [uniform_noise(tuple(c.shape), oracle.eps_unit, rng).to(c.device)
             for c, rng in zip(clean, oracle.rngs)]
    return project(clean + torch.stack(noise), clean, oracle.eps_unit)


def scored(labels: torch.Tensor, ignore_index: int, channels: int) -> torch.Tensor:
    """The pixels a loss may use: labelled with a class the logits have (not `ignore_index`)."""
    return (labels != ignore_index) & (labels >= 0) & (labels < channels)


def pixel_cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Cross-entropy per pixel [N,H,W] (targets must be valid class ids everywhere)."""
    return F.cross_entropy(logits, targets, reduction="none")
