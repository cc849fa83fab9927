"""The editor contract (Gen4Seg attribute editing): new images whose labels stay valid."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import numpy as np


@dataclass
class Sample:
    """One labelled image prepared for editing.

    image: uint8 RGB [H,W,3]; label: int64 [H,W]; mask: bool [H,W] of the edited object
    (all True for image-level edits); class_name: the object's class; prompt: a caption.
    """

    name: str
    image: np.ndarray
    label: np.ndarray
    mask: np.ndarray
    classes: list[str]
    class_name: str = ""
    prompt: str = ""
    ignore_index: int = 255


@dataclass
class EditedSample:
    """An edited image with its label and mask, transformed together with the image."""

    image: np.ndarray
    label: np.ndarray
    mask: np.ndarray
    value: str
    prompt: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)


class Editor(ABC):
    """Edits one attribute of a sample. Appearance edits keep the label; geometry edits move it."""

    name: ClassVar[str] = "editor"
    attribute: ClassVar[str] = ""
    kind: ClassVar[Literal["appearance", "geometry"]] = "appearance"
    values: ClassVar[tuple[str, ...]] = ()

    @abstractmethod
    def edit(self, sample: Sample, value: str, rng: np.random.Generator) -> EditedSample:
        """Return the edited sample; must be deterministic given `rng`."""
