"""Plugin discovery: pluggy plus entry points in group "segtk", one broken plugin at a time."""

from __future__ import annotations

import importlib.metadata
import os
from dataclasses import dataclass

import pluggy

from segtk.core import hookspecs

GROUP = "segtk"


@dataclass
class Broken:
    name: str
    distribution: str
    version: str
    error: str


class PluginManager(pluggy.PluginManager):
    def __init__(self) -> None:
        super().__init__(GROUP)
        self.add_hookspecs(hookspecs)
        self.broken: list[Broken] = []
        self.distributions: dict[str, tuple[str, str]] = {}

    def load_entry_points(self) -> None:
        """Load every entry point allowed by SEGTK_LOAD_PLUGINS; record the ones that fail."""
        allowed = os.environ.get("SEGTK_LOAD_PLUGINS")
        wanted = None if allowed is None else {n.strip() for n in allowed.split(",") if n.strip()}
        for ep in importlib.metadata.entry_points(group=GROUP):
            if (wanted is not None and ep.name not in wanted) or self.has_plugin(ep.name):
                continue
            dist = (ep.dist.name, ep.dist.version) if ep.dist else ("?", "?")
            try:
                self.register(ep.load(), name=ep.name)
                self.distributions[ep.name] = dist
            except Exception as exc:  # a broken plugin must never take the CLI down
                error = f"{type(exc).__name__}: {exc}"
                self.broken.append(Broken(ep.name, dist[0], dist[1], error))


_manager: PluginManager | None = None


def _version() -> str:
    from segtk import __version__

    return __version__


def get_plugin_manager() -> PluginManager:
    global _manager
    if _manager is None:
        from segtk.datasets import readers as datasets

        _manager = PluginManager()
        _manager.register(datasets, name="segtk.datasets")  # built-in readers, same mechanism
        _manager.distributions["segtk.datasets"] = ("segtk", _version())
        _manager.load_entry_points()
    return _manager


def reset_plugin_manager() -> None:
    """Forget loaded plugins (tests, or after installing a plugin in-process)."""
    global _manager
    _manager = None
    from segtk.core import registry

    registry.reset()
