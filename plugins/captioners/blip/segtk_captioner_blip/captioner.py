"""`BlipCaptioner` (captioner `blip`): a local BLIP (`BlipForConditionalGeneration`) writes the
source caption P of each image, as Gen4Seg asks a VLM (LLaVA) for it.

Greedy decoding (no sampling, one beam), so the same image always gets the same caption;
`prompt` starts the caption (BLIP's conditional captioning, e.g. "a photo of"); `region=object`
captions the edited object's bounding box (with a margin) instead of the whole image. An empty
answer falls back to "a photo of a CLASS" (or "a photo of a scene").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import numpy as np
import torch

from segtk.core import Captioner, load_pretrained


@dataclass
class BlipParams:
    model: str = field(default="", metadata={
        "doc": "a BlipForConditionalGeneration and its processor: a save_pretrained folder or a "
               "repo id in the Hugging Face cache (required)"})
    prompt: str = field(default="a photo of", metadata={
        "doc": "the words the caption starts with (empty: unconditional captioning)"})
    region: Literal["image", "object"] = field(default="image", metadata={
        "doc": "caption the whole image, or the edited object's box"})
    margin: float = field(default=0.1, metadata={
        "doc": "region=object: the box grown by this share of its size on each side"})
    max_new_tokens: int = field(default=30, metadata={"doc": "the longest caption, in tokens"})
    device: str = field(default="cpu", metadata={"doc": "where BLIP runs"})


def object_box(mask: np.ndarray, margin: float) -> tuple[int, int, int, int]:
    """(top, bottom, left, right) of the mask's bounding box grown by `margin` of its size on
    each side, within the image; the whole image for an empty or full mask."""
    rows, cols = np.flatnonzero(mask.any(1)), np.flatnonzero(mask.any(0))
    height, width = mask.shape
    if rows.size == 0:
        return 0, height, 0, width
    top, bottom, left, right = rows[0], rows[-1] + 1, cols[0], cols[-1] + 1
    dy, dx = int(round((bottom - top) * margin)), int(round((right - left) * margin))
    return (max(0, top - dy), min(height, bottom + dy), max(0, left - dx), min(width, right + dx))


class BlipCaptioner(Captioner):
    """A local BLIP captions the image (or the edited object), greedily."""

    name: ClassVar[str] = "blip"
    requires: ClassVar[tuple[str, ...]] = ("transformers",)
    install: ClassVar[str] = "pip install -e plugins/captioners/blip"
    description: ClassVar[str] = "a local BLIP (transformers) writes the source caption"
    Params: ClassVar[type] = BlipParams
    params: BlipParams

    def __init__(self, options: Mapping[str, Any] | None = None) -> None:
        super().__init__(options)
        from transformers import BlipForConditionalGeneration, BlipProcessor

        model, self.processor = load_pretrained(
            (BlipForConditionalGeneration, BlipProcessor), self.params.model,
            who="captioner blip", what="a BLIP captioning model and its processor",
            option="--captioner-param model")
        self.model = model.eval().to(self.params.device)

    def caption(self, image: np.ndarray, mask: np.ndarray, class_name: str) -> str:
        if self.params.region == "object":
            top, bottom, left, right = object_box(mask, self.params.margin)
            image = image[top:bottom, left:right]
        text = self.params.prompt.strip() or None
        inputs = self.processor(images=np.ascontiguousarray(image), text=text, return_tensors="pt")
        inputs = {k: v.to(self.params.device) for k, v in inputs.items()}
        with torch.no_grad():
            tokens = self.model.generate(**inputs, max_new_tokens=self.params.max_new_tokens,
                                         do_sample=False, num_beams=1)
        words = " ".join(self.processor.decode(tokens[0], skip_special_tokens=True).split())
        if words and words != (text or ""):
            return words
        subject = class_name.replace("_", " ").strip() or "scene"
        return f"a photo of {'an' if subject[0] in 'aeiou' else 'a'} {subject}"
