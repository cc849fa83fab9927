"""Edit backends as the editors see them: "classical" (the editor's own CPU code) or a
registered `EditBackend` (`segtk edit --backend NAME`), looked up and built with the error that
names what to install."""

from __future__ import annotations

from typing import Any

from segtk.core import EditBackend, PluginError, build, registry
from segtk.core._errors import UnknownPlugin

CLASSICAL = "classical"
BACKEND_KIND = "edit-backend"


def backend_names() -> list[str]:
    """The backend names: "classical" and every registered edit backend (whatever its status)."""
    return [CLASSICAL, *sorted({i.name for i in registry.plugins() if i.kind == BACKEND_KIND})]


def backend_class(name: str, who: str = "") -> type[EditBackend] | None:
    """The registered EditBackend class `name` (None for "classical"), or a PluginError that
    lists the backends, or says what to install."""
    if name == CLASSICAL:
        return None
    names = backend_names()
    if name not in names:
        for_whom = f" for editor {who!r}" if who else ""
        raise UnknownPlugin(f"unknown backend {name!r}{for_whom}",
                            hint=f"backends: {', '.join(names)} (edit-backend plugins add more; "
                                 "see `segtk plugins`)", name=name)
    return registry.edit_backend(name)


def make_backend(cls: type[EditBackend], options: dict[str, Any]) -> EditBackend:
    """The backend `cls` built from `options` as its `Params` declare them (`build`); a
    dependency it imports and lacks becomes a PluginError naming it."""
    try:
        backend: EditBackend = build(BACKEND_KIND, cls.name, options)
        return backend
    except ImportError as exc:
        missing = (exc.name or "a module").split(".")[0]
        also = f"  (or: {cls.install})" if cls.install else ""
        raise PluginError(f"--backend {cls.name} needs {missing}, which is not installed",
                          hint=f"pip install {missing}{also}") from exc
