"""Plugin discovery: pluggy plus entry points in group "segtk", imported when used, one broken
plugin at a time."""

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
    names: tuple[str, ...] = ()  # its entry-point names (a plugin may declare several)


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


def _key(ep: Any) -> tuple[str, str]:
    """One plugin: a distribution's module, however many entry points name it."""
    return (ep.dist.name if ep.dist else "?", getattr(ep, "value", ep.name))


class PluginManager(pluggy.PluginManager):
    """Knows every plugin by name from entry-point metadata and imports one only when it is
    used (`load`), listed or shown (`load_entry_points`): a command start imports nothing of
    the plugins it does not use.

    The rule that makes this sound: an entry point's name is the name of what its plugin
    registers (a plugin registering several names declares one entry point per name, all
    naming its module). A registration under another name is refused (see registry)."""

    def __init__(self) -> None:
        super().__init__(GROUP)
        self.add_hookspecs(hookspecs.SPECS)
        self.broken: list[Broken] = []
        self.distributions: dict[str, tuple[str, str]] = {}
        self.names: dict[str, tuple[str, ...]] = {}  # plugin -> the entry-point names it owns
        self._table: dict[str, list[Any]] | None = None  # entry-point name -> entry points
        self._units: dict[tuple[str, str], list[str]] = {}  # plugin -> all its entry-point names
        self._loaded: set[tuple[str, str]] = set()

    def table(self) -> dict[str, list[Any]]:
        """Entry-point name -> entry points, read from metadata (nothing imported), restricted
        by SEGTK_LOAD_PLUGINS (segtk's own built-ins always)."""
        if self._table is None:
            allowed = os.environ.get("SEGTK_LOAD_PLUGINS")
            wanted = (None if allowed is None
                      else {n.strip() for n in allowed.split(",") if n.strip()})
            self._table, self._units = {}, {}
            for ep in entry_points():
                self._units.setdefault(_key(ep), []).append(ep.name)
                if wanted is None or ep.name in wanted or _key(ep)[0] == BUILTIN:
                    self._table.setdefault(ep.name, []).append(ep)
        return self._table

    def load(self, name: str) -> None:
        """Import segtk's built-ins and the plugins whose entry point is called `name` (every
        distribution's: two claiming one name meet the registry's conflict check)."""
        self.load_builtins()
        for ep in self.table().get(name, []):
            self._load(ep)

    def load_builtins(self) -> None:
        for eps in list(self.table().values()):
            for ep in eps:
                if _key(ep)[0] == BUILTIN:
                    self._load(ep)

    def load_entry_points(self) -> None:
        """Import every plugin (listing, or a name no entry point declares); record the ones
        that fail."""
        for eps in list(self.table().values()):
            for ep in eps:
                self._load(ep)

    def _load(self, ep: Any) -> None:
        key = _key(ep)
        if key in self._loaded:
            return
        self._loaded.add(key)
        dist = (ep.dist.name, ep.dist.version) if ep.dist else ("?", "?")
        names = tuple(self._units.get(key, [ep.name]))
        name = names[0]
        if self.has_plugin(name) or any(b.name == name for b in self.broken):
            # Another distribution reusing the entry-point name is loaded too, under its own
            # key, so whatever it registers meets the registry's name-conflict check.
            name = f"{name} ({dist[0]})"
        try:
            self.register(ep.load(), name=name)
            self.distributions[name] = dist
            self.names[name] = names
        except BaseException as exc:  # a broken plugin must never take the CLI down
            if not contained(exc):
                raise
            self.broken.append(Broken(name, dist[0], dist[1], failure(exc), missing_module(exc),
                                      names))
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
    """The plugin manager; plugins are imported as they are used (`load`) or listed."""
    global _manager
    if _manager is None:
        _manager = PluginManager()
    return _manager


def reset_plugin_manager() -> None:
    """Forget loaded plugins (tests, or after installing a plugin in-process)."""
    global _manager
    _manager = None
