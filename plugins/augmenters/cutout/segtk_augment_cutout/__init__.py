"""segtk augmenter `cutout`: CutOut (DeVries & Taylor 2017) for segmentation.

Square holes (albumentations' CoarseDropout) filled with a constant grey. What happens to the
label is a parameter: `label=keep` (default) keeps the true classes under the hole, as CutOut
does for classification and MMSegmentation's RandomCutOut does by default (`seg_fill_in=None`),
so the model learns to infer occluded content from context; `label=ignore` sets the hole's
pixels to the ignore index, so nothing is learnt there.
"""

from __future__ import annotations

import os
from typing import Any, ClassVar

import numpy as np
import torch

from segtk.core import Augmenter, PluginError, hookimpl, seeds

os.environ.setdefault("NO_ALBUMENTATIONS_UPDATE", "1")  # no network check at import


class CutOut(Augmenter):
    """Cut `holes` squares of `size` × the shorter image side out of each image (prob. `p`)."""

    name = "cutout"
    description = "square holes filled with grey (albumentations CoarseDropout); label keep|ignore"
    requires: ClassVar[tuple[str, ...]] = ("albumentations",)
    install: ClassVar[str] = "pip install -e plugins/augmenters/cutout"
    defaults: ClassVar[dict[str, Any]] = {"holes": 1, "size": 0.25, "fill": 0.5, "p": 1.0,
                                          "label": "keep"}

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        p = self.params
        if p["label"] not in ("keep", "ignore"):
            raise PluginError(f"cutout: label={p['label']!r} is unknown",
                              hint="label=keep (classes under the hole stay) or label=ignore")
        if not 0 < p["size"] <= 1 or p["holes"] < 1 or not 0 <= p["p"] <= 1 or not 0 <= p["fill"] <= 1:
            raise PluginError("cutout: needs 0 < size <= 1, holes >= 1, 0 <= p <= 1, 0 <= fill <= 1",
                              hint="e.g. cutout:holes=1,size=0.25,p=1")

    def transform(self, height: int, width: int) -> Any:
        import albumentations as A

        side = max(1, round(self.params["size"] * min(height, width)))
        fill_mask = self.context.ignore_index if self.params["label"] == "ignore" else None
        holes = int(self.params["holes"])
        return A.Compose([A.CoarseDropout(num_holes_range=(holes, holes),
                                          hole_height_range=(side, side),
                                          hole_width_range=(side, side),
                                          fill=float(self.params["fill"]), fill_mask=fill_mask,
                                          p=float(self.params["p"]))])

    def apply(self, images: torch.Tensor, labels: torch.Tensor,
              generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        compose = self.transform(*images.shape[-2:])
        out_images, out_labels = images.clone(), labels.clone()
        for i, seed in enumerate(seeds(generator, images.shape[0])):
            compose.set_random_seed(seed)
            image = images[i].permute(1, 2, 0).cpu().numpy().astype(np.float32)
            res = compose(image=image, mask=labels[i].cpu().numpy())
            out_images[i] = torch.from_numpy(np.ascontiguousarray(res["image"])).permute(2, 0, 1)
            out_labels[i] = torch.from_numpy(np.asarray(res["mask"], dtype=np.int64))
        return out_images, out_labels


@hookimpl
def register_augmenters(register) -> None:
    register(CutOut)
