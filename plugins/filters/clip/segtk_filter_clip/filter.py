"""Gen4Seg sample filter (Eq. 9): CLIP image-image, image-text and directional similarity."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import numpy as np
import torch

from segtk.core import EditedSample, Filter, FilterResult, PluginError, Sample, load_pretrained

DEFAULTS = {"min_image": 0.7, "min_text": 0.15, "min_direction": 0.07}


def _unit(v: np.ndarray) -> np.ndarray:
    v = np.asarray(v, dtype=np.float64)
    n = np.linalg.norm(v)
    return v / n if n > 0 else v * 0.0


def clip_scores(image: np.ndarray, edited_image: np.ndarray, text: np.ndarray,
                edited_text: np.ndarray) -> dict[str, float]:
    """The three Gen4Seg scores from (unnormalised) CLIP embeddings."""
    i0, i1, t0, t1 = (_unit(v) for v in (image, edited_image, text, edited_text))
    return {
        "image_image": float(i0 @ i1),
        "image_text": float(i1 @ t1),
        # Eq. 9 writes (E(I) - E(I*)) . (E(P) - E(P*)): the same cosine as (I* - I) . (P* - P)
        "direction": float(_unit(i1 - i0) @ _unit(t1 - t0)),
    }


def passes(scores: dict[str, float], min_image: float = 0.7, min_text: float = 0.15,
           min_direction: float = 0.07) -> bool:
    return (scores["image_image"] >= min_image and scores["image_text"] >= min_text
            and scores["direction"] >= min_direction)


class ClipFilter(Filter):
    name: ClassVar[str] = "clip"
    stage: ClassVar[Literal["sample", "pixel"]] = "sample"
    requires: ClassVar[tuple[str, ...]] = ("transformers",)
    install: ClassVar[str] = "pip install transformers==4.57.6"
    description: ClassVar[str] = "Gen4Seg Eq. 9: CLIP image/text/direction similarity thresholds"

    def __init__(self, model: str | None = None, min_image: float | str = DEFAULTS["min_image"],
                 min_text: float | str = DEFAULTS["min_text"],
                 min_direction: float | str = DEFAULTS["min_direction"],
                 device: str = "cpu") -> None:
        if not model:
            raise PluginError("filter clip needs a CLIP model",
                              hint="pass --filter-param clip.model=DIR (a save_pretrained folder) "
                                   "or a repo id in the Hugging Face cache")
        self.spec = str(model)
        self.thresholds = {"min_image": float(min_image), "min_text": float(min_text),
                           "min_direction": float(min_direction)}
        self.device = device
        self._loaded: tuple[Any, Any] | None = None

    def parameters(self) -> dict[str, Any]:
        return {"model": self.spec, **self.thresholds}

    def load(self) -> tuple[Any, Any]:
        if self._loaded is None:
            from transformers import CLIPModel, CLIPProcessor

            model, processor = load_pretrained(
                (CLIPModel, CLIPProcessor), self.spec, who="filter clip",
                what="a CLIP model and its processor", option="clip.model")
            model = model.eval().to(self.device)
            self._loaded = (model, processor)
        return self._loaded

    def prepare(self, dataset: Any = None, cache_dir: Any = None) -> None:
        self.load()  # fail before any edit if the model is missing

    def embed(self, images: list[np.ndarray], texts: list[str]) -> tuple[np.ndarray, np.ndarray]:

        model, processor = self.load()
        inputs = processor(text=texts, images=images, return_tensors="pt", padding=True,
                           truncation=True)
        inputs = {k: v.to(self.device) for k, v in inputs.items()}
        with torch.no_grad():
            img = model.get_image_features(pixel_values=inputs["pixel_values"])
            txt = model.get_text_features(input_ids=inputs["input_ids"],
                                          attention_mask=inputs.get("attention_mask"))
        return img.double().cpu().numpy(), txt.double().cpu().numpy()

    def apply(self, original: Sample, edited: EditedSample) -> FilterResult:
        source_text = original.prompt or f"a photo of a {original.class_name or 'scene'}"
        edited_text = edited.prompt or source_text
        img, txt = self.embed([original.image, edited.image], [source_text, edited_text])
        scores = clip_scores(img[0], img[1], txt[0], txt[1])
        return FilterResult(keep=passes(scores, **self.thresholds),
                            scores={k: round(v, 6) for k, v in scores.items()})
