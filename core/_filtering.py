"""The filter contract: drop bad edited samples, or mark unreliable pixels as ignore."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import ClassVar, Literal

import numpy as np

from segtk.core._editing import EditedSample, Sample


@dataclass
class FilterResult:
    keep: bool
    scores: dict[str, float] = field(default_factory=dict)
    label: np.ndarray | None = None  # pixel filters: the label with rejected pixels = ignore


class Filter(ABC):
    """Sample filters decide keep/drop; pixel filters rewrite the label."""

    name: ClassVar[str] = "filter"
    stage: ClassVar[Literal["sample", "pixel"]] = "sample"

    @abstractmethod
    def apply(self, original: Sample, edited: EditedSample) -> FilterResult:
        """Judge one edited sample against its source."""
