"""CosPGD (Agnihotri, Jung and Keuper, ICML 2024), untargeted, L∞: PGD on the per-pixel
cross-entropy, each pixel weighted by the cosine similarity of the model's class distribution
to the one-hot label,

    L_cos(x_t) = (1/(H·W)) · Σ_i cos(ψ(f(x_t)_i), 1hot(y_i)) · CE(f(x_t)_i, y_i),

so pixels that are already wrong (low similarity) weigh little and those still right weigh
most. ψ is the softmax, as in the authors' code (`cospgd_scale` of their `cospgd` package;
`distribution=sigmoid` gives the element-wise sigmoid instead), and the weight is a constant
of the gradient (their `cossim.detach()`). The weight does not depend on the budget: anytime.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from segtk.core import GradientAttack, PGDParams, SegtkError, pixel_cross_entropy


@dataclass
class CosPGDParams(PGDParams):
    """Knobs of CosPGD (and of the shared PGD loop).

    distribution: ψ, how the logits become the distribution compared with the one-hot label:
        softmax (the authors' code, `cospgd_scale`) or sigmoid (element-wise).
    """

    distribution: str = "softmax"

    def validate(self) -> None:
        super().validate()
        if self.distribution not in ("softmax", "sigmoid"):
            raise SegtkError(f"unknown distribution {self.distribution!r}",
                             hint="use softmax or sigmoid")


def cosine_weight(logits: torch.Tensor, targets: torch.Tensor, distribution: str) -> torch.Tensor:
    """cos(ψ(logits_i), 1hot(y_i)) per pixel [N,H,W], without a gradient (a constant weight)."""
    scores = logits.detach()
    probs = scores.softmax(dim=1) if distribution == "softmax" else scores.sigmoid()
    onehot = F.one_hot(targets, logits.shape[1]).permute(0, 3, 1, 2).to(probs.dtype)
    return F.cosine_similarity(probs, onehot, dim=1)


class CosPGDAttack(GradientAttack[CosPGDParams]):
    """White-box CosPGD (Agnihotri et al. 2024): L∞ PGD, per-pixel CE weighted by cos(ψ(f), 1hot(y))."""

    name = "cospgd"
    Params = CosPGDParams
    anytime = True

    def pixel_loss(self, logits: torch.Tensor, targets: torch.Tensor, iteration: int,
                   iterations: int) -> torch.Tensor:
        p = self.params
        assert isinstance(p, CosPGDParams)
        return cosine_weight(logits, targets, p.distribution) * pixel_cross_entropy(logits, targets)
