"""The oracle through which every attack talks to the model: the face an attack sees
(`Oracle`) and, behind it, the run's own side (`OracleRun`) that checks, counts and keeps.

An attack never calls a segmenter directly: it calls `Oracle.query`, which checks that every
candidate lies in the ε-ball and in [0,1], charges the query to the `QueryCounter`, scores the
answer with the proxy and keeps, per image, the best (lowest-proxy) candidate seen so far.
Histories, budgets and results are measured in one place instead of in each attack.

What an attack's result is at a budget is the attack's declaration (`Attack.returns`, which a
run may override with the `returns` parameter): `best`, the best candidate it queried (what
random-search attacks keep anyway), or `iterate`, the point its optimisation had reached (what
gradient-estimation references such as NES, ZO-SignSGD and Bandits return). An attack that
returns its iterate tells the oracle each new one (`Oracle.set_iterate`); until its first
completed step, its iterate is the clean image. The oracle scores each declared iterate with
one evaluation pass that the budget does not count (as the references evaluate their iterate
outside their query count, and as `segtk attack` scores the image it stores) and never shows
that score to the attack.

The forward pass should be the only real cost of a query, so the oracle also offers cheaper
ways in with the same guarantee: `query_each` projects (one pass) instead of checking, and
verified images (`oracle.verified`: `project`, `vertex`, `patch`, `flip`, `pin`, `score`; see
`segtk.core.Verified`) let an attack whose candidates differ from the last one in a few lines
make them for those lines only. Whatever the way in, every value the model is sent has been
checked or projected by the oracle just before: no version counter or earlier check is trusted
with what reaches the model.

White-box attacks (`Attack.white_box = True`) get one more door, `Oracle.loss_and_grad`: the
gradient of their loss of the model's logits, under the same checks, one query per candidate
for the forward and backward pass together. Only they may use it, and only on a segmenter that
offers `differentiable_logits`; the run refuses anything else before its first query.

The face holds only what an attack needs. What finalises a run (`OracleRun.result`) or checks
the attack afterwards (`OracleRun.overwritten`) stays on the run's side, in `_oracle_run.py`:
`Attack.run` keeps the `OracleRun` and hands the attack its face, `OracleRun.oracle`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

import torch

from segtk.core._proxy import Proxy
from segtk.core._verified import Answer, VerifiedImages

if TYPE_CHECKING:
    from segtk.core._oracle_run import OracleRun

# Slack for float32 rounding when checking the ε-ball; far below one 8-bit grey level.
EPS_TOLERANCE = 1e-6

# What an attack's result is at each budget (see the module docstring).
RETURNS = ("best", "iterate")

# What the proxy scores each query against: the ground truth, or the clean image's predicted
# labels (a label-free attack: all an attacker of a deployed model has).
REFERENCES = ("labels", "prediction")


def project(x: torch.Tensor, clean: torch.Tensor, eps_unit: float) -> torch.Tensor:
    """Project onto the L∞ ball around `clean` and onto the image box [0,1]."""
    return torch.minimum(torch.maximum(x, clean - eps_unit), clean + eps_unit).clamp_(0.0, 1.0)


def box(clean: torch.Tensor, eps_unit: float) -> tuple[torch.Tensor, torch.Tensor]:
    """The per-value bounds (lo, hi) of `project`: the ε-ball cut to [0,1]. Clamping to them is
    `project` in one pass (the two intervals always overlap, so the result is bit-identical)."""
    return (clean - eps_unit).clamp_(0.0, 1.0), (clean + eps_unit).clamp_(0.0, 1.0)


def uniform_noise(shape: tuple[int, ...], half: float, rng: torch.Generator) -> torch.Tensor:
    """The Random attack's step (DLA Eq. 2): uniform in [−half, +half], from one image's stream."""
    return (2 * torch.rand(shape, generator=rng) - 1) * half


class Gradient(NamedTuple):
    """What one forward and backward pass tells a white-box attack (`Oracle.loss_and_grad`)."""

    scores: torch.Tensor  # [N] proxy per candidate, as a query would score it
    labels: torch.Tensor  # [N,H,W] the argmax of the logits
    loss: torch.Tensor  # [N] the attack's loss per candidate (detached)
    grad: torch.Tensor  # [N,3,H,W] d loss / d candidate


# loss(logits [N,C,H,W] with their graph, target labels [N,H,W]) -> one loss per candidate [N]
LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass
class AttackResult:
    """What an attack produced for a batch; counts come from the QueryCounter."""

    images: torch.Tensor  # [B,3,H,W] the results: best candidates or iterates (Attack.returns)
    scores: torch.Tensor  # [B] proxy of those images
    predictions: torch.Tensor  # [B,H,W] the model's labels for them
    queries: torch.Tensor  # [B] queries used, as counted at the segmenter boundary
    history: list[list[float]]  # per image: the result's proxy after each query
    checkpoints: dict[int, torch.Tensor] = field(default_factory=dict)  # budget -> [B,K,K+1]
    checkpoint_images: dict[int, torch.Tensor] = field(default_factory=dict)  # budget -> [B,3,H,W]
    clean_predictions: torch.Tensor | None = None  # [B,H,W] if every image's clean was queried
    # per image: "time" if the time limit ended its attack with queries left, else ""
    stopped: list[str] = field(default_factory=list)


class Oracle:
    """The model as an attack sees it: labels in, proxy out, budget and ε enforced.

    The face of one run's `OracleRun`, holding only what an attack needs: what it may read
    (read-only properties) and its ways to ask (`query`, `query_each`, `verified`,
    `loss_and_grad`) and to declare (`set_iterate`). The result, the history, the query counter
    and the checks of the attack afterwards stay with the run, so no attack can finalise or
    replace its result, widen its bounds, skip its checks or see an iterate's evaluation score.
    Attacks read `clean` and `labels` (the caller's tensors) and never write them: the oracle
    bounds and scores with its own copies, and `Attack.run` refuses an attack that wrote to
    them, so such a bug can neither pass a query outside the ε-ball nor change a recorded clean
    score.
    """

    __slots__ = ("_run",)

    def __init__(self, run: OracleRun) -> None:
        self._run = run

    @property
    def clean(self) -> torch.Tensor:
        """The clean images [B,3,H,W], the centres of the ε-balls: the caller's tensor, to read
        and never write (work on a copy)."""
        return self._run.clean

    @property
    def labels(self) -> torch.Tensor:
        """The labels [B,H,W] the proxy scores against: the caller's, read-only. The ground
        truth, or with reference="prediction" each image's clean prediction, known from the
        image's first query on (ignore_index everywhere before it)."""
        return self._run.labels

    @property
    def reference(self) -> str:
        """What the proxy scores against: "labels" (ground truth) or "prediction"."""
        return self._run.reference

    @property
    def eps_unit(self) -> float:
        """ε on the [0,1] scale (8/255 for eps 8)."""
        return self._run.eps_unit

    @property
    def proxy(self) -> Proxy:
        """The per-image score queries are answered with (its classes and ignore index)."""
        return self._run.proxy

    @property
    def rngs(self) -> list[torch.Generator]:
        """Image i's random stream is `rngs[i]`: draw only from it, so batches equal single
        images."""
        return self._run.rngs

    @property
    def batch_size(self) -> int:
        """How many images the attack attacks together (B)."""
        return self._run.batch_size

    @property
    def budget(self) -> int:
        """Queries per image, the clean image's query included."""
        return self._run.budget

    @property
    def verified(self) -> VerifiedImages:
        """The fast path for candidates that differ from the last in a few lines: images made,
        changed and queried without a full-image projection or check (see Verified)."""
        return self._run.verified

    def active(self, cost: int = 1) -> torch.Tensor:
        """Indices of images with at least `cost` queries left."""
        return self._run.active(cost)

    def query(self, images: torch.Tensor, owners: torch.Tensor | None = None) -> Answer:
        """Ask the model about candidates; row k belongs to source image `owners[k]`. Every
        value must lie in its image's ε-ball and [0,1] (`project` puts it there)."""
        return self._run.query(images, owners)

    def query_each(self, images: list[int], candidates: list[torch.Tensor]) -> list[torch.Tensor]:
        """One model call for several images' candidates ([n_i,3,H,W] each), projected onto the
        ε-ball and [0,1] and each image's list cut to its remaining budget; returns each
        image's scores, in order."""
        return self._run.query_each(images, candidates)

    def loss_and_grad(self, images: torch.Tensor, loss: LossFn,
                      owners: torch.Tensor | None = None) -> Gradient:
        """A white-box attack's iteration: `loss(logits, targets)` of the model's logits and its
        gradient w.r.t. the candidates, one query per candidate (see OracleRun.loss_and_grad)."""
        return self._run.loss_and_grad(images, loss, owners)

    def set_iterate(self, images: torch.Tensor, owners: torch.Tensor | None = None) -> None:
        """Declare `images` (row k: an iterate of source image `owners[k]`) as the points the
        attack's optimisation has reached, after its last query (see OracleRun.set_iterate)."""
        self._run.set_iterate(images, owners)
