"""SegPGD (Gu, Zhao, Tresp and Torr, ECCV 2022), L∞: PGD whose loss splits the pixels the
current iterate classifies correctly (P^T) from those it already gets wrong (P^F),

    L(x_t) = (1 − λ(t))/(H·W) · Σ_{j ∈ P^T} CE_j  +  λ(t)/(H·W) · Σ_{k ∈ P^F} CE_k,
    λ(t) = (t − 1)/(2T),

so the first iterations push only the pixels still right (λ(1) = 0) and the weight of the
wrong ones grows towards one half. Iteration t takes the gradient at x_{t−1}; P^T and P^F are
the argmax of the logits at x_{t−1} against the ground truth (ignored pixels are in neither).
The schedule needs T, so a run depends on its budget (T = B − 1): not anytime.
"""

from __future__ import annotations

import torch

from segtk.core import GradientAttack, PGDParams, pixel_cross_entropy


def segpgd_lambda(iteration: int, iterations: int) -> float:
    """λ(t) = (t − 1)/(2T); 0 when there is no iteration to weight (T = 0)."""
    return (iteration - 1) / (2 * iterations) if iterations > 0 else 0.0


class SegPGDAttack(GradientAttack[PGDParams]):
    """White-box SegPGD (Gu et al. 2022): L∞ PGD, loss split into right and wrong pixels by λ(t)."""

    name = "segpgd"
    Params = PGDParams
    anytime = False  # λ(t) = (t − 1)/(2T) depends on the budget

    def pixel_loss(self, logits: torch.Tensor, targets: torch.Tensor, iteration: int,
                   iterations: int) -> torch.Tensor:
        lam = segpgd_lambda(iteration, iterations)
        right = logits.detach().argmax(dim=1) == targets
        weight = torch.where(right, 1.0 - lam, lam).to(logits.dtype)  # ignored pixels: zeroed later
        return weight * pixel_cross_entropy(logits, targets)
