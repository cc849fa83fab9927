"""Sample preparation (Gen4Seg §IV-A): the salient object, its mask and a caption.

For object-level edits (colour, material, size, position) the salient object is the largest
connected region (4-connectivity) of a single class, among classes that are not excluded; a
sample needs it to cover at least `min_area` of the image (0.2 by default, the paper's 20%).
Image-level edits (style, weather) edit the whole image: the mask is all True and no object is
needed (the caption still names what is in the picture).

Excluded by default (`DEFAULT_EXCLUDE`, matched case-insensitively against class names):
"background"-like classes (background, void, unlabelled, other) and the two big surfaces that
are not objects, sky and road. Pass `exclude=()` to allow every class, or `classes=[...]` to
allow only some.

Skips are returned, never raised: `Skip(reason, detail)` with reason one of `SKIP_REASONS`.

The values an attribute takes and their edit prompts belong to each editor plugin
(`Editor.values`, `Editor.prompt_templates`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import ndimage

from segtk.core.editing import Sample, caption, phrase

DEFAULT_MIN_AREA = 0.2
DEFAULT_EXCLUDE = ("background", "_background_", "void", "unlabeled", "unlabelled", "other",
                   "sky", "road")
SKIP_REASONS = {
    "no-object": "no pixel of an allowed class (all excluded or ignore)",
    "tiny-object": "the largest object region is below --min-area",
    "bad-mask": "unusable object mask (size mismatch, whole image, or no interior)",
    "no-room": "the edit does not fit (e.g. the object cannot move that far inside the image)",
    "bad-data": "the image or label could not be read or does not fit the class list",
}

SCENE_CAPTION = "a photo of a scene with {things}"


@dataclass
class Skip:
    """Why an image gives no sample; `reason` is a key of SKIP_REASONS."""

    reason: str
    detail: str = ""


def scene_caption(label: np.ndarray, classes: Sequence[str], ignore_index: int = 255,
                  top: int = 3) -> str:
    """'a photo of a scene with road, building and sky': the largest classes by area."""
    ids, counts = np.unique(label[(label != ignore_index) & (label >= 0) & (label < len(classes))],
                            return_counts=True)
    order = [int(i) for i, _ in sorted(zip(ids, counts), key=lambda t: (-t[1], t[0]))][:top]
    names = [phrase(classes[i]) for i in order] or ["things"]
    things = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    return SCENE_CAPTION.format(things=things)


def allowed_classes(classes: Sequence[str], exclude: Sequence[str] | None = None,
                    only: Sequence[str] | None = None) -> list[int]:
    """Class ids that may be the salient object (`only` wins over `exclude`)."""
    names = [c.strip().lower() for c in classes]
    if only:
        wanted = {c.strip().lower() for c in only}
        return [i for i, n in enumerate(names) if n in wanted]
    banned = {c.strip().lower() for c in (DEFAULT_EXCLUDE if exclude is None else exclude)}
    return [i for i, n in enumerate(names) if n not in banned]


def largest_region(label: np.ndarray, class_ids: Sequence[int]) -> tuple[int, np.ndarray | None]:
    """(class id, bool mask) of the largest 4-connected single-class region; (-1, None) if none.
    Ties go to the lower class id, then to the region found first (row-major)."""
    best_area, best_cls, best_mask = 0, -1, None
    present = set(np.unique(label).tolist())
    for c in sorted(class_ids):
        if c not in present:
            continue
        regions, n = ndimage.label(label == c)
        if n == 0:
            continue
        areas = np.bincount(regions.ravel())
        areas[0] = 0
        k = int(areas.argmax())
        if areas[k] > best_area:
            best_area, best_cls, best_mask = int(areas[k]), c, regions == k
    return best_cls, best_mask


def prepare_sample(
    name: str,
    image: np.ndarray,
    label: np.ndarray,
    classes: Sequence[str],
    level: str = "object",
    min_area: float = DEFAULT_MIN_AREA,
    exclude: Sequence[str] | None = None,
    only: Sequence[str] | None = None,
    ignore_index: int = 255,
    max_area: float = 0.95,
) -> Sample | Skip:
    """A Sample (image, label, object mask, class, caption) or a Skip with its reason."""
    if image.ndim != 3 or label.shape != image.shape[:2]:
        return Skip("bad-mask", f"label {label.shape} does not match image {image.shape[:2]}")
    label = label.astype(np.int64, copy=False)
    if level == "image":
        whole = np.ones(label.shape, dtype=bool)
        return Sample(name, image, label, whole, list(classes), "",
                      scene_caption(label, classes, ignore_index), ignore_index)
    cls, mask = largest_region(label, allowed_classes(classes, exclude, only))
    if mask is None:
        return Skip("no-object", "no pixel of an allowed class")
    area = float(mask.mean())
    if area < min_area:
        return Skip("tiny-object", f"largest region ({classes[cls]}) covers {area:.1%} "
                                   f"< {min_area:.0%}")
    if area > max_area:
        return Skip("bad-mask", f"{classes[cls]} covers {area:.1%} of the image: nothing around it")
    interior = mask[1:-1, 1:-1] & mask[:-2, 1:-1] & mask[2:, 1:-1] & mask[1:-1, :-2] & mask[1:-1, 2:]
    if interior.sum() < 0.1 * mask.sum():
        return Skip("bad-mask", f"{classes[cls]} region is thin or ragged (no interior)")
    return Sample(name, image, label, mask, list(classes), classes[cls], caption(classes[cls]),
                  ignore_index)
