"""Python objects (a model, a dataset) that a benchmark running in this process names by a
spec, `python:NAME`: `segtk.bench_attacks(net, ...)` plans its shards with such specs, and
`load_segmenter`/`load_dataset` hand the object back while the benchmark runs. A worker
process has none of them, so such a spec there is one clear error, never another model."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from segtk.core._errors import SegtkError

__all__ = ["PREFIX", "in_process", "in_process_object"]

PREFIX = "python:"
_OBJECTS: dict[str, Any] = {}


@contextmanager
def in_process(objects: Mapping[str, Any]) -> Iterator[None]:
    """Name `objects` (spec -> model or dataset, specs starting with PREFIX) for the block."""
    clash = [spec for spec in objects if spec in _OBJECTS or not spec.startswith(PREFIX)]
    if clash:
        raise SegtkError(f"{clash[0]} names another Python object already (a benchmark is "
                         "running with it in this process)", hint="run one benchmark at a time")
    _OBJECTS.update(objects)
    try:
        yield
    finally:
        for spec in objects:
            _OBJECTS.pop(spec, None)


def in_process_object(spec: str) -> Any | None:
    """The object `spec` names in this process; None for an ordinary spec."""
    if not spec.startswith(PREFIX):
        return None
    if spec not in _OBJECTS:
        raise SegtkError(f"{spec} is a Python object of the process that started the benchmark: "
                         "this process cannot load it",
                         hint="run the benchmark in-process (executor='inline' or workers=1), "
                              "or pass a spec (see `segtk models`, `segtk datasets`)")
    return _OBJECTS[spec]
