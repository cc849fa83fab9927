"""The segmenter contract and the query counter that enforces attack budgets.

Attacks only ever see a `QueryCounter`: it is the single place where queries are counted, so
budgets (and time limits) hold whatever an attack does and reports never trust an attack's
own bookkeeping.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from time import monotonic

import torch

from segtk.core._errors import BudgetExceeded, ModelError, SegtkError


class Segmenter(ABC):
    """A semantic segmentation model seen as a black box.

    Images are float32 RGB in [0,1], shape [B,3,H,W]; labels are int64 [B,H,W] at the input
    resolution. Preprocessing (normalisation, channel order, resizing) lives in the adapter.
    Predicted ids may reach `num_outputs - 1` > `len(classes) - 1` (e.g. a "void" channel):
    metrics count such predictions as wrong. segtk checks every answer against this contract
    (`check_prediction`, `check_gradient_logits`) and refuses one that breaks it.
    """

    name: str = "segmenter"
    classes: list[str] = []
    ignore_index: int = 255
    device: torch.device = torch.device("cpu")

    @property
    def num_classes(self) -> int:
        return len(self.classes)

    @property
    def num_outputs(self) -> int:
        """The model's outputs (channels of its logits): `predict` gives ids 0..num_outputs-1.
        The classes, by default; an adapter whose model has outputs past them (a "void"
        channel, counted as wrong) says how many."""
        return self.num_classes

    def to_device(self, device: torch.device) -> None:
        """Move the model to `device` (`--device`, `device=`): every torch module and tensor
        among its attributes, then `self.device`, where segtk puts the images it sends. An
        adapter holding its weights elsewhere moves them itself, or raises a ModelError if
        they cannot move. One whose model runs elsewhere (a server, onnxruntime) keeps running
        there and answers on the images' device."""
        for name, value in list(vars(self).items()):
            if isinstance(value, torch.nn.Module | torch.Tensor):
                setattr(self, name, value.to(device))
        self.device = device

    @abstractmethod
    def predict(self, images: torch.Tensor) -> torch.Tensor:
        """Per-pixel class ids: the decision, all that a decision-based attack may see."""

    @property
    def has_logits(self) -> bool:
        return type(self).logits is not Segmenter.logits

    def logits(self, images: torch.Tensor) -> torch.Tensor:
        """Per-pixel class scores [B,C,H,W], for tools that need them (pixel filters)."""
        raise NotImplementedError(f"{self.name} gives labels only, no scores")

    @property
    def has_gradients(self) -> bool:
        """Whether the adapter offers `differentiable_logits` (white-box attacks need it): the
        logits with a graph, so a model without `logits` has none either."""
        return self.has_logits and \
            type(self).differentiable_logits is not Segmenter.differentiable_logits

    def differentiable_logits(self, images: torch.Tensor) -> torch.Tensor:
        """`logits(images)` with autograd's graph back to `images`, the model as `predict`
        runs it (eval mode: BatchNorm on running statistics): what white-box attacks
        differentiate. `logits` may run under inference mode for speed; this must not."""
        raise NotImplementedError(f"{self.name} gives no gradients")


@dataclass
class SegmenterPlugin:
    """A `--model NAME:ARG` loader. `load(arg)` returns a ready Segmenter."""

    name: str
    load: Callable[[str], Segmenter]
    syntax: str
    example: str
    description: str = ""
    requires: tuple[str, ...] = ()
    install: str = ""
    convert: Callable[[str, str], None] | None = None  # `segtk models convert NAME IN OUT`
    # True: `load` reads a `classes=a;b;c` option itself (e.g. as prompts); False: segtk takes it
    # out of the spec before `load` and renames the loaded model's classes (count checked)
    reads_classes: bool = False


def labels_from_logits(logits: torch.Tensor) -> torch.Tensor:
    """Argmax over channels, refusing NaN/inf scores instead of silently predicting class 0."""
    lo, hi = torch.aminmax(logits)  # ~10x cheaper than isfinite().all() on CPU
    if not (torch.isfinite(lo) and torch.isfinite(hi)):
        raise ModelError("the model returned NaN or infinite scores")
    return logits.max(dim=1).indices  # first maximum on ties, like argmax, but faster on CPU


