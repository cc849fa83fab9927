"""The hooks a segtk plugin may answer: one `register_*` per plugin kind (the table in
core/_kinds.py), each receiving a `register` callable, and `register_commands(cli)`. A kind's
former hook name (`Kind.old_hook`) is still read, with a DeprecationWarning naming the new one.

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


def _kind_hook(name: str, doc: str) -> Callable[[Register], None]:
    """The hook specification `name(register)` of one kind."""

    def hook(register: Register) -> None:
        pass

    hook.__name__ = hook.__qualname__ = name
    hook.__doc__ = doc
    return hook


def _old_hook(kind: Kind) -> Callable[[Register], None]:
    """A kind's former hook, still read: pluggy warns when a plugin implementing it registers."""
    message = f"{kind.old_hook} is deprecated: implement {kind.hook} (same signature) instead"
    return hookspec(warn_on_impl=DeprecationWarning(message))(
        _kind_hook(kind.old_hook, f"Deprecated: use {kind.hook}. {kind.doc}"))


# What pluggy reads the specifications from (PluginManager.add_hookspecs): a class of them.
SPECS: type = type("HookSpecs", (), {
    **{k.hook: hookspec(_kind_hook(k.hook, k.doc)) for k in KINDS},
    **{k.old_hook: _old_hook(k) for k in KINDS if k.old_hook},
    "register_commands": hookspec(register_commands)})
OLD_HOOKS: frozenset[str] = frozenset(k.old_hook for k in KINDS if k.old_hook)
# The hooks to implement (what a misspelt one is matched against): the former names left out.
HOOKS: list[str] = sorted(name for name in vars(SPECS)
                          if name.startswith("register_") and name not in OLD_HOOKS)
