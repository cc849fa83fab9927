"""The hooks a segtk plugin may answer. Each receives a `register` callable.

A plugin implementing any other `register_*` name (a misspelling) is listed as broken, and a
name registered twice within one kind (two attacks called `dla`) is a conflict: both refused."""

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
    """Add Click commands to the `segtk` group. If this raises, nothing the plugin added is kept;
    a name segtk already has is refused (segtk's stays), and one two plugins add runs neither."""


@hookspec
def register_datasets(register: Register) -> None:
    """Register DatasetPlugin entries (a `--data FORMAT:PATH` reader each). A reader must refuse a
    `split` it has no use for (segtk.core.check_flat_split), never ignore it."""


@hookspec
def register_augmenters(register: Register) -> None:
    """Register Augmenter subclasses (`segtk train --augment NAME`)."""


@hookspec
def register_edit_backends(register: Register) -> None:
    """Register EditBackend subclasses (`segtk edit --backend NAME`; constructed with the
    `--param` options the editor does not know)."""


@hookspec
def register_prompt_writers(register: Register) -> None:
    """Register PromptWriter subclasses (`segtk edit --prompt-writer NAME --prompt-model MODEL`)."""
