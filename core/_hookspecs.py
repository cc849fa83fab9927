"""The hooks a segtk plugin may answer: one `register_*` per plugin kind (the table in
core/_kinds.py), each receiving a `register` callable, and `register_commands(cli)`.

A plugin implementing any other `register_*` name (a misspelling) is listed as broken, and a
name registered twice within one kind (two attacks called `dla`) is a conflict: both refused."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pluggy

from segtk.core._kinds import KINDS, Kind

hookspec = pluggy.HookspecMarker("segtk")
hookimpl = pluggy.HookimplMarker("segtk")

Register = Callable[[Any], None]


def register_commands(cli: Any) -> None:
    """Add Click commands to the `segtk` group. If this raises, nothing the plugin added is kept;
    a name segtk already has is refused (segtk's stays), and one two plugins add runs neither."""


def _kind_hook(kind: Kind) -> Callable[[Register], None]:
    """The hook specification of one kind: `register_<kind>s(register)`."""

    def hook(register: Register) -> None:
        pass

    hook.__name__ = hook.__qualname__ = kind.hook
    hook.__doc__ = kind.doc
    return hook


# What pluggy reads the specifications from (PluginManager.add_hookspecs): a class of them.
SPECS: type = type("HookSpecs", (), {**{k.hook: hookspec(_kind_hook(k)) for k in KINDS},
                                     "register_commands": hookspec(register_commands)})
HOOKS: list[str] = sorted(name for name in vars(SPECS) if name.startswith("register_"))
