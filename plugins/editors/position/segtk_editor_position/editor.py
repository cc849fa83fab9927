"""Object position: move the salient object by a share of the image size (Gen4Seg §III-C).

The value v sets the distance: the shift is (v·W·cos θ, v·H·sin θ) for a direction θ drawn
from the sample's random stream among the directions that keep the whole object inside the
image (72 candidates; `direction=horizontal` or `vertical` allows only those two); if none
does, the sample is skipped ("no-room"). An object cut by the image border only moves along
that border (`border=keep`, the default), so its cut edge never floats in the image. Image, mask and label
move together (`segtk.editkit.transform_object`, exact integer shift); the uncovered area
is repainted (OpenCV inpainting, or the diffusion backend) and labelled ignore (or background).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from segtk.core import PluginError, Sample, SkipSample
from segtk.editkit import GeometryEditor, bbox, border_sides

POSITIONS = ("0.2", "0.4")  # shifts, as a share of the image width/height (Gen4Seg)

DIRECTIONS = 72


ANGLES = {"any": [2 * np.pi * k / DIRECTIONS for k in range(DIRECTIONS)],
          "horizontal": [0.0, np.pi], "vertical": [np.pi / 2, 3 * np.pi / 2]}


def feasible_shifts(mask: np.ndarray, value: float, direction: str = "any",
                    keep_border: bool = True) -> list[tuple[int, int]]:
    """The integer shifts of length `value` (of W, H) that keep the object box inside (and,
    with `keep_border`, an object cut by a border still cut by it: it moves along it)."""
    h, w = mask.shape
    x0, y0, x1, y1 = bbox(mask)
    sides = border_sides(mask) if keep_border else set()
    fixed_x, fixed_y = bool(sides & {"left", "right"}), bool(sides & {"top", "bottom"})
    out = []
    for theta in ANGLES[direction]:
        dx, dy = int(round(value * w * np.cos(theta))), int(round(value * h * np.sin(theta)))
        if (fixed_x and dx) or (fixed_y and dy):
            continue
        if -x0 <= dx <= w - x1 and -y0 <= dy <= h - y1:
            out.append((dx, dy))
    return out


class PositionEditor(GeometryEditor):
    """Move the salient object inside the image; inpaint what it uncovered."""

    name = "position"
    attribute = "position"
    level = "object"
    values = POSITIONS
    prompt_templates: ClassVar[dict[str, str]] = {"*": "a photo of {a_cls} in another place"}
    max_value: ClassVar[float] = 0.99
    defaults: ClassVar[dict[str, Any]] = {**GeometryEditor.defaults, "direction": "any"}

    def __init__(self, backend: str = "classical", **params: Any) -> None:
        super().__init__(backend, **params)
        if self.params["direction"] not in ANGLES:
            raise PluginError(f"position: direction={self.params['direction']!r} is unknown",
                              hint=f"direction: {', '.join(ANGLES)}")

    def placement(self, sample: Sample, value: float,
                  rng: np.random.Generator) -> tuple[float, tuple[int, int]]:
        keep = self.params["border"] == "keep"
        shifts = feasible_shifts(sample.mask, value, self.params["direction"], keep)
        if not shifts:
            x0, y0, x1, y1 = bbox(sample.mask)
            cut = f" (cut by the {'/'.join(sorted(border_sides(sample.mask)))} border)" \
                if keep and border_sides(sample.mask) else ""
            raise SkipSample("no-room", f"a {x1 - x0}x{y1 - y0} object{cut} cannot move "
                                        f"{value:g} of the image and stay inside")
        return 1.0, shifts[int(rng.integers(len(shifts)))]
