"""What the plugins registered, with the status `segtk plugins` shows, and typed lookups."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from segtk.core.errors import PluginError
from segtk.core.plugins import get_plugin_manager
from segtk.core.segmenter import Segmenter

KINDS = {
    "attack": "register_attacks",
    "segmenter": "register_segmenters",
    "editor": "register_editors",
    "filter": "register_filters",
    "dataset": "register_datasets",
}


@dataclass
class SegmenterPlugin:
    """A `--model NAME:ARG` loader. `load(arg)` returns a ready Segmenter."""

    name: str
    load: Callable[[str], Segmenter]
    syntax: str
    example: str
    description: str = ""
    requires: tuple[str, ...] = ()
    install: str = ""
    convert: Callable[[str, str], None] | None = None  # `segtk models convert NAME IN OUT`


@dataclass
class PluginInfo:
    name: str
    kind: str
    plugin: str  # the entry point / pluggy name that registered it
    distribution: str
    version: str
    hook: str
    obj: Any = None
    error: str = ""
    missing: list[str] = field(default_factory=list)
    install: str = ""

    @property
    def status(self) -> str:
        if self.error:
            return "broken"
        return "missing dependency" if self.missing else "ok"


def missing_modules(modules: tuple[str, ...]) -> list[str]:
    """Top-level modules that cannot be imported here (checked without importing them)."""
    missing = []
    for mod in modules:
        try:
            found = importlib.util.find_spec(mod) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            missing.append(mod)
    return missing


_infos: list[PluginInfo] | None = None


def reset() -> None:
    global _infos
    _infos = None


def plugins() -> list[PluginInfo]:
    """Everything registered, plus broken entry points, in a stable order."""
    global _infos
    if _infos is not None:
        return _infos
    pm = get_plugin_manager()
    infos: list[PluginInfo] = []
    for kind, hook in KINDS.items():
        for impl in getattr(pm.hook, hook).get_hookimpls():
            dist, version = pm.distributions.get(impl.plugin_name, ("(registered object)", ""))

            def register(obj: Any, _impl=impl, _kind=kind, _hook=hook, _d=dist, _v=version):
                name = obj.name
                requires = tuple(getattr(obj, "requires", ()))
                infos.append(
                    PluginInfo(
                        name, _kind, _impl.plugin_name, _d, _v, _hook, obj,
                        missing=missing_modules(requires),
                        install=getattr(obj, "install", ""),
                    )
                )

            try:
                impl.function(register)
            except Exception as exc:
                infos.append(
                    PluginInfo(impl.plugin_name, kind, impl.plugin_name, dist, version, hook,
                               error=f"{type(exc).__name__}: {exc}")
                )
    for b in pm.broken:
        infos.append(PluginInfo(b.name, "?", b.name, b.distribution, b.version, "", error=b.error))
    _infos = sorted(infos, key=lambda i: (i.kind, i.name))
    return _infos


def lookup(kind: str, name: str) -> Any:
    """The registered object, or a PluginError naming what is installed and what is missing."""
    matches = [i for i in plugins() if i.kind == kind and i.name == name]
    if not matches:
        known = sorted(i.name for i in plugins() if i.kind == kind and i.status == "ok")
        raise PluginError(
            f"no {kind} plugin named {name!r}",
            hint=f"installed: {', '.join(known) or 'none'}; see `segtk plugins`",
        )
    info = matches[0]
    if info.status == "broken":
        raise PluginError(f"{kind} plugin {name!r} is broken: {info.error}")
    if info.missing:
        how = info.install or f"pip install {' '.join(info.missing)}"
        raise PluginError(
            f"{kind} plugin {name!r} needs {', '.join(info.missing)}, which is not installed",
            hint=how,
        )
    return info.obj


def attack(name: str) -> Any:
    return lookup("attack", name)


def segmenter_plugin(name: str) -> SegmenterPlugin:
    return lookup("segmenter", name)


def editor(name: str) -> Any:
    return lookup("editor", name)


def filter_(name: str) -> Any:
    return lookup("filter", name)


def dataset_plugin(name: str) -> Any:
    return lookup("dataset", name)