def check_prediction(images: torch.Tensor, labels: torch.Tensor,
                     model: Segmenter | str) -> torch.Tensor:
    """Validate the answer of `model` (the segmenter, or only its name): one integer label map
    per image, at the image's size, and, given the segmenter, every id one of its outputs
    (`Segmenter.num_outputs`, at least one per class). An answer that breaks the contract is
    refused, never scored: float ids would be a guess at what the model meant, an id past its
    outputs (or negative) a class it does not have. One min/max pass over the labels."""
    name = model if isinstance(model, str) else model.name
    expected = (images.shape[0], images.shape[2], images.shape[3])
    hint = "predict() must return int64 [B,H,W] at the input resolution"
    if not isinstance(labels, torch.Tensor) or tuple(labels.shape) != expected:
        got = tuple(labels.shape) if isinstance(labels, torch.Tensor) else type(labels).__name__
        raise ModelError(f"model {name} returned labels of shape {got}, expected {expected}",
                         hint=hint)
    if labels.is_floating_point() or labels.is_complex() or labels.dtype == torch.bool:
        raise ModelError(f"model {name} returned labels of type {labels.dtype}, not integer "
                         "class ids", hint=hint)
    if not isinstance(model, str) and labels.numel():
        outputs = _outputs(model)
        lo, hi = (int(v) for v in torch.aminmax(labels))
        if lo < 0 or hi >= outputs:
            raise ModelError(
                f"model {name} returned class ids {lo}..{hi}, outside its {outputs} outputs "
                f"(0..{outputs - 1})",
                hint=f"{hint}; an adapter whose model has outputs past its classes (a void "
                     "channel) says how many in Segmenter.num_outputs")
    return labels.long()


def _outputs(model: Segmenter) -> int:
    """`model.num_outputs`, refused if fewer than its classes: a class it could never predict
    would score IoU 0 instead of raising an error."""
    outputs = model.num_outputs
    if outputs < model.num_classes:
        raise ModelError(f"model {model.name} has {outputs} outputs for {model.num_classes} "
                         "classes", hint="a model needs one output per class: check its "
                                         "classes= or the file it was loaded from")
    return outputs


def check_gradient_logits(images: torch.Tensor, logits: torch.Tensor,
                          model: Segmenter | str) -> torch.Tensor:
    """Validate the `differentiable_logits` of `model` (the segmenter, or only its name):
    [B,C,H,W] at the images' size (C its `num_outputs`, given the segmenter), finite, and with
    a graph back to the images (a detached answer would give a white-box attack no gradient)."""
    b, _, h, w = images.shape
    outputs = None if isinstance(model, str) else _outputs(model)
    name = model if isinstance(model, str) else model.name
    c = "C" if outputs is None else outputs
    if not isinstance(logits, torch.Tensor) or logits.dim() != 4 or \
            (logits.shape[0], *logits.shape[2:]) != (b, h, w) or \
            (outputs is not None and logits.shape[1] != outputs):
        got = tuple(logits.shape) if isinstance(logits, torch.Tensor) else type(logits).__name__
        raise ModelError(f"model {name} returned logits of shape {got}, expected ({b}, {c}, {h}, {w})",
                         hint="differentiable_logits() must return [B,C,H,W] at the input "
                              "resolution" + ("" if outputs is None else
                                              ", one channel per output (Segmenter.num_outputs)"))
    if images.requires_grad and not logits.requires_grad:
        raise ModelError(f"model {name} returned logits without a gradient path to the images",
                         hint="differentiable_logits() must not run under torch.no_grad, "
                              "inference_mode or detach()")
    labels_from_logits(logits.detach())  # refuses NaN and infinite scores
    return logits


