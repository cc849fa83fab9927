"""DINO distance (Gen4Seg Tables VII–IX, after Tumanyan et al., "Splicing ViT Features"): how
much an edit changed an image's structure, seen by a self-supervised ViT (DINO / DINOv2).

`feature=structure` (default, the cited definition): the self-similarity of the last layer's
attention keys, S[i, j] = cos(k_i, k_j) over all tokens, and the distance the mean squared
difference of the two images' S. `feature=cls`: 1 - cos of the two images' CLS tokens (the
last hidden state's first token), a cruder global measure. Both are 0 for identical images.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import numpy as np
import torch

from segtk.core import Metric, PluginError, QualityPair, load_pretrained


@dataclass
class DinoDistanceParams:
    model: str = field(default="", metadata={
        "doc": "a ViT / DINOv2 model and its image processor: a save_pretrained folder or a "
               "repo id in the Hugging Face cache (required)"})
    feature: Literal["structure", "cls"] = field(default="structure", metadata={
        "doc": "structure: keys' self-similarity (Tumanyan et al.); cls: CLS cosine distance"})
    device: str = field(default="cpu", metadata={"doc": "where the model runs"})


def self_similarity(tokens: np.ndarray) -> np.ndarray:
    """[N, D] token features -> [N, N] cosine similarities."""
    unit = tokens / np.maximum(np.linalg.norm(tokens, axis=1, keepdims=True), 1e-12)
    return unit @ unit.T


def structure_distance(a: np.ndarray, b: np.ndarray) -> float:
    """Mean squared difference of the self-similarities of two [N, D] token sets."""
    return float(np.mean((self_similarity(a) - self_similarity(b)) ** 2))


def cls_distance(a: np.ndarray, b: np.ndarray) -> float:
    """1 - cosine of two vectors."""
    na, nb = (max(float(np.linalg.norm(v)), 1e-12) for v in (a, b))
    return float(1.0 - (a @ b) / (na * nb))


def last_keys(model: torch.nn.Module) -> torch.nn.Module:
    """The key projection of the model's last attention layer (ViT, DINOv2: `...attention.key`)."""
    keys = [m for name, m in model.named_modules() if name.endswith("attention.key")]
    if not keys:
        raise PluginError(f"metric dino-distance: {type(model).__name__} has no attention key "
                          "projection (…attention.key) to take the structure from",
                          hint="use a ViT or DINOv2 model, or feature=cls")
    return keys[-1]


class DinoDistance(Metric):
    """DINO structure distance (or CLS distance) between original and edited image."""

    name: ClassVar[str] = "dino-distance"
    label: ClassVar[str] = "DINO Dist"
    better: ClassVar[Literal["lower", "higher"]] = "lower"
    per_image: ClassVar[bool] = True
    requires: ClassVar[tuple[str, ...]] = ("transformers",)
    install: ClassVar[str] = "pip install -e plugins/metrics/dino-distance"
    description: ClassVar[str] = "DINO ViT self-similarity structure distance (or CLS distance)"
    Params: ClassVar[type] = DinoDistanceParams
    params: DinoDistanceParams

    def __init__(self, options: Mapping[str, Any] | None = None) -> None:
        super().__init__(options)
        from transformers import AutoImageProcessor, AutoModel

        model, self.processor = load_pretrained(
            (AutoModel, AutoImageProcessor), self.params.model, who="metric dino-distance",
            what="a ViT/DINOv2 model and its image processor", option="dino-distance.model")
        self.model = model.eval().to(self.params.device)
        self.keys = last_keys(self.model) if self.params.feature == "structure" else None

    def features(self, images: list[np.ndarray]) -> np.ndarray:
        """Per image: the last layer's keys [N, D] (structure) or the CLS token [D] (cls)."""
        inputs = self.processor(images=images, return_tensors="pt")
        pixels = inputs["pixel_values"].to(self.params.device)
        captured: list[torch.Tensor] = []
        hook = None if self.keys is None else self.keys.register_forward_hook(
            lambda module, args, out: captured.append(out))
        try:
            with torch.no_grad():
                out = self.model(pixel_values=pixels)
        finally:
            if hook is not None:
                hook.remove()
        chosen = captured[-1] if captured else out.last_hidden_state[:, 0]
        return chosen.double().cpu().numpy()

    def scores(self, pairs: Sequence[QualityPair]) -> list[float]:
        distance = structure_distance if self.params.feature == "structure" else cls_distance
        out = []
        for pair in pairs:
            a, b = self.features([pair.original, pair.edited])
            out.append(distance(a, b))
        return out
