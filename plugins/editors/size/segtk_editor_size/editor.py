"""Object size: shrink the salient object about its box centre (Gen4Seg §III-C).

The value is the factor applied to the object's width and height: 0.4 keeps 40% of each
(16% of the area), 0.2 keeps 20% (4%). An object cut by the image border stays anchored to
that border (`border=keep`, the default), so its cut edge does not float in the image. Image, mask and label are transformed together
(`segtk.core.editkit.transform_object`); the area the object no longer covers is repainted
(OpenCV inpainting, or the diffusion backend) and labelled ignore (or background, `fill=`).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from segtk.core.editing import Sample
from segtk.core.editkit import GeometryEditor, bbox, border_sides, target_box
from segtk.core.errors import PluginError

SIZES = ("0.2", "0.4")  # reduction factors of the width and height (Gen4Seg)


class SizeEditor(GeometryEditor):
    """Shrink the salient object about its centre; inpaint what it uncovered."""

    name = "size"
    attribute = "size"
    level = "object"
    values = SIZES
    prompt_templates: ClassVar[dict[str, str]] = {"*": "a photo of a smaller {cls}"}
    max_value: ClassVar[float] = 1.0
    defaults: ClassVar[dict[str, Any]] = {**GeometryEditor.defaults, "anchor": "centre"}

    def __init__(self, backend: str = "classical", **params: Any) -> None:
        super().__init__(backend, **params)
        if self.params["anchor"] not in ("centre", "bottom"):
            raise PluginError(f"size: anchor={self.params['anchor']!r} is unknown",
                              hint="anchor=centre (about the box centre) or anchor=bottom "
                                   "(the box's bottom edge stays: objects keep standing on the ground)")

    def placement(self, sample: Sample, value: float,
                  rng: np.random.Generator) -> tuple[float, tuple[int, int]]:
        h, w = sample.mask.shape
        box = bbox(sample.mask)
        nx0, ny0, nw, nh = target_box(box, value)
        dx = 0
        dy = box[3] - (ny0 + nh) if self.params["anchor"] == "bottom" else 0
        if self.params["border"] != "keep":
            return value, (dx, dy)
        sides = border_sides(sample.mask)
        # anchor a side cut by the border to that border (cut on both sides: keep it centred)
        if "left" in sides and "right" not in sides:
            dx = -nx0
        elif "right" in sides and "left" not in sides:
            dx = w - (nx0 + nw)
        if "top" in sides and "bottom" not in sides:
            dy = -ny0
        elif "bottom" in sides and "top" not in sides:
            dy = h - (ny0 + nh)
        return value, (dx, dy)
