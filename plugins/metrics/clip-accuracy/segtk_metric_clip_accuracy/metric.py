"""CLIP accuracy (Gen4Seg Table I, after Hertz et al.): an edit counts as a success when the
edited image's CLIP embedding is closer (cosine) to the edit prompt P* than to the source
caption P; the set's number is the share of successes. A tie is a failure ("higher", strictly).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import numpy as np
import torch

from segtk.core import Metric, PluginError, QualityPair, load_pretrained


@dataclass
class ClipAccuracyParams:
    model: str = field(default="", metadata={
        "doc": "a CLIPModel and its processor: a save_pretrained folder, or a repo id in the "
               "Hugging Face cache (required)"})
    device: str = field(default="cpu", metadata={"doc": "where CLIP runs"})
    batch: int = field(default=16, metadata={"doc": "images per forward pass"})


def closer_to_target(image: np.ndarray, source: np.ndarray, target: np.ndarray) -> bool:
    """Whether the image embedding's cosine with `target` is higher than with `source`."""
    unit = [v / max(float(np.linalg.norm(v)), 1e-12) for v in (image, source, target)]
    return bool(unit[0] @ unit[2] > unit[0] @ unit[1])


class ClipAccuracy(Metric):
    """CLIP accuracy: the share of edited images closer to P* than to P (CLIP cosine)."""

    name: ClassVar[str] = "clip-accuracy"
    label: ClassVar[str] = "CLIP Acc"
    better: ClassVar[Literal["lower", "higher"]] = "higher"
    per_image: ClassVar[bool] = True
    requires: ClassVar[tuple[str, ...]] = ("transformers",)
    install: ClassVar[str] = "pip install -e plugins/metrics/clip-accuracy"
    description: ClassVar[str] = "share of edits closer to the edit prompt than to the caption (CLIP)"
    Params: ClassVar[type] = ClipAccuracyParams
    params: ClipAccuracyParams

    def __init__(self, options: Mapping[str, Any] | None = None) -> None:
        super().__init__(options)
        from transformers import CLIPModel, CLIPProcessor

        model, self.processor = load_pretrained(
            (CLIPModel, CLIPProcessor), self.params.model, who="metric clip-accuracy",
            what="a CLIP model and its processor", option="clip-accuracy.model")
        self.model = model.eval().to(self.params.device)

    def embed(self, images: list[np.ndarray], texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """CLIP image and text embeddings (float64, not normalised)."""
        inputs = self.processor(text=texts, images=images, return_tensors="pt", padding=True,
                                truncation=True)
        inputs = {k: v.to(self.params.device) for k, v in inputs.items()}
        with torch.no_grad():
            img = self.model.get_image_features(pixel_values=inputs["pixel_values"])
            txt = self.model.get_text_features(input_ids=inputs["input_ids"],
                                               attention_mask=inputs.get("attention_mask"))
        return img.double().cpu().numpy(), txt.double().cpu().numpy()

    def scores(self, pairs: Sequence[QualityPair]) -> list[float]:
        for i, pair in enumerate(pairs):
            if not pair.source_text.strip() or not pair.target_text.strip():
                raise PluginError(f"metric clip-accuracy: pair {i} lacks its caption or its "
                                  "edit prompt", hint="CLIP accuracy compares the edited image "
                                  "with the source caption P and the edit prompt P*")
        out: list[float] = []
        step = max(1, self.params.batch)
        for start in range(0, len(pairs), step):
            chunk = pairs[start:start + step]
            texts = [t for p in chunk for t in (p.source_text, p.target_text)]
            img, txt = self.embed([p.edited for p in chunk], texts)
            out += [float(closer_to_target(img[i], txt[2 * i], txt[2 * i + 1]))
                    for i in range(len(chunk))]
        return out
