"""The hooks a segtk plugin may answer. Each receives a `register` callable."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pluggy

hookspec = pluggy.HookspecMarker("segtk")
hookimpl = pluggy.HookimplMarker("segtk")

Register = Callable[[Any], None]


@hookspec
def register_attacks(register: Register) -> None:
    """Register Attack subclasses."""


@hookspec
def register_segmenters(register: Register) -> None:
    """Register SegmenterPlugin entries (a `--model PREFIX:ARG` loader each)."""


@hookspec
def register_editors(register: Register) -> None:
    """Register Editor subclasses."""


@hookspec
def register_filters(register: Register) -> None:
    """Register Filter subclasses."""


@hookspec
def register_commands(cli: Any) -> None:
    """Add Click commands to the `segtk` group."""


@hookspec
def register_datasets(register: Register) -> None:
    """Register DatasetPlugin entries (a `--data FORMAT:PATH` reader each)."""
