"""Plugin discovery: pluggy plus entry points in group "segtk", one broken plugin at a time."""

from __future__ import annotations

import difflib
import importlib.metadata
import importlib.util
import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import pluggy

from segtk.core import _hookspecs as hookspecs
from segtk.core._errors import failure

GROUP = "segtk"
BUILTIN = "segtk"  # the core distribution's own plugins (dataset readers) always load
HOOKS = hookspecs.HOOKS  # one per plugin kind (core/_kinds.py), and register_commands


@dataclass
class Broken:
    """An entry point that failed to load, or implements a hook segtk does not define."""

    name: str
    distribution: str
    version: str
    error: str
    missing: str = ""  # the module it failed to import, when that is not installed at all


def missing_module(exc: BaseException) -> str:
    """The top-level module a plugin's import lacked, when the failure is a dependency that is
    not installed at all; "" otherwise (a missing module of the plugin's own package, or of
    another installed package, is a bug or a version mismatch: "broken")."""
    if not isinstance(exc, ModuleNotFoundError) or not exc.name:
        return ""
    top = exc.name.partition(".")[0]
    try:
        found = importlib.util.find_spec(top) is not None
    except (ImportError, ValueError):
        found = False
    return "" if found else top


def contained(exc: BaseException) -> bool:
    """Whether a plugin's exception is kept from ending segtk: everything but the user's Ctrl-C
    (a SystemExit or other BaseException at import or in a hook must not end every command)."""
    return not isinstance(exc, KeyboardInterrupt)


def entry_points() -> Iterable[Any]:
    """The installed entry points of group "segtk" (a seam for tests)."""
    return importlib.metadata.entry_points(group=GROUP)


def unknown_hook_message(exc: pluggy.PluginValidationError) -> str:
    """pluggy's message, plus the hook the author probably meant."""
    message = str(exc)
    hook = message.split("'")[1] if message.startswith("unknown hook '") else ""
    close = difflib.get_close_matches(hook, HOOKS, n=1)
    return f"{message} (did you mean {close[0]}?)" if close else message


class PluginManager(pluggy.PluginManager):
    def __init__(self) -> None:
        super().__init__(GROUP)
        self.add_hookspecs(hookspecs.SPECS)
        self.broken: list[Broken] = []
        self.distributions: dict[str, tuple[str, str]] = {}

    def load_entry_points(self) -> None:
        """Load every entry point allowed by SEGTK_LOAD_PLUGINS (segtk's own built-ins always);
        record the ones that fail."""
        allowed = os.environ.get("SEGTK_LOAD_PLUGINS")
        wanted = None if allowed is None else {n.strip() for n in allowed.split(",") if n.strip()}
        for ep in entry_points():
            dist = (ep.dist.name, ep.dist.version) if ep.dist else ("?", "?")
            if wanted is not None and ep.name not in wanted and dist[0] != BUILTIN:
                continue
            name = ep.name
            if self.has_plugin(name):
                if self.distributions.get(name, dist)[0] == dist[0]:
                    continue  # the same distribution found twice
                # Another distribution reusing the entry-point name is loaded too, under its own
                # key, so whatever it registers meets the registry's name-conflict check.
                name = f"{ep.name} ({dist[0]})"
            try:
                self.register(ep.load(), name=name)
                self.distributions[name] = dist
            except BaseException as exc:  # a broken plugin must never take the CLI down
                if not contained(exc):
                    raise
                self.broken.append(Broken(name, dist[0], dist[1], failure(exc),
                                          missing_module(exc)))
        self.check_hooks()

    def check_hooks(self) -> None:
        """Unregister, as broken, each plugin implementing a hook segtk does not define (a
        misspelt `register_attack` would otherwise be ignored without a word)."""
        while True:
            try:
                self.check_pending()
                return
            except pluggy.PluginValidationError as exc:
                name = self.get_name(exc.plugin) or repr(exc.plugin)
                dist = self.distributions.pop(name, ("?", "?"))
                self.unregister(exc.plugin)
                self.broken.append(Broken(name, dist[0], dist[1], unknown_hook_message(exc)))


_manager: PluginManager | None = None


def get_plugin_manager() -> PluginManager:
    global _manager
    if _manager is None:
        _manager = PluginManager()
        _manager.load_entry_points()
    return _manager


def reset_plugin_manager() -> None:
    """Forget loaded plugins (tests, or after installing a plugin in-process)."""
    global _manager
    _manager = None
