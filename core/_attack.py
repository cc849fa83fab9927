"""The attack contract: an attack's parameters, its class, and how one run of it goes.

`Attack.run` builds the run's oracle (segtk.core._oracle_run: an `OracleRun`, which checks, counts
and keeps each image's result), hands the attack's `attack` method only its face (`Oracle`:
the model as an attack sees it, under an exact query budget and ε-box) and takes the result
from the run afterwards.

A plugin's failures are its own: an exception, and also a SystemExit or KeyboardInterrupt it
raises, ends its run as an AttackError naming it (a SIGINT from the user stays an interrupt,
see `user_interrupts`); the answers it is given are its to edit, the oracle records copies.
"""

from __future__ import annotations

import dataclasses
import math
import signal
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType
from typing import Any, ClassVar, Generic, Literal, TypeVar, cast

import torch

from segtk.core._eps import check_eps
from segtk.core._errors import AttackError, SegtkError, failure
from segtk.core._oracle import REFERENCES, RETURNS, AttackResult, Oracle
from segtk.core._oracle_run import OracleRun
from segtk.core._proxy import Proxy
from segtk.core._segmenter import QueryCounter, Segmenter, TimeUp


@dataclass
class AttackParams:
    """Knobs every attack shares; one `name: meaning` entry each (`segtk plugins show` prints it).

    eps: L∞ bound on the 0–255 scale (8 means 8/255).
    budget: model queries per image, the clean image's query included.
    seed: the run's seed; each image's random stream derives from it and the image's name.
    proxy: the per-image score the attack drives down: miou or pacc (pixel accuracy).
    time_limit: wall-clock seconds per run of `Attack.run` (the images attacked together share
        it), None for none; results that hit it depend on the machine's speed (see QueryCounter).
    returns: which image is an attack's result at each of its budgets, best (the lowest-proxy
        candidate it queried) or iterate (the point its optimisation reached, as
        gradient-estimation references return it); none means the attack's own choice
        (`Attack.returns`, iterate for nes, zo-signsgd and bandits, best for the rest).
    reference: what the proxy scores each query against: labels (the ground truth) or
        prediction (the model's labels for the clean image, the answer to the image's clean
        query: a label-free attack, which needs no ground truth).
    """

    eps: float = 8.0
    budget: int = 50
    seed: int = 0
    proxy: str = "miou"
    time_limit: float | None = None
    returns: str | None = None
    reference: str = "labels"

    def validate(self) -> None:
        check_eps(self.eps)  # the one rule for every way ε arrives (API, CLI, specs)
        if self.budget < 1:
            raise SegtkError(f"budget must be at least 1, got {self.budget}")
        if self.time_limit is not None and not 0 < self.time_limit < math.inf:
            raise SegtkError(f"time limit must be a positive number of seconds, got "
                             f"{self.time_limit}", hint="e.g. --time-limit 30, or none for no limit")
        if self.proxy not in ("miou", "pacc"):
            raise SegtkError(f"unknown proxy {self.proxy!r}", hint="use miou or pacc")
        if self.returns is not None and self.returns not in RETURNS:
            raise SegtkError(f"unknown returns={self.returns!r}", hint="use best or iterate")
        if self.reference not in REFERENCES:
            raise SegtkError(f"unknown reference={self.reference!r}",
                             hint="use labels (the ground truth) or prediction (the clean "
                                  "image's predicted labels)")

    @property
    def eps_unit(self) -> float:
        return self.eps / 255.0


# The parameters of one attack: `class DLA(Attack[DLAParams])` types `self.params` as DLAParams.
P = TypeVar("P", bound=AttackParams)