class TimeUp(BaseException):
    """An attack's time limit has passed: raised at its next query (nothing is charged) and
    caught by `Attack.run`, which ends the attack there. Not an Exception, so that an attack's
    own `except Exception` cannot swallow it (like KeyboardInterrupt)."""


class QueryCounter:
    """Wraps a segmenter; counts every image sent to it and refuses to pass a budget.

    The budget is per source image. A batched call says which source image each row belongs to
    (`owners`), so an attack may query several candidates of one image, or only the images whose
    budget is left, in a single model call.

    With a `time_limit` (seconds), the first query after that much wall-clock time since the
    counter was made raises `TimeUp` instead: every attack obeys it without its cooperation.
    """

    def __init__(self, segmenter: Segmenter, budget: int, n_images: int,
                 time_limit: float | None = None) -> None:
        if budget < 1:
            raise ValueError("budget must be at least 1")
        self.segmenter = segmenter
        self.budget = budget
        self.counts = torch.zeros(n_images, dtype=torch.long)
        self._lock = threading.Lock()
        self.failure: SegtkError | None = None  # what the model raised, if it did (see predict)
        self.deadline = None if time_limit is None else monotonic() + time_limit
        self.timed_out = False  # a query was refused because the time was up

    @property
    def classes(self) -> list[str]:
        return self.segmenter.classes

    @property
    def ignore_index(self) -> int:
        return self.segmenter.ignore_index

    def remaining(self) -> torch.Tensor:
        return self.budget - self.counts

    def predict(self, images: torch.Tensor, owners: torch.Tensor | None = None) -> torch.Tensor:
        """Predict `images`; row k is charged to source image `owners[k]` (default: k)."""
        self._charge(images, owners)
        return self.evaluate(images)

    def evaluate(self, images: torch.Tensor) -> torch.Tensor:
        """The model's labels for `images`, charged to no one: an evaluation pass (the oracle
        scoring an attack's declared iterate), never an answer an attack sees."""
        if images.shape[0] == 0:
            return torch.empty(0, *images.shape[2:], dtype=torch.long)
        return self._blamed(lambda: check_prediction(images, self.segmenter.predict(images),
                                                     self.segmenter))

    def gradient_logits(self, images: torch.Tensor, owners: torch.Tensor | None = None) -> torch.Tensor:
        """The segmenter's `differentiable_logits` of `images` (their graph kept), charged
        like `predict`: one query per row. A white-box attack's forward and backward pass
        through the model is one query of its budget."""
        self._charge(images, owners)
        return self._blamed(lambda: check_gradient_logits(
            images, self.segmenter.differentiable_logits(images), self.segmenter))

    def _charge(self, images: torch.Tensor, owners: torch.Tensor | None) -> None:
        """Charge each row to its source image, or refuse: past the deadline (TimeUp) or the
        budget (BudgetExceeded), charging nothing."""
        if owners is None:
            owners = torch.arange(images.shape[0])
        owners = torch.as_tensor(owners, dtype=torch.long).reshape(-1)
        if owners.numel() != images.shape[0]:
            raise ValueError("owners must name one source image per row")
        if self.deadline is not None and monotonic() > self.deadline:
            self.timed_out = True
            raise TimeUp
        charge = torch.bincount(owners, minlength=self.counts.numel())
        with self._lock:
            after = self.counts + charge
            if bool((after > self.budget).any()):
                worst = int(after.argmax())
                raise BudgetExceeded(
                    f"image {worst} would use {int(after[worst])} queries, budget is {self.budget}",
                    hint="the attack must stop querying an image once its budget is spent",
                )
            self.counts = after

    def _blamed(self, ask: Callable[[], torch.Tensor]) -> torch.Tensor:
        """`ask()`, keeping what the model raised in `failure`, so that Attack.run can tell the
        model's failures from the attack's own."""
        try:
            return ask()
        except SegtkError as exc:
            self.failure = exc
            raise
        except Exception as exc:
            self.failure = ModelError(f"the model raised {type(exc).__name__}: {exc}")
            raise self.failure from exc
