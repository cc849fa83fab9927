"""The captioner contract: the source caption P an edit starts from (Gen4Seg asks a VLM).

`Captioner` (hook `register_captioners`): `caption(image, mask, class_name) -> str`.
`segtk edit --captioner NAME`. Built as `cls(options)`, like a metric (core/_quality_metric.py).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from segtk.core._quality_metric import NoParams, read_params


class Captioner(ABC):
    """Writes the source caption P of an image (Gen4Seg: a VLM describes it), from which the
    edit prompts P* are written. Deterministic: the same image gets the same caption."""

    name: ClassVar[str] = "captioner"
    requires: ClassVar[tuple[str, ...]] = ()
    install: ClassVar[str] = ""
    description: ClassVar[str] = ""
    Params: ClassVar[type] = NoParams

    def __init__(self, options: Mapping[str, Any] | None = None) -> None:
        self.params: Any = read_params(self, "captioner", options)

    @abstractmethod
    def caption(self, image: np.ndarray, mask: np.ndarray, class_name: str) -> str:
        """One line describing `image` (uint8 RGB [H,W,3]); `mask` (bool [H,W], all True for
        the whole image) and `class_name` ("" for image edits) say which object is edited."""