class Attack(ABC, Generic[P]):
    """An attack on a segmenter, run through an `Oracle` under an exact query budget and ε-box.

    By default it is decision-based: per query it sees the model's labels (`Oracle.query`'s
    answer) and the per-image proxy computed from them against the reference labels (the ground
    truth, or the clean prediction with `reference="prediction"`), never logits. Subclasses name their params in the base (`class DLA(Attack[DLAParams])`, so mypy knows
    `self.params` is a DLAParams), set `name`, `Params` (the same class) and implement
    `attack(oracle)`. `anytime` says whether the first b queries of a run with budget T are the
    same as a run with budget b; if so, one benchmark run serves every smaller budget.
    `white_box = True` declares a white-box attack: it may ask the oracle for gradients
    (`Oracle.loss_and_grad`, one query per forward and backward pass), runs only on segmenters
    that give them, and is listed and tabled apart from the decision-based attacks.
    `returns` says what its result is by default ("best" candidate or "iterate", see the module
    docstring); `declares_iterate = True` says it calls `Oracle.set_iterate` after each step, so
    a run may choose either (`returns=` parameter). Without it only "best" is available.
    """

    name: ClassVar[str] = "attack"
    Params: ClassVar[type[AttackParams]] = AttackParams
    anytime: ClassVar[bool] = True
    white_box: ClassVar[bool] = False
    returns: ClassVar[Literal["best", "iterate"]] = "best"
    declares_iterate: ClassVar[bool] = False

    def __init__(self, params: P | None = None, **overrides: Any) -> None:
        # `Params` is a ClassVar (read from the class by the registry), and a ClassVar cannot
        # name a type variable; the subclass sets it to the P it names in its base.
        params = params if params is not None else cast(P, self.Params())
        if overrides:
            params = dataclasses.replace(params, **overrides)
        params.validate()
        if params.returns is None:
            params = dataclasses.replace(params, returns=self.returns)
        if params.returns == "iterate" and not self.declares_iterate:
            raise SegtkError(f"attack {self.name!r} cannot return its iterate: it declares none "
                             "(Oracle.set_iterate), so its result is its best candidate",
                             hint="leave returns out, or set returns=best")
        check_reference(type(self), params.reference)
        self.params: P = params

    @classmethod
    def describe(cls) -> str:
        return (cls.__doc__ or "").strip().splitlines()[0] if cls.__doc__ else ""

    def query_allowance(self, budget: int) -> int:
        """The queries per image a run with nominal `budget` may make: `budget` itself, every
        query counted, none over. Only a gradient-estimation baseline asked for its reference's
        count (`budget_rule=reference`, never a default; its spec, and so every table's label,
        names the rule) returns more, with `stepped_allowance`."""
        return budget

    @staticmethod
    def stepped_allowance(budget: int, rule: str, step: int, free: int) -> int:
        """A stepped attack's allowance under its `budget_rule`: `budget` itself ("exact"), or
        BlackboxBench's count ("reference"): `free` queries it does not count (the clean
        image's), then whole steps of `step` queries as long as the counted ones are below
        `budget` before the step (so the last step finishes past it)."""
        return budget if rule == "exact" else free + math.ceil(budget / step) * step

    @abstractmethod
    def attack(self, oracle: Oracle) -> None:
        """Spend at most the oracle's budget; the oracle keeps each image's result (its best
        candidate, or the iterate declared with `Oracle.set_iterate`)."""

    def run(
        self,
        segmenter: Segmenter,
        images: torch.Tensor,
        labels: torch.Tensor | None,
        seeds: list[int] | None = None,
        checkpoints: tuple[int, ...] = (),
        num_classes: int | None = None,
        ignore_index: int | None = None,
    ) -> AttackResult:
        """Attack a batch; `seeds` gives each image its own random stream (batch-invariant).

        The proxy scores against the labels' classes (default: the segmenter's). With
        `params.time_limit`, the attack ends at its first query past that many seconds; the
        result's `stopped` names the images it cut short. With `params.reference` "prediction"
        `labels` are not used (None will do): each query is scored against the clean image's
        predicted labels, and the attack never sees the ground truth.
        """
        check_gradients(type(self), segmenter)
        return self._run(segmenter, images, labels, seeds, checkpoints, num_classes, ignore_index)

    def _run(
        self,
        segmenter: Segmenter,
        images: torch.Tensor,
        labels: torch.Tensor | None,
        seeds: list[int] | None = None,
        checkpoints: tuple[int, ...] = (),
        num_classes: int | None = None,
        ignore_index: int | None = None,
    ) -> AttackResult:
        """`run` once its precondition holds: segtk's jobs check it (`check_gradients`) once,
        before they write anything, and then run every batch through here."""
        p = self.params
        ignore = ignore_index if ignore_index is not None else segmenter.ignore_index
        if p.reference == "prediction":  # filled in by each image's clean query
            labels = torch.full((images.shape[0], *images.shape[2:]), ignore, dtype=torch.long,
                                device=images.device)
        assert labels is not None, "reference=labels scores against labels: pass them"
        b = images.shape[0]
        seeds = seeds if seeds is not None else [p.seed * 1_000_003 + i for i in range(b)]
        allowed = {n: self.query_allowance(n) for n in (p.budget, *checkpoints)}
        counter = QueryCounter(segmenter, allowed[p.budget], b, p.time_limit)
        proxy = Proxy(num_classes if num_classes is not None else segmenter.num_classes,
                      ignore, p.proxy)
        run = OracleRun(counter, images, labels, proxy, p.eps_unit, seeds,
                        tuple(allowed[n] for n in checkpoints),
                        white_box=self.white_box, returns=p.returns or self.returns,
                        reference=p.reference)
        with user_interrupts() as interrupted:
            try:
                self.attack(run.oracle)  # the attack's face of the run
            except TimeUp:  # its time limit passed: the attack ends at that query
                pass
            except Exception as exc:
                self._check_untouched(run, exc)
                model = counter.failure
                if model is None or not _caused_by(exc, model):
                    raise self.failed(exc) from exc
                if exc is model:
                    raise
                raise model from model.__cause__  # wrapped by the attack: still the model's failure
            except BaseException as exc:  # SystemExit, KeyboardInterrupt, ...: see user_interrupts
                if isinstance(exc, KeyboardInterrupt) and interrupted():
                    raise  # the user's Ctrl-C
                self._check_untouched(run, exc)
                raise self.failed(exc) from exc
        self._check_untouched(run)
        result = run.result()
        # checkpoints keyed by the nominal budgets the caller asked for
        result.checkpoints = {n: result.checkpoints[allowed[n]] for n in checkpoints}
        result.checkpoint_images = {n: result.checkpoint_images[allowed[n]] for n in checkpoints}
        return result

    def _check_untouched(self, run: OracleRun, cause: BaseException | None = None) -> None:
        """Refuse the run of an attack that wrote to the oracle's tensors: its queries may have
        left the ε-ball and its scores may be of other images (the caller's are put back)."""
        written = run.overwritten()
        if written:
            what = (f"wrote to {', '.join(f'oracle.{n}' for n in written)} in place: its "
                    "queries and results are void")
            raise AttackError(f"attack {self.name!r} {what}", what=what,
                              hint="an attack must only read the oracle's tensors: work on a "
                                   "copy (x = oracle.clean.clone())") from cause

    def failed(self, exc: BaseException) -> AttackError:
        """`exc`, raised by this attack's own code (or a rule of the oracle it broke), as an
        AttackError naming the attack: a failure no fix of the model can mend. A SystemExit or
        KeyboardInterrupt of its own too: a plugin does not get to end segtk's run."""
        if isinstance(exc, SegtkError):
            what = f"failed: {exc.message}"
            return AttackError(f"attack {self.name!r} {what}", exc.hint, what)
        what = f"raised {failure(exc)}"
        return AttackError(f"attack {self.name!r} {what}", what=what)


