"""Sample preparation (Gen4Seg §IV-A): the salient object, its mask and a caption.

For object-level edits (colour, material, size, position) the salient object is the largest
connected region (4-connectivity) of a single class, among classes that are not excluded; a
sample needs it to cover at least `min_area` of the image (0.2 by default, the paper's 20%).
Image-level edits (style, weather) edit the whole image: the mask is all True and no object is
needed (the caption still names what is in the picture).

Two options follow Gen4Seg §IV-A more closely (both off by default, so nothing changes unless
asked): `things` restricts the object to thing classes (countable objects: COCO-EA edits COCO
thing classes only; a dataset reader declares its things, `Dataset.things`), and
`objects="ranked"` ranks every instance (a 4-connected single-class region) by area, largest
first, as the paper ranks objects, and takes the first whose mask is usable, where `"largest"`
(the default) skips the image when the largest region's mask is not (too thin or ragged, or
covering nearly the whole image). The paper names no other ranking criterion (its "minimal
occlusion" is a manual cleaning step), so none is invented here.

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

from segtk.core import Sample
from segtk.core._editing import caption, phrase

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
OBJECT_RULES = ("largest", "ranked")


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


def thing_classes(classes: Sequence[str], allowed: Sequence[int], things: Sequence[str]) -> list[int]:
    """The `allowed` class ids whose name is among `things` (case-insensitive)."""
    wanted = {t.strip().lower() for t in things}
    return [i for i in allowed if classes[i].strip().lower() in wanted]


def label_regions(mask: np.ndarray) -> tuple[np.ndarray, int]:
    """(labels, n): the 4-connected regions of a 2-D bool mask numbered 1..n in the raster order
    of their first pixel, 0 off the mask -- what scipy.ndimage.label gives, in numpy, so that the
    core does not need scipy (140 MB) for this one function. The nodes are each row's runs of
    True; runs that touch vertically are joined by union-find on the lowest run number, which
    is the region's first run."""
    mask = np.asarray(mask, dtype=bool)
    starts = mask.copy()
    starts[:, 1:] &= ~mask[:, :-1]  # the first pixel of each run in its row
    run = np.cumsum(starts.ravel()).reshape(mask.shape) - 1  # runs numbered in raster order
    n = int(starts.sum())
    if n == 0:
        return np.zeros(mask.shape, dtype=np.int32), 0
    touching = mask[:-1] & mask[1:]
    pairs = np.unique(run[:-1][touching] * n + run[1:][touching])
    root = lowest_connected(n, pairs // n, pairs % n)
    is_root = root == np.arange(n)
    number = np.cumsum(is_root, dtype=np.int32)  # the regions numbered by their first run
    return np.where(mask, number[root][run], 0).astype(np.int32), int(is_root.sum())


def lowest_connected(n: int, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """For nodes 0..n-1 joined by edges a[i]-b[i]: each node's lowest connected node. Each round
    hooks every root onto the lowest root it touches, then flattens the trees (each node points
    at its root), until no edge joins two roots."""
    root = np.arange(n)
    while a.size:
        ra, rb = root[a], root[b]
        apart = ra != rb
        a, b = a[apart], b[apart]
        np.minimum.at(root, np.maximum(ra[apart], rb[apart]), np.minimum(ra[apart], rb[apart]))
        while not np.array_equal(up := root[root], root):
            root = up
    return root


@dataclass
class Instance:
    """One 4-connected region of one class: `mask()` is `regions == index`."""

    class_id: int
    area: int
    regions: np.ndarray  # the class's connected-component labels (shared by its instances)
    index: int

    def mask(self) -> np.ndarray:
        return self.regions == self.index


def ranked_instances(label: np.ndarray, class_ids: Sequence[int],
                     min_pixels: int = 1) -> list[Instance]:
    """Every 4-connected single-class region of `class_ids` with at least `min_pixels`, largest
    first; ties go to the lower class id, then to the region found first (row-major), so the
    first is `largest_region`'s."""
    found = []
    present = set(np.unique(label).tolist())
    for c in sorted(class_ids):
        if c not in present:
            continue
        regions, _ = label_regions(label == c)
        areas = np.bincount(regions.ravel())
        found += [Instance(c, int(areas[k]), regions, k) for k in range(1, len(areas))
                  if areas[k] >= max(min_pixels, 1)]
    return sorted(found, key=lambda i: (-i.area, i.class_id, i.index))


def largest_region(label: np.ndarray, class_ids: Sequence[int]) -> tuple[int, np.ndarray | None]:
    """(class id, bool mask) of the largest 4-connected single-class region; (-1, None) if none.
    Ties go to the lower class id, then to the region found first (row-major)."""
    best_area, best_cls, best_mask = 0, -1, None
    present = set(np.unique(label).tolist())
    for c in sorted(class_ids):
        if c not in present:
            continue
        regions, _ = label_regions(label == c)  # c is present: one region at least
        areas = np.bincount(regions.ravel())
        areas[0] = 0
        k = int(areas.argmax())
        if areas[k] > best_area:
            best_area, best_cls, best_mask = int(areas[k]), c, regions == k
    return best_cls, best_mask


def mask_problem(mask: np.ndarray, name: str, min_area: float,
                 max_area: float) -> Skip | None:
    """Why `mask` (an object of class `name`) cannot be the edited object, or None."""
    area = float(mask.mean())
    if area < min_area:
        return Skip("tiny-object", f"largest region ({name}) covers {area:.1%} < {min_area:.0%}")
    if area > max_area:
        return Skip("bad-mask", f"{name} covers {area:.1%} of the image: nothing around it")
    interior = mask[1:-1, 1:-1] & mask[:-2, 1:-1] & mask[2:, 1:-1] & mask[1:-1, :-2] & mask[1:-1, 2:]
    if interior.sum() < 0.1 * mask.sum():
        return Skip("bad-mask", f"{name} region is thin or ragged (no interior)")
    return None


def pick_object(label: np.ndarray, classes: Sequence[str], class_ids: Sequence[int],
                objects: str, min_area: float, max_area: float) -> tuple[int, np.ndarray] | Skip:
    """(class id, mask) of the object to edit by rule `objects` (see the module doc), or why
    there is none: the largest region's problem, for either rule."""
    if objects not in OBJECT_RULES:
        raise ValueError(f"objects={objects!r} is not one of {', '.join(OBJECT_RULES)}")
    if objects == "largest":
        cls, mask = largest_region(label, class_ids)
        candidates = [] if mask is None else [(cls, mask)]
    else:  # only instances of at least min_area (as mask_problem reckons it) can pass
        ranked = [i for i in ranked_instances(label, class_ids) if i.area / label.size >= min_area]
        candidates = [(i.class_id, i.mask()) for i in ranked]
        if not candidates:  # say why the largest one fails, as "largest" does
            cls, mask = largest_region(label, class_ids)
            candidates = [] if mask is None else [(cls, mask)]
    if not candidates:
        return Skip("no-object", "no pixel of an allowed class")
    problems = []
    for cls, mask in candidates:
        problem = mask_problem(mask, classes[cls], min_area, max_area)
        if problem is None:
            return cls, mask
        problems.append(problem)
    return problems[0]


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
    objects: str = "largest",
    things: Sequence[str] | None = None,
) -> Sample | Skip:
    """A Sample (image, label, object mask, class, caption) or a Skip with its reason.
    `things`: only these classes (thing classes) may be the object, within `exclude`/`only`;
    `objects`: "largest" region or first usable of the "ranked" instances."""
    if image.ndim != 3 or label.shape != image.shape[:2]:
        return Skip("bad-mask", f"label {label.shape} does not match image {image.shape[:2]}")
    label = label.astype(np.int64, copy=False)
    if level == "image":
        whole = np.ones(label.shape, dtype=bool)
        return Sample(name, image, label, whole, list(classes), "",
                      scene_caption(label, classes, ignore_index), ignore_index)
    allowed = allowed_classes(classes, exclude, only)
    if things is not None:
        allowed = thing_classes(classes, allowed, things)
    picked = pick_object(label, classes, allowed, objects, min_area, max_area)
    if isinstance(picked, Skip):
        return picked
    cls, mask = picked
    return Sample(name, image, label, mask, list(classes), classes[cls], caption(classes[cls]),
                  ignore_index)
