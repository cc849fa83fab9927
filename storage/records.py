"""Typed run records: one dataclass per kind of line a run appends, read and written in one place.

A job builds its record class (defined next to the job) and appends `record.to_json()`; reports,
resume and the Python API read lines back with `from_json`, so a key is spelled once and a
record that lacks one fails naming the file's record and the key instead of a KeyError deep in
a report. Old runs still read: a field added later has a default and is left out of the line
while it holds that default ("absent" and "default" are the same record), and keys a reader
does not know are kept in `extra` and written back unchanged.

A record also reads as the JSON object of its line (`rec["queries"]`, `rec.get("stopped")`,
`dict(rec)`): code written when records were dicts (the Python API's `records`) keeps working.
segtk's own code uses the attributes, which mypy checks.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar, Self

from segtk.core import SegtkError
from segtk.storage.runs import finite_json

__all__ = ["Record"]


@dataclasses.dataclass(kw_only=True)
class Record(Mapping[str, Any]):
    """Base of the run records. Subclasses are `@dataclass(kw_only=True)`; `OMIT_DEFAULT` names
    fields left out of the line while they hold their default (fields added after runs were
    made: writing them would change every old run's lines on rewrite); `KEYS` maps a field to
    its line's key where the two differ (a key that is a Python keyword: "class")."""

    KIND: ClassVar[str] = "record"  # what the error messages call it, e.g. "attack result"
    OMIT_DEFAULT: ClassVar[tuple[str, ...]] = ()
    KEYS: ClassVar[Mapping[str, str]] = {}
    extra: dict[str, Any] = dataclasses.field(default_factory=dict, repr=False, compare=False)

    def to_json(self) -> dict[str, Any]:
        """The JSON object of the line, keys in field order, then `extra`: strict JSON, NaN and
        ±inf (e.g. the PSNR of an unchanged image) as None, since other readers reject them."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            if f.name == "extra":
                continue
            value = getattr(self, f.name)
            if f.name in self.OMIT_DEFAULT and value == _default(f):
                continue
            out[self.KEYS.get(f.name, f.name)] = value
        return finite_json({**out, **self.extra})

    def __getitem__(self, key: str) -> Any:
        """`to_json()[key]` without building the whole line."""
        if key in self.extra:
            return self.extra[key]
        f = _line_fields(type(self)).get(key)
        if f is None:
            raise KeyError(key)
        value = getattr(self, f.name)
        if f.name in self.OMIT_DEFAULT and value == _default(f):
            raise KeyError(key)
        return value

    def __iter__(self) -> Iterator[str]:
        return iter(self.to_json())

    def __len__(self) -> int:
        return len(self.to_json())

    @classmethod
    def keyed(cls, lines: Mapping[str, Any], file: object) -> dict[str, Self]:
        """`runs.read_results`' lines (by key) as records; an error names `file` and the key."""
        return {key: cls.from_json(line, where=f"{file}, {key}") for key, line in lines.items()}

    @classmethod
    def from_json(cls, data: Mapping[str, Any], where: str = "") -> Self:
        """The record a line holds. `where` (e.g. "OUT/results.jsonl, image 0001TP") names it in
        the error a missing key raises."""
        if not isinstance(data, Mapping):
            raise SegtkError(f"{where or cls.KIND}: not a JSON object",
                             hint="the file was not written by segtk; choose another --out")
        names = _line_fields(cls)
        missing = [k for k, f in names.items() if k not in data and _default(f) is _REQUIRED]
        if missing:
            raise SegtkError(f"{where or cls.KIND}: a {cls.KIND} without {', '.join(missing)}",
                             hint="the file was not written by this segtk, or was edited by hand; "
                                  "rerun into a new --out")
        known = {f.name: data[k] for k, f in names.items() if k in data}
        return cls(**known, extra={k: v for k, v in data.items() if k not in names})


_REQUIRED = object()


@functools.cache
def _line_fields(cls: type[Record]) -> dict[str, dataclasses.Field[Any]]:
    """A record class's line key -> field (all but `extra`)."""
    return {cls.KEYS.get(f.name, f.name): f for f in dataclasses.fields(cls) if f.name != "extra"}


def _default(f: dataclasses.Field[Any]) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return _REQUIRED
