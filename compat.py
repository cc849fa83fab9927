"""Whether a model can be scored on a dataset's labels: the same classes, named alike, in the
same order. segtk's jobs and benchmarks check it before they run; not plugin API."""

from __future__ import annotations

from collections.abc import Iterable

import torch

from segtk.core import DataError, Dataset, Segmenter
from segtk.core._specs import cached_segmenter


def class_key(name: str) -> str:
    """How class names are compared: case-insensitive, ignoring spaces, '_', '-' and other
    punctuation, so 'Traffic_Light', 'traffic light' and 'trafficlight' are one class."""
    return "".join(c for c in name.casefold() if c.isalnum())


def first_difference(model_classes: list[str], data_classes: list[str]) -> int | None:
    """The first index where two class lists name different classes (see `class_key`)."""
    for i, (a, b) in enumerate(zip(model_classes, data_classes)):
        if class_key(a) != class_key(b):
            return i
    return None


def check_compatible(model: Segmenter, dataset: Dataset, classes_from_data: bool = False) -> None:
    """A model can only be scored on labels from its own class list: the same number of classes,
    with the same names in the same order (`class_key`), unless `classes_from_data` says to trust
    that the model's outputs are the dataset's classes in order."""
    if model.num_classes != len(dataset.classes):
        raise DataError(
            f"model {model.name} predicts {model.num_classes} classes but dataset {dataset.name} "
            f"has {len(dataset.classes)}",
            hint="use a model trained on this dataset's classes (see `segtk models`)",
        )
    i = None if classes_from_data else first_difference(model.classes, dataset.classes)
    if i is not None:
        raise DataError(
            f"model {model.name} and dataset {dataset.name} name their classes differently, first "
            f"at index {i}: model {model.classes[i]!r}, dataset {dataset.classes[i]!r} "
            f"(model: {';'.join(model.classes)}; dataset: {';'.join(dataset.classes)})",
            hint="if the model's outputs are the dataset's classes in this order, pass "
                 "--classes-from-data, or name them in the model spec, quoted for the shell: "
                 "--model 'SPEC,classes=a;b;c' "
                 "(`segtk datasets SPEC` lists a dataset's classes)",
        )


def check_models(specs: Iterable[str], dataset: Dataset, classes_from_data: bool = False,
                 device: str | torch.device | None = "cpu") -> None:
    """Every model of a benchmark against its data, before the benchmark writes anything."""
    for spec in dict.fromkeys(specs):
        check_compatible(cached_segmenter(spec, device), dataset, classes_from_data)
