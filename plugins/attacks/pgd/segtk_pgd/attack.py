"""PGD (Madry et al. 2018), L∞, on the per-pixel cross-entropy: the white-box reference.

    x_0 = Π_ε(x + U(−ε, ε)),   x_t = Π_ε(x_{t−1} + α·sign(∇_x (1/HW)·Σ_i CE(f(x_{t−1})_i, y_i)))

over the labelled pixels i (the ignore index is left out). The loop, the random start and the
budget (forward and backward passes: B passes = T = B − 1 iterations, then the evaluation of
x_T) are segtk.core.GradientAttack's.
"""

from __future__ import annotations

import torch

from segtk.core import GradientAttack, PGDParams, pixel_cross_entropy


class PGDAttack(GradientAttack[PGDParams]):
    """White-box L∞ PGD on the per-pixel cross-entropy (Madry et al. 2018), random start."""

    name = "pgd"
    Params = PGDParams
    anytime = True  # nothing depends on the budget: a run's first b passes are a b-pass run

    def pixel_loss(self, logits: torch.Tensor, targets: torch.Tensor, iteration: int,
                   iterations: int) -> torch.Tensor:
        return pixel_cross_entropy(logits, targets)
