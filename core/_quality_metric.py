"""The editing-quality metric contract (Gen4Seg Tables I and VII–IX): how good an edit is.

`Metric` (hook `register_metrics`): `measure(pairs) -> MetricResult`, one number per
(original, edited) `QualityPair` where the metric has one (`per_image`: CLIP accuracy, masked
LPIPS, DINO distance) and one number for the set (their mean, or a set statistic such as a
Fréchet distance, which has no per-image number). `segtk bench edits --quality NAME`.

Metrics and captioners (core/_captioner.py) are built as `cls(options)` (`segtk.core.build`),
the options read as their `Params` dataclass declares them (`read_params`): a key it does not
declare is refused. Model weights are read from local folders only (`load_pretrained`):
nothing is downloaded.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np

from segtk.core._errors import PluginError
from segtk.core._params import declared


@dataclass
class QualityPair:
    """One edit as a metric sees it. original, edited: uint8 RGB [H,W,3] of one size; mask:
    bool [H,W], the edited object (all True for image edits); source_text: the caption P;
    target_text: the edit prompt P*."""

    original: np.ndarray
    edited: np.ndarray
    mask: np.ndarray
    source_text: str = ""
    target_text: str = ""


@dataclass
class MetricResult:
    """per_image: one number per pair, in order (None for a set metric); value: the set's."""

    value: float
    per_image: list[float] | None = None


@dataclass
class NoParams:
    """The parameters of a metric or captioner that declares none."""


def read_params(obj: Any, kind: str, options: Mapping[str, Any] | None) -> Any:
    """`obj.Params` built from `options` (text or typed values), refusing an unknown key."""
    return type(obj).Params(**declared(type(obj)).read(options or {}, kind, obj.name))


class Metric:
    """An editing-quality metric. `better`: which way is better ("lower" for distances).
    `per_image`: True if it has a number per pair (`scores`) and the set's is their mean;
    False for a set statistic (`reduce` computes it from all pairs). `label`: its column.
    A subclass implements `scores` (per-image metrics) or `reduce` (set metrics)."""

    name: ClassVar[str] = "metric"
    label: ClassVar[str] = ""
    better: ClassVar[Literal["lower", "higher"]] = "lower"
    per_image: ClassVar[bool] = True
    requires: ClassVar[tuple[str, ...]] = ()
    install: ClassVar[str] = ""
    description: ClassVar[str] = ""
    Params: ClassVar[type] = NoParams  # a dataclass: the parameters it takes, with defaults

    def __init__(self, options: Mapping[str, Any] | None = None) -> None:
        self.params: Any = read_params(self, "metric", options)

    def column(self) -> str:
        """The heading of its column in tables (`label`, else `name`)."""
        return self.label or self.name

    def scores(self, pairs: Sequence[QualityPair]) -> list[float]:
        """One number per pair (per-image metrics implement this)."""
        raise NotImplementedError(f"metric {self.name!r} has no per-image number")

    def reduce(self, pairs: Sequence[QualityPair], scores: Sequence[float] | None) -> float:
        """The set's number: the mean of `scores` (a set metric overrides this)."""
        if not scores:
            raise PluginError(f"metric {self.name!r}: no pairs to measure")
        return float(np.mean(scores))

    def measure(self, pairs: Sequence[QualityPair]) -> MetricResult:
        """Per-image numbers (if any) and the set's, checked to be finite numbers."""
        check_pairs(pairs, self.name)
        scores = [float(s) for s in self.scores(pairs)] if self.per_image else None
        if scores is not None and len(scores) != len(pairs):
            raise PluginError(f"metric {self.name!r} gave {len(scores)} scores for "
                              f"{len(pairs)} pairs")
        value = float(self.reduce(pairs, scores))
        if not math.isfinite(value):
            raise PluginError(f"metric {self.name!r} gave {value} for {len(pairs)} pairs")
        return MetricResult(value, scores)


def check_pairs(pairs: Sequence[QualityPair], who: str) -> None:
    """Each pair's images uint8 RGB of one size and its mask of that size: a caller's bug
    otherwise, said before any model runs."""
    if not pairs:
        raise PluginError(f"metric {who!r}: no pairs to measure")
    for i, pair in enumerate(pairs):
        shape = pair.original.shape
        if (len(shape) != 3 or shape[2] != 3 or pair.edited.shape != shape
                or pair.mask.shape != shape[:2]):
            raise PluginError(f"metric {who!r}: pair {i} has original {shape}, edited "
                              f"{pair.edited.shape}, mask {pair.mask.shape}",
                              hint="images RGB [H,W,3] of one size, the mask [H,W]")


def load_pretrained(classes: Sequence[Any], spec: str | Path | None, *, who: str, what: str,
                    option: str) -> list[Any]:
    """Each of `classes` (transformers classes: a model, its processor) loaded offline from
    `spec`: a save_pretrained folder, or a repo id already in the Hugging Face cache. Nothing is
    downloaded; a missing or unreadable model is a PluginError naming `option`."""
    if spec is None or not str(spec).strip():
        raise PluginError(f"{who} needs {what}",
                          hint=f"pass {option}=DIR (a save_pretrained folder) or a repo id in "
                               "the Hugging Face cache")
    local = Path(str(spec)).expanduser()
    where = str(local) if local.exists() else str(spec)
    try:
        return [cls.from_pretrained(where, local_files_only=True) for cls in classes]
    except (OSError, ValueError) as exc:
        first = (str(exc).splitlines() or [""])[0]
        raise PluginError(
            f"{who}: cannot load {what} from {option}={str(spec)!r} ({type(exc).__name__}: "
            f"{first})",
            hint=f"{option} must name a folder holding {what} (save_pretrained), or a repo id "
                 "already in the Hugging Face cache",
        ) from exc
