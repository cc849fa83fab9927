"""Build an attack from CLI options: shared knobs plus `--param key=value` for its own."""

from __future__ import annotations

import dataclasses

from segtk.core import registry
from segtk.core.attack import Attack
from segtk.core.errors import SegtkError


def parse_value(raw: str, current: object) -> object:
    kind = type(current)
    try:
        if kind is bool:
            return raw.lower() in ("1", "true", "yes", "on")
        return kind(raw) if current is not None else raw
    except ValueError as exc:
        raise SegtkError(f"cannot read {raw!r} as {kind.__name__}") from exc


def build_attack(name: str, extra: tuple[str, ...] = (), **shared: object) -> Attack:
    cls = registry.attack(name)
    defaults = cls.Params()
    fields = {f.name for f in dataclasses.fields(defaults)}
    values = dict(shared)
    for item in extra:
        key, sep, raw = item.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or key not in fields:
            raise SegtkError(
                f"unknown parameter {item!r} for attack {name!r}",
                hint=f"{name} takes: {', '.join(sorted(fields))}",
            )
        if key in shared:  # one value, one place: --param must not silently override --budget
            raise SegtkError(
                f"--param {item.strip()}: {key} has its own option",
                hint=f"use --{key.replace('_', '-')} {raw.strip()} instead of --param",
            )
        values[key] = parse_value(raw.strip(), getattr(defaults, key))
    try:
        return cls(**values)
    except (ValueError, TypeError) as exc:
        raise SegtkError(f"bad parameters for {name}: {exc}") from exc
