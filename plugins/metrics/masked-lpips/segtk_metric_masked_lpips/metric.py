"""Masked LPIPS (Gen4Seg Table VII): LPIPS's distance map averaged over a region of the image,
by default the edited object ("the intended editing area"), or the background, or all of it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import numpy as np
import torch

from segtk.core import Metric, PluginError, QualityPair
from segtk_metric_masked_lpips.lpips import LpipsNet, read_weights


@dataclass
class MaskedLpipsParams:
    weights: str = field(default="", metadata={
        "doc": "the LPIPS-VGG safetensors file (required; see the plugin's README)"})
    region: Literal["object", "background", "all"] = field(default="object", metadata={
        "doc": "where the distance map is averaged: the edited object, the rest, or all"})
    device: str = field(default="cpu", metadata={"doc": "where the network runs"})


def masked_mean(distance: np.ndarray, mask: np.ndarray, region: str) -> float:
    """The mean of the map [H,W] over the region; an empty region is an error."""
    where = {"object": mask, "background": ~mask, "all": np.ones_like(mask)}[region]
    if not where.any():
        raise PluginError(f"metric masked-lpips: the {region} region of a pair is empty",
                          hint="image-level edits have no background: use region=all or object")
    return float(distance[where].mean())


class MaskedLpips(Metric):
    """LPIPS (VGG) averaged over the edited object (or the background, or the image)."""

    name: ClassVar[str] = "masked-lpips"
    label: ClassVar[str] = "Masked LPIPS"
    better: ClassVar[Literal["lower", "higher"]] = "lower"
    per_image: ClassVar[bool] = True
    requires: ClassVar[tuple[str, ...]] = ("safetensors",)
    install: ClassVar[str] = "pip install -e plugins/metrics/masked-lpips"
    description: ClassVar[str] = "LPIPS (VGG16, v0.1 heads) averaged over the edited object"
    Params: ClassVar[type] = MaskedLpipsParams
    params: MaskedLpipsParams

    def __init__(self, options: Mapping[str, Any] | None = None) -> None:
        super().__init__(options)
        self.net = LpipsNet(read_weights(self.params.weights)).to(self.params.device)

    def distance_map(self, original: np.ndarray, edited: np.ndarray) -> np.ndarray:
        """LPIPS's map [H,W] between two uint8 RGB images of one size."""
        a, b = (torch.from_numpy(np.ascontiguousarray(x)).permute(2, 0, 1)[None].float()
                .to(self.params.device) for x in (original, edited))
        return self.net(a, b)[0, 0].double().cpu().numpy()

    def scores(self, pairs: Sequence[QualityPair]) -> list[float]:
        return [masked_mean(self.distance_map(p.original, p.edited), p.mask, self.params.region)
                for p in pairs]
