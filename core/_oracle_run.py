"""The run's side of the oracle (`OracleRun`): what checks, counts, scores and keeps each query
behind the face an attack is given (`segtk.core._oracle.Oracle`), and alone finalises the result
(`OracleRun.result`) and checks the attack afterwards (`OracleRun.overwritten`). See
`segtk.core._oracle` for the guarantees.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from segtk.core._errors import SegtkError
from segtk.core._metrics import LabelConfusion, confusion
from segtk.core._oracle import (
    EPS_TOLERANCE,
    REFERENCES,
    RETURNS,
    AttackResult,
    Gradient,
    LossFn,
    Oracle,
    box,
)
from segtk.core._proxy import Proxy
from segtk.core._segmenter import QueryCounter
from segtk.core._verified import Answer, VerifiedImages


class OracleRun:
    """One attack run's oracle, the run's side of it: it checks every candidate, charges the
    query counter, scores answers with the proxy and keeps each image's result (best
    candidates, history, iterates, checkpoints). The run keeps this object and reads the
    result from it (`result`, after checking the attack left its tensors alone: `overwritten`);
    the attack is handed only its face, `oracle`. `lo` and `hi` are copies of the box the
    oracle projects onto.
    """

    def __init__(
        self,
        counter: QueryCounter,
        clean: torch.Tensor,
        labels: torch.Tensor,
        proxy: Proxy,
        eps_unit: float,
        seeds: list[int],
        checkpoints: tuple[int, ...] = (),
        white_box: bool = False,
        returns: str = "best",
        reference: str = "labels",
    ) -> None:
        if returns not in RETURNS:
            raise SegtkError(f"unknown returns={returns!r}", hint="use best or iterate")
        if reference not in REFERENCES:
            raise SegtkError(f"unknown reference={reference!r}", hint="use labels or prediction")
        self._counter = counter
        self._white_box = white_box
        self._returns = returns
        self._given = clean, labels  # the caller's tensors, for the attack to read
        self._clean, self._labels = clean.clone(), labels.clone()  # what the oracle relies on
        self._proxy = proxy
        self._eps_unit = eps_unit
        self._rngs = [torch.Generator().manual_seed(int(s)) for s in seeds]
        self._checkpoints = tuple(sorted(set(int(c) for c in checkpoints)))
        b = clean.shape[0]
        self._lo, self._hi = box(self._clean, eps_unit)
        self._tolerant: tuple[torch.Tensor, torch.Tensor] | None = None
        self._scratch = torch.empty(0)  # _within's buffer, grown to the largest batch checked
        self._verified = VerifiedImages(self._lo, self._hi, self._labels, proxy.num_classes,
                                        self._ask)
        self._confusion = LabelConfusion(labels, proxy.num_classes, proxy.ignore_index)
        self._best_images = self._clean.clone()
        self._best_scores = torch.full((b,), float("inf"))
        self._best = [float("inf")] * b  # _best_scores as the proxy gave them, for the history
        self._best_labels = torch.zeros(labels.shape, dtype=torch.long, device=labels.device)
        k = proxy.num_classes
        self._best_confusion = torch.zeros(b, k, k + 1, dtype=torch.long)  # of _best_labels
        self._history: list[list[float]] = [[] for _ in range(b)]
        # returns="iterate": each image's declared iterate (the clean image until the first),
        # its proxy, labels and confusion once scored (None: not yet)
        self._iterates = self._clean.clone() if returns == "iterate" else self._clean[:0]
        self._iterate_answers: list[tuple[float, torch.Tensor, torch.Tensor] | None] = [None] * b
        self._clean_labels: list[torch.Tensor | None] = [None] * b  # saves an evaluation pass
        self._snapshots = {c: torch.zeros(b, k, k + 1, dtype=torch.long) for c in self._checkpoints}
        # the best image at each checkpoint: what a run with that budget would store
        self._snapshot_images = {c: torch.empty_like(clean) for c in self._checkpoints}
        # reference="prediction": whether each image's reference (its clean prediction) is
        # known yet; None: the labels given are the reference
        self._referenced: list[bool] | None = [False] * b if reference == "prediction" else None

    @property
    def oracle(self) -> Oracle:
        """The face of this run an attack is given (made on asking: kept here, it would make a
        reference cycle that keeps the run and its images alive after the attack)."""
        return Oracle(self)

    @property
    def clean(self) -> torch.Tensor:
        """The clean images [B,3,H,W], the centres of the ε-balls: the caller's tensor, to read
        and never write (work on a copy)."""
        return self._given[0]

    @property
    def labels(self) -> torch.Tensor:
        """The labels [B,H,W] the proxy scores against: the caller's, read-only. The ground
        truth, or with reference="prediction" each image's clean prediction, known from the
        image's first query on (ignore_index everywhere before it)."""
        return self._given[1]

    @property
    def reference(self) -> str:
        """What the proxy scores against: "labels" (ground truth) or "prediction"."""
        return "labels" if self._referenced is None else "prediction"

    @property
    def eps_unit(self) -> float:
        """ε on the [0,1] scale (8/255 for eps 8)."""
        return self._eps_unit

    @property
    def proxy(self) -> Proxy:
        """The per-image score queries are answered with (its classes and ignore index)."""
        return self._proxy

    @property
    def rngs(self) -> list[torch.Generator]:
        """Image i's random stream is `rngs[i]`: draw only from it, so batches equal single
        images."""
        return self._rngs

    @property
    def checkpoints(self) -> tuple[int, ...]:
        """The budgets (sorted) at which the oracle records each image's result."""
        return self._checkpoints

    @property
    def white_box(self) -> bool:
        """Whether the attack may use `loss_and_grad`."""
        return self._white_box

    @property
    def returns(self) -> str:
        """The result: "best" (the best candidate queried) or "iterate" (the declared one)."""
        return self._returns

    @property
    def verified(self) -> VerifiedImages:
        """The fast path for candidates that differ from the last in a few lines: images made,
        changed and queried without a full-image projection or check (see VerifiedImages)."""
        return self._verified

    @property
    def batch_size(self) -> int:
        return self._clean.shape[0]

    @property
    def lo(self) -> torch.Tensor:
        """The lower bounds of the box (ε-ball cut to [0,1]) candidates are projected onto; a
        copy: the oracle projects with its own."""
        return self._lo.clone()

    @property
    def hi(self) -> torch.Tensor:
        """The upper bounds of that box; a copy, like `lo`."""
        return self._hi.clone()

    @property
    def budget(self) -> int:
        return self._counter.budget

    def remaining(self) -> torch.Tensor:
        return self._counter.remaining()

    def active(self, cost: int = 1) -> torch.Tensor:
        """Indices of images with at least `cost` queries left."""
        return torch.nonzero(self.remaining() >= cost).flatten()

    def query(self, images: torch.Tensor, owners: torch.Tensor | None = None) -> Answer:
        """Ask the model about candidates; row k belongs to source image `owners[k]`."""
        if owners is None:
            owners = torch.arange(images.shape[0])
        owners = torch.as_tensor(owners, dtype=torch.long).reshape(-1)
        return self._ask(images, owners)

    def _ask(self, images: torch.Tensor, owners: torch.Tensor) -> Answer:
        """`_answer` after checking every value of `images`: the one door of `query` and of
        verified images, whose version counter a write through `.data` or `.numpy()` skips."""
        self._check_bounds(images, owners)
        return self._answer(images, owners)

    def _answer(self, images: torch.Tensor, owners: torch.Tensor) -> Answer:
        """Charge, ask the model, score and record; `images` must be in bounds."""
        self._query_clean(self._unreferenced([(o, images[r]) for r, o in enumerate(owners.tolist())]))
        labels = self._counter.predict(images, owners)
        if self._referenced is not None:
            self._learn_reference(owners, labels)
        conf = self._confusion(labels, owners)
        scores = self._proxy.score(conf)
        self._record(images, owners, labels, scores, conf)
        return Answer(scores, labels, conf)

    def _unreferenced(self, rows: list[tuple[int, torch.Tensor]]) -> list[int]:
        """With reference="prediction", the images among the (owner, image) `rows` whose
        reference is unknown and whose first row is not their clean image. The reference is
        the answer to an image's clean query; every built-in attack's first query of an image
        is that, so it costs them nothing, and the oracle queries it first for any other."""
        if self._referenced is None:
            return []
        first: dict[int, torch.Tensor] = {}
        for owner, image in rows:
            if not self._referenced[owner]:
                first.setdefault(owner, image)
        return [o for o, image in first.items() if not torch.equal(image, self._clean[o])]

    def _query_clean(self, owners: list[int]) -> None:
        """Query the clean images of `owners` (counted and recorded like an attack's query):
        their reference, before the queries an attack asked for."""
        if owners:
            self._answer(self._clean[owners], torch.tensor(owners, dtype=torch.long))

    def _learn_reference(self, owners: torch.Tensor, labels: torch.Tensor) -> None:
        """Take each new image's reference from the answer to its first row (its clean
        query, see `_unreferenced`): the labels the proxy scores its every query against."""
        assert self._referenced is not None
        k, ignore = self._proxy.num_classes, self._proxy.ignore_index
        for row, owner in enumerate(owners.tolist()):
            if self._referenced[owner]:
                continue
            self._referenced[owner] = True
            self._labels[owner] = labels[row]
            self._given[1][owner] = labels[row]  # what `labels` shows the attack
            self._confusion.base[owner] = LabelConfusion(labels[row][None], k, ignore).base[0]


    def loss_and_grad(self, images: torch.Tensor, loss: LossFn,
                      owners: torch.Tensor | None = None) -> Gradient:
        """One forward and backward pass per candidate, one query each (a white-box attack's
        iteration): `loss(logits, targets)` of the model's logits against the ground-truth
        labels of each row's source image, and its gradient w.r.t. the candidates. Checked,
        charged and recorded (best candidate, history) exactly like `query`."""
        if not self._white_box:
            raise SegtkError("a decision-based attack asked for gradients (Oracle.loss_and_grad)",
                             hint="set white_box = True on the attack class if it is white-box: "
                                  "it then runs only on models that give gradients")
        if owners is None:
            owners = torch.arange(images.shape[0])
        owners = torch.as_tensor(owners, dtype=torch.long).reshape(-1)
        self._check_bounds(images, owners)
        x = images.detach().clone().requires_grad_(True)
        with torch.enable_grad():
            logits = self._counter.gradient_logits(x, owners)
            values = loss(logits, self._labels[owners])
            if not isinstance(values, torch.Tensor) or values.shape != (len(owners),):
                got = tuple(values.shape) if isinstance(values, torch.Tensor) else type(values)
                raise SegtkError(f"the loss must give one value per candidate, shape "
                                 f"({len(owners)},), got {got}")
            (grad,) = torch.autograd.grad(values.sum(), x, allow_unused=True)
        labels = logits.detach().max(dim=1).indices  # finite: checked by the counter
        conf = self._confusion(labels, owners)
        scores = self._proxy.score(conf)
        x = x.detach()
        self._record(x, owners, labels, scores, conf)
        grad = torch.zeros_like(x) if grad is None else grad  # a loss that ignores the image
        return Gradient(scores, labels, values.detach(), grad)

    def query_each(self, images: list[int], candidates: list[torch.Tensor]) -> list[torch.Tensor]:
        """One model call for several images' candidates ([n_i,3,H,W] each).

        Candidates are projected onto the ε-ball and [0,1], and each image's list is cut to its
        remaining budget (a step that no longer fits is truncated, never over-spent). Returns
        each image's scores, in order.
        """
        # an image's reference query first, so that the cut below counts it
        self._query_clean(self._unreferenced(
            [(i, torch.clamp(c[0], self._lo[i], self._hi[i])) for i, c in zip(images, candidates)
             if len(c)]))
        remaining = self.remaining().tolist()
        candidates = [c[: remaining[i]] for i, c in zip(images, candidates)]
        sizes = [len(c) for c in candidates]
        owners = torch.tensor([i for i, n in zip(images, sizes) for _ in range(n)], dtype=torch.long)
        batch = self._clean.new_empty((sum(sizes), *self._clean.shape[1:]))
        row = 0
        for i, c in zip(images, candidates):  # project straight into the batch: one pass
            torch.clamp(c, self._lo[i], self._hi[i], out=batch[row : row + len(c)])
            row += len(c)
        # projected straight into a batch the attack never sees: in bounds by construction
        return list(self._answer(batch, owners).scores.split(sizes))

    def _check_bounds(self, images: torch.Tensor, owners: torch.Tensor) -> None:
        """Refuse `images` unless every value lies in its row's ε-box and [0,1] (with float32
        slack), whatever path it came by: no version counter or earlier check is trusted. One
        clamp and one comparison over the batch, each image's box a view when the rows are
        consecutive images (as batches and pinned slices are), else row by row."""
        if images.numel() == 0:
            return
        if self._tolerant is None:  # float32 rounding slack, allocated on the first query
            self._tolerant = box(self._clean, self._eps_unit + EPS_TOLERANCE)
        lo, hi = self._tolerant
        rows = owners.tolist()
        first, n = rows[0], len(rows)
        if rows == list(range(first, first + n)):
            ok = self._within(images, lo[first:first + n], hi[first:first + n])
        else:
            ok = all(self._within(images[r], lo[o], hi[o]) for r, o in enumerate(rows))
        if not ok:
            gap = (images.detach() - self._clean[owners]).abs().amax()
            raise SegtkError(
                f"attack produced a candidate outside the ε-ball or [0,1] "
                f"(L∞ = {float(gap) * 255:.3f}/255, ε = {self._eps_unit * 255:.3f}/255)",
                hint="project candidates with segtk.core.project before querying",
            )

    def _within(self, x: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor) -> bool:
        """lo <= x <= hi everywhere: x clamped into one reused buffer equals x (NaN equals
        nothing). Compared by numpy on CPU: torch.equal costs 5x the clamp there."""
        x = x.detach()  # (a white-box attack's candidates may carry a graph)
        dtype = torch.result_type(x, lo)
        if self._scratch.numel() < x.numel() or self._scratch.dtype != dtype:
            self._scratch = torch.empty(x.numel(), dtype=dtype, device=lo.device)
        clamped = torch.clamp(x, lo, hi, out=self._scratch[: x.numel()].view(x.shape))
        if clamped.device.type == "cpu" and x.device.type == "cpu" and x.dtype == dtype \
                and dtype in (torch.float32, torch.float64, torch.float16):
            return bool(np.array_equal(clamped.numpy(), x.numpy()))
        return torch.equal(clamped, x)  # on a GPU, or a dtype numpy lacks (bfloat16)

    def _record(self, images, owners, labels, scores, conf) -> None:
        counts = self._counter.counts.tolist()
        owner_list = owners.tolist()
        per_owner: dict[int, int] = {}
        for owner in owner_list:
            per_owner[owner] = per_owner.get(owner, 0) + 1
        # Rows of one image are recorded in order, as if they had been queried one by one.
        seen: dict[int, int] = {}
        for row, (owner, score) in enumerate(zip(owner_list, scores.tolist())):
            seen[owner] = seen.get(owner, 0) + 1
            if not self._history[owner] and torch.equal(images[row], self._clean[owner]):
                self._clean_labels[owner] = labels[row].clone()  # the attack gets `labels`
            query_no = counts[owner] - per_owner[owner] + seen[owner]
            if score < self._best[owner]:
                self._best[owner] = score
                self._best_scores[owner] = score
                self._best_images[owner] = images[row]
                self._best_labels[owner] = labels[row]
                self._best_confusion[owner] = conf[row]
            if self._returns == "best":
                self._history[owner].append(self._best[owner])
            else:
                self._history[owner].append(self._iterate_answer(owner, images[row], labels[row],
                                                                float(score), conf[row])[0])
            if query_no in self._snapshots:
                self._snapshot(query_no, owner)

    def _snapshot(self, budget: int, owner: int) -> None:
        """Checkpoint `budget` of image `owner` holds its current result."""
        if self._returns == "best":
            self._snapshots[budget][owner] = self._best_confusion[owner]
            self._snapshot_images[budget][owner] = self._best_images[owner]
        else:
            self._snapshots[budget][owner] = self._iterate_answer(owner)[2]
            self._snapshot_images[budget][owner] = self._iterates[owner]

    def set_iterate(self, images: torch.Tensor, owners: torch.Tensor | None = None) -> None:
        """Declare `images` (row k: an iterate of source image `owners[k]`) as the points the
        attack's optimisation has reached, after its last query. Checked like a query (ε-ball
        and [0,1]) but not charged: with returns="iterate" the oracle scores each one with an
        evaluation pass the attack never sees, and it becomes the image's result, in its
        history and at the checkpoint of its last query; with returns="best" it is ignored."""
        if owners is None:
            owners = torch.arange(images.shape[0])
        owners = torch.as_tensor(owners, dtype=torch.long).reshape(-1)
        self._check_bounds(images, owners)
        if self._returns != "iterate" or images.shape[0] == 0:
            return
        if self._referenced is not None and not all(self._referenced[o] for o in owners.tolist()):
            raise SegtkError("set_iterate was given an iterate of an image not queried yet: "
                             "with reference=prediction it has nothing to be scored against",
                             hint="query the clean image first (its answer is the reference)")
        if len(set(owners.tolist())) != len(owners):
            raise SegtkError("set_iterate was given two iterates of one image",
                             hint="declare one iterate per source image")
        labels = self._counter.evaluate(images)
        conf = self._confusion(labels, owners)
        scores = self._proxy.score(conf).tolist()
        counts = self._counter.counts.tolist()
        for row, owner in enumerate(owners.tolist()):
            self._iterates[owner] = images[row]
            self._iterate_answers[owner] = (scores[row], labels[row], conf[row])
            if self._history[owner]:  # the result after the image's last query
                self._history[owner][-1] = scores[row]
            if counts[owner] in self._snapshots:
                self._snapshot(counts[owner], owner)

    def _iterate_answer(self, owner: int, row: torch.Tensor | None = None,
                        labels: torch.Tensor | None = None, score: float = 0.0,
                        conf: torch.Tensor | None = None) -> tuple[float, torch.Tensor, torch.Tensor]:
        """The proxy, labels and confusion of image `owner`'s iterate: known once scored; a
        queried candidate (`row` with its answer) that is the iterate itself scores it for free,
        else one evaluation pass does (only the clean image before any query of it)."""
        known = self._iterate_answers[owner]
        if known is not None:
            return known
        if row is not None and labels is not None and conf is not None \
                and torch.equal(row, self._iterates[owner]):
            answer = (score, labels.clone(), conf)  # the attack got `labels`: keep a copy
        else:
            found = self._counter.evaluate(self._iterates[owner][None])
            counted = self._confusion(found, torch.tensor([owner]))
            answer = (float(self._proxy.score(counted)[0]), found[0], counted[0])
        self._iterate_answers[owner] = answer
        return answer

    def overwritten(self) -> list[str]:
        """The oracle's tensors ("clean", "labels") an attack wrote to, each put back as it was
        (they are the caller's; being properties, they cannot be replaced). One comparison
        each, once per attack: nothing per query."""
        found = []
        for name, given, kept in (("clean", self._given[0], self._clean),
                                  ("labels", self._given[1], self._labels)):
            if not _same(given, kept):
                given.copy_(kept)
                found.append(name)
        return found

    def result(self) -> AttackResult:
        # Images that stopped early (or a budget below a checkpoint) keep their final state.
        counts = self._counter.counts.tolist()
        if self._returns == "iterate":
            answers = [self._iterate_answer(i) if counts[i] else None
                       for i in range(self.batch_size)]
            images = self._iterates
            scores = torch.tensor([a[0] if a else math.inf for a in answers])
            labels = torch.stack([a[1] if a else self._best_labels[i]
                                  for i, a in enumerate(answers)])
            final = torch.stack([a[2] if a else self._best_confusion[i]
                                 for i, a in enumerate(answers)])
        else:
            images, scores, labels = self._best_images, self._best_scores, self._best_labels
            final = self._best_confusion.clone()
        for i in range(self.batch_size):
            if counts[i] == 0:  # never queried: the (all-zero) labels it holds
                final[i] = confusion(labels[i], self._labels[i], self._proxy.num_classes,
                                     self._proxy.ignore_index)[0]
        for c, snap in self._snapshots.items():
            for i in range(self.batch_size):
                if counts[i] < c:
                    snap[i] = final[i]
                    self._snapshot_images[c][i] = images[i]
        return AttackResult(
            images=images,
            scores=scores,
            predictions=labels,
            queries=self._counter.counts.clone(),
            history=self._history,
            checkpoints=self._snapshots,
            checkpoint_images=self._snapshot_images,
            clean_predictions=(torch.stack(self._clean_labels)  # type: ignore[arg-type]
                               if all(c is not None for c in self._clean_labels) else None),
            stopped=["time" if self._counter.timed_out and n < self.budget else "" for n in counts],
        )


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal values, NaN equal to NaN (a caller's NaN is not the attack's doing). On CPU by
    numpy, 5x faster than torch.equal."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    try:
        equal = bool(np.array_equal(a.detach().numpy(), b.detach().numpy()))
    except (TypeError, RuntimeError):  # on a GPU, or a dtype numpy lacks (bfloat16)
        equal = torch.equal(a, b)
    return equal or bool(((a == b) | (a.isnan() & b.isnan())).all())