def check_gradients(attack: type[Attack], segmenter: Segmenter) -> None:
    """Refuse a white-box attack on a segmenter that gives no gradients, before any query."""
    if attack.white_box and not segmenter.has_gradients:
        raise SegtkError(
            f"attack {attack.name!r} is white-box: it needs the gradients of the model's logits, "
            f"and model {segmenter.name!r} gives none",
            hint="use a decision-based attack (`segtk plugins` marks the white-box ones), or a "
                 "model adapter that implements Segmenter.differentiable_logits")


def check_reference(attack: type[Attack], reference: str) -> None:
    """Refuse a white-box attack with reference=prediction: its loss needs the labels of every
    pixel from its first gradient on, and it was built and measured against the ground truth."""
    if attack.white_box and reference == "prediction":
        raise SegtkError(f"attack {attack.name!r} is white-box: reference=prediction is for the "
                         "decision-based attacks", hint="leave reference out (labels) for it")


@contextmanager
def user_interrupts() -> Iterator[Callable[[], bool]]:
    """Tells the user's Ctrl-C from a KeyboardInterrupt raised by plugin code: yields
    `interrupted()`, whether a SIGINT arrived meanwhile. On the main thread, under a Python
    SIGINT handler (Python's own raises KeyboardInterrupt), it wraps that handler to note the
    signal, then calls it as before; elsewhere a SIGINT raises nothing (other threads never
    receive it; an ignored or default signal does not raise), so any KeyboardInterrupt there
    is the plugin's."""
    seen: list[bool] = []
    previous = signal.getsignal(signal.SIGINT) \
        if threading.current_thread() is threading.main_thread() else None
    if not callable(previous):
        yield lambda: False
        return
    chained = previous

    def noted(signum: int, frame: FrameType | None) -> Any:
        seen.append(True)
        return chained(signum, frame)

    signal.signal(signal.SIGINT, noted)
    try:
        yield lambda: bool(seen)
    finally:
        signal.signal(signal.SIGINT, previous)


def _caused_by(exc: BaseException, cause: BaseException) -> bool:
    """Whether `cause` is `exc` or in its chain (an attack re-raising the model's error)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if current is cause:
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False
