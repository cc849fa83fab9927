"""Models and data of a benchmark as specs its shards can load: a spec as it is, a Python
object (a loaded or wrapped model, a dataset, tensors) as a `python:NAME` spec that this
process hands back while the benchmark runs (core._inprocess), so such a benchmark runs its
shards in this process."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from segtk.api.data import dataset_of_object, is_data_object
from segtk.api.loading import SPEC, model_of
from segtk.api.models import ModelKeywords
from segtk.core import Dataset, SegtkError
from segtk.core._inprocess import PREFIX
from segtk.core._specs import cached_segmenter

__all__ = ["BenchInputs", "bench_inputs"]


@dataclass
class BenchInputs:
    models: list[str]  # specs, `python:NAME` for an object
    data: str
    objects: dict[str, Any] = field(default_factory=dict)  # python:NAME -> the object
    executor: str = "local"


def bench_inputs(models: Any, data: Any, what: str, keywords: ModelKeywords, executor: str,
                 workers: int | None, device: str) -> BenchInputs:
    """The specs of `models` (one or a list) and `data`; objects named `python:NAME` in
    `objects`. With objects the shards run in this process: several workers or Ray, which
    would need to load them in their own processes, are refused."""
    listed = [models] if isinstance(models, str) or not isinstance(models, Sequence) \
        else list(models)
    objects: dict[str, Any] = {}
    specs: list[str] = []
    for model in listed:
        if isinstance(model, str) and not keywords.given():
            specs.append(model)
            continue
        segmenter = model_of(model, device, keywords)
        spec = getattr(segmenter, SPEC, None)  # loaded from a spec: each shard loads its own
        if spec is None:
            spec = _name(f"{PREFIX}{segmenter.name}", objects)
            objects[spec] = segmenter
        specs.append(spec)
    if isinstance(data, str):
        data_spec = data
    else:
        if is_data_object(data) and not isinstance(data, Dataset):
            if not specs:
                raise SegtkError(f"{what}: models names no model", hint="e.g. models=['demo']")
            first = objects.get(specs[0]) or cached_segmenter(specs[0], device)
            data = dataset_of_object(data, first.classes)
        if not isinstance(data, Dataset):
            raise SegtkError(f"data must be a spec (str), a segtk Dataset, tensors, pairs or a "
                             f"DataLoader, not {type(data).__name__}",
                             hint="e.g. 'demo' or segtk.load_dataset('demo')")
        data_spec = _name(f"{PREFIX}data:{data.name}", objects)
        objects[data_spec] = data
    if objects:
        if executor == "ray" or (executor == "local" and workers not in (None, 1)
                                 and device == "cpu"):
            raise SegtkError(f"{what}: {', '.join(objects)} (Python objects of this process) "
                             f"cannot be sent to the workers of executor={executor!r}"
                             f"{f' with workers={workers}' if workers else ''}",
                             hint="run it in this process (workers=1 or executor='inline'), or "
                                  "pass specs (see `segtk models`, `segtk datasets`)")
        executor = "inline"
    return BenchInputs(specs, data_spec, objects, executor)


def _name(base: str, taken: dict[str, Any]) -> str:
    """`base`, or base#2, base#3, ... when another object has it."""
    name, n = base, 1
    while name in taken:
        n += 1
        name = f"{base}#{n}"
    return name
