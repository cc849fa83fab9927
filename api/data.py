"""Any data object for the Python API: tensors, (image, label) pairs or a DataLoader as a
segtk Dataset, checked at the door.

segtk scores 8-bit images (what a PNG stores; attacks store and score their results that
way), so float images in [0,1] are rounded to the nearest of the 256 levels; labels are
integer class ids, 255 = ignore. The classes are the model's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader
from torch.utils.data import Dataset as TorchDataset

from segtk.core import Dataset, Item, SegtkError

__all__ = ["dataset_from_pairs", "dataset_from_tensors", "is_data_object", "dataset_of_object",
           "IGNORE"]

IGNORE = 255
SHAPES = "images [B,3,H,W] (float in [0,1] or uint8) and labels [B,H,W] (integer class ids, " \
         "255 = ignore)"


def is_data_object(data: Any) -> bool:
    """Whether `data` is one of the objects `dataset_of_object` reads (not a spec or Dataset)."""
    return isinstance(data, tuple | list | DataLoader | TorchDataset)


def dataset_of_object(data: Any, classes: Sequence[str], names: Sequence[str] | None = None
                      ) -> Dataset:
    """A pair of tensors (images, labels), a list of (image, label) pairs, a DataLoader or a
    torch Dataset yielding such pairs (or batches of them) as a segtk Dataset of `classes`."""
    if isinstance(data, tuple) and len(data) == 2 and all(isinstance(t, torch.Tensor | np.ndarray)
                                                          for t in data) \
            and _as_tensor(data[0], "images").dim() == 4:
        return dataset_from_tensors(data[0], data[1], classes, names)
    pairs: list[tuple[Any, Any]] = []
    for i, entry in enumerate(data):
        if not isinstance(entry, tuple | list) or len(entry) < 2:
            raise SegtkError(f"data entry {i} is {type(entry).__name__}, not an (image, label) pair",
                             hint=f"pass (images, labels) tensors, a list of (image, label) pairs "
                                  f"or a DataLoader yielding them: {SHAPES}")
        image, label = _as_tensor(entry[0], "images"), _as_tensor(entry[1], "labels")
        if image.dim() == 4:  # a DataLoader's batch
            if image.shape[0] != label.shape[0]:
                raise SegtkError(f"batch {i} holds {image.shape[0]} images and {label.shape[0]} "
                                 "labels", hint=SHAPES)
            pairs.extend(zip(image, label, strict=True))
        else:
            pairs.append((image, label))
    if not pairs:
        raise SegtkError("data holds no images", hint=f"pass {SHAPES}")
    sizes = {tuple(img.shape[-2:]) for img, _ in pairs}
    if len(sizes) == 1:
        images = torch.stack([img for img, _ in pairs])
        labels = torch.stack([torch.as_tensor(lab) for _, lab in pairs])
        return dataset_from_tensors(images, labels, classes, names)
    return dataset_from_pairs(pairs, classes, names)


def dataset_from_tensors(images: Any, labels: Any, classes: Sequence[str],
                         names: Sequence[str] | None = None) -> Dataset:
    """images [B,3,H,W] and labels [B,H,W] as a Dataset named `names` (default 00000, 00001, ...)."""
    x, y = _as_tensor(images, "images"), _as_tensor(labels, "labels")
    if x.dim() != 4 or x.shape[1] != 3:
        raise SegtkError(f"images have shape {tuple(x.shape)}, expected [B,3,H,W]", hint=SHAPES)
    if y.dim() != 3 or (y.shape[0], *y.shape[1:]) != (x.shape[0], *x.shape[2:]):
        raise SegtkError(f"labels have shape {tuple(y.shape)}, expected [B,H,W] = "
                         f"{(x.shape[0], *x.shape[2:])} for images {tuple(x.shape)}", hint=SHAPES)
    return dataset_from_pairs(list(zip(x, y, strict=True)), classes, names)


def dataset_from_pairs(pairs: Sequence[tuple[Any, Any]], classes: Sequence[str],
                       names: Sequence[str] | None = None) -> Dataset:
    """(image [3,H,W], label [H,W]) pairs as a Dataset: images checked and rounded to 8 bits,
    labels checked to be class ids of `classes` (or 255), all before anything runs."""
    names = [f"{i:05d}" for i in range(len(pairs))] if names is None else [str(n) for n in names]
    if len(names) != len(pairs) or len(set(names)) != len(names):
        raise SegtkError(f"names must be {len(pairs)} distinct names, one per image, got "
                         f"{len(names)} ({len(set(names))} distinct)")
    items = [Item(name, _image(image, name), _label(label, name, len(classes)))
             for name, (image, label) in zip(names, pairs, strict=True)]
    for item in items:
        if item.image.shape[:2] != item.label.shape:
            raise SegtkError(f"image {item.name}: label {tuple(item.label.shape)} differs from "
                             f"image {item.image.shape[:2]}", hint=SHAPES)
    return Dataset("tensors", list(classes), [(item.name, _reader(item)) for item in items])


def _reader(item: Item) -> Any:
    return lambda: item


def _as_tensor(value: Any, what: str) -> torch.Tensor:
    if isinstance(value, np.ndarray):
        return torch.from_numpy(value)
    if not isinstance(value, torch.Tensor):
        raise SegtkError(f"{what} are {type(value).__name__}, not tensors", hint=SHAPES)
    return value


def _image(image: torch.Tensor, name: str) -> np.ndarray:
    """[3,H,W] float in [0,1] or uint8 -> uint8 [H,W,3]."""
    if image.dim() != 3 or image.shape[0] != 3:
        raise SegtkError(f"image {name} has shape {tuple(image.shape)}, expected [3,H,W]",
                         hint=SHAPES)
    image = image.detach().cpu()
    if image.dtype == torch.uint8:
        return image.permute(1, 2, 0).contiguous().numpy()
    if not image.is_floating_point():
        raise SegtkError(f"image {name} is {image.dtype}, expected float in [0,1] or uint8",
                         hint=SHAPES)
    lo, hi = float(image.min()), float(image.max())
    if lo < 0 or hi > 1 or not np.isfinite([lo, hi]).all():
        raise SegtkError(f"image {name} holds values {lo:.3g}..{hi:.3g}, outside [0,1]",
                         hint="pass images before normalisation (the model's mean and std "
                              "go to segtk.wrap)")
    return (image * 255).round().to(torch.uint8).permute(1, 2, 0).contiguous().numpy()


def _label(label: Any, name: str, num_classes: int) -> np.ndarray:
    """[H,W] integer class ids (IGNORE allowed) -> int64; float or out-of-range ids refused."""
    label = _as_tensor(label, "labels")
    if label.is_floating_point() or label.is_complex() or label.dtype == torch.bool:
        raise SegtkError(f"labels of image {name} are {label.dtype}, not integer class ids",
                         hint="labels are int64 [H,W] class ids, 255 = ignore (e.g. "
                              "labels.long() if they hold whole numbers)")
    if label.dim() != 2:
        raise SegtkError(f"labels of image {name} have shape {tuple(label.shape)}, expected "
                         "[H,W]", hint=SHAPES)
    out = label.detach().cpu().to(torch.int64).numpy()
    bad = (out != IGNORE) & ((out < 0) | (out >= num_classes))
    if bad.any():
        ids = sorted(int(v) for v in np.unique(out[bad]))[:8]
        raise SegtkError(f"labels of image {name} hold ids {ids}, outside the model's "
                         f"{num_classes} classes (0-{num_classes - 1}, 255 = ignore)",
                         hint="check the label encoding and the model's class order")
    return out
