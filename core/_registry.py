"""What the plugins registered, with the status `segtk plugins` shows, and typed lookups."""

from __future__ import annotations

import importlib.machinery
import importlib.metadata
import importlib.util
import re
import shlex
from dataclasses import dataclass, field
from typing import Any, cast

from segtk.core._attack import Attack
from segtk.core._augment import Augmenter
from segtk.core._data import DatasetPlugin
from segtk.core._editing import EditBackend, Editor, PromptWriter
from segtk.core._errors import PluginError, UnknownPlugin
from segtk.core._filtering import Filter
from segtk.core._kinds import BY_NAME, KINDS, Kind
from segtk.core._kinds import kind as kind_row
from segtk.core._plugins import PluginManager, contained, failure, get_plugin_manager
from segtk.core._quality import Captioner, Metric
from segtk.core._segmenter import SegmenterPlugin

__all__ = ["KINDS", "BY_NAME", "Kind", "PluginInfo", "plugins", "lookup", "origin", "reset",
           "plugin_class", "attack", "segmenter_plugin", "editor", "filter_", "dataset_plugin",
           "augmenter", "edit_backend", "prompt_writer", "metric", "captioner", "missing_modules",
           "claim_group", "note", "manager", "owner", "contained", "failure", "REGISTERED"]

REGISTERED = "(registered object)"  # the distribution of a plugin registered in-process


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
    conflict: str = ""  # another plugin registered the same kind and name: both are refused

    @property
    def status(self) -> str:
        if self.error:
            return "broken"
        if self.conflict:
            return "conflict"
        return "missing dependency" if self.missing else "ok"


def missing_modules(modules: tuple[str, ...]) -> list[str]:
    """Modules that cannot be imported here, checked without importing them or their parents
    (find_spec on "mmcv._ext" would import mmcv, and with it cv2, at start-up)."""
    return [mod for mod in modules if not _module_exists(mod)]


def _module_exists(name: str) -> bool:
    top, *rest = name.split(".")
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return False
    for part in rest:
        locations = spec.submodule_search_locations if spec is not None else None
        if not locations:
            return False
        spec = importlib.machinery.PathFinder.find_spec(part, list(locations))
    return spec is not None


def unmet_requirements(distribution: str) -> list[str]:
    """The requirements `distribution` declares (not those of its extras) that no installed
    distribution meets by name: what `pip install` would have brought."""
    try:
        declared = importlib.metadata.requires(distribution) or []
    except importlib.metadata.PackageNotFoundError:
        return []
    unmet = []
    for requirement in declared:
        if ";" in requirement:  # an extra's or a platform's requirement
            continue
        name = re.split(r"[\s\[<>=!~(]", requirement.strip(), maxsplit=1)[0]
        try:
            importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            unmet.append(requirement.replace(" ", ""))
    return unmet


def install_hint(distribution: str, module: str) -> str:
    """What to install for a plugin whose import lacks `module`: the requirements its
    distribution declares and that are missing, else a pointer to the plugin's README."""
    unmet = unmet_requirements(distribution)
    if unmet:
        return "pip install " + " ".join(shlex.quote(r) for r in unmet)
    return (f"install the package that provides the module {module!r} (see the README of "
            f"{distribution})")


_infos: list[PluginInfo] | None = None
_infos_of: PluginManager | None = None  # the manager _infos was read from
_commands: list[PluginInfo] = []  # plugins' CLI commands (`note`), added by segtk.commands
_command_groups: set[int] = set()  # groups filled with them since the last reset (`claim_group`)


def reset() -> None:
    global _infos
    _infos = None
    _commands.clear()
    _command_groups.clear()


def _current_manager() -> PluginManager:
    """The plugin manager, forgetting what was read from an earlier one."""
    global _infos_of
    pm = get_plugin_manager()
    if _infos_of is not pm:
        reset()
        _infos_of = pm
    return pm


def plugins() -> list[PluginInfo]:
    """Everything registered, plus broken entry points, in a stable order. Read once per plugin
    manager: a new manager (reset_plugin_manager) is read afresh."""
    global _infos
    pm = _current_manager()
    if _infos is not None:
        return sorted(_infos + _commands, key=lambda i: (i.kind, i.name))
    infos: list[PluginInfo] = []
    for row in KINDS:
        kind, hook = row.name, row.hook
        for impl in getattr(pm.hook, hook).get_hookimpls():
            dist, version = pm.distributions.get(impl.plugin_name, (REGISTERED, ""))

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
            except BaseException as exc:  # SystemExit too: `segtk plugins` must still list it
                if not contained(exc):
                    raise
                infos.append(
                    PluginInfo(impl.plugin_name, kind, impl.plugin_name, dist, version, hook,
                               error=failure(exc))
                )
    for b in pm.broken:
        if b.missing:  # its import needs a module that is not installed: say what to install
            infos.append(PluginInfo(b.name, "?", b.name, b.distribution, b.version, "",
                                    missing=[b.missing], install=install_hint(b.distribution,
                                                                              b.missing)))
        else:
            infos.append(PluginInfo(b.name, "?", b.name, b.distribution, b.version, "",
                                    error=b.error))
    mark_conflicts(infos)
    _infos = infos
    return sorted(_infos + _commands, key=lambda i: (i.kind, i.name))


def owner(info: PluginInfo) -> str:
    """"segtk-attack-dla 0.1.0 (plugin segtk_dla)": who registered a row, for messages."""
    return f"{info.distribution} {info.version}".strip() + f" (plugin {info.plugin})"


def origin(kind: str, obj: Any) -> str:
    """The distribution that registered `obj` as a `kind` ("segtk-attack-dla 0.1.0"), or "" for
    an object no plugin registered (made in Python): how an error names the failing plugin."""
    for info in plugins():
        if info.kind == kind and info.obj is obj:
            if info.distribution == REGISTERED:  # registered in-process, not installed
                return f"plugin {info.plugin}"
            return f"{info.distribution} {info.version}".strip()
    return ""


def mark_conflicts(infos: list[PluginInfo]) -> None:
    """Two registrations of one kind and name: neither may silently replace the other."""
    groups: dict[tuple[str, str], list[PluginInfo]] = {}
    for info in infos:
        if not info.error and info.hook:
            groups.setdefault((info.kind, info.name), []).append(info)
    for (kind, name), same in groups.items():
        if len(same) > 1:
            owners = " and ".join(owner(i) for i in same)
            for info in same:
                info.conflict = f"{kind} {name!r} is registered by {owners}"


def lookup(kind: str, name: str) -> Any:
    """The registered object, or a PluginError naming what is installed and what is missing."""
    return _usable(kind, name).obj


def _usable(kind: str, name: str) -> PluginInfo:
    """The one usable registration of `kind` `name`, or a PluginError saying why there is none."""
    matches = [i for i in plugins() if i.kind == kind and i.name == name]
    if not matches:
        known = sorted(i.name for i in plugins() if i.kind == kind and i.status == "ok")
        raise UnknownPlugin(
            f"no {kind} plugin named {name!r}",
            hint=f"installed: {', '.join(known) or 'none'}; see `segtk plugins`", name=name,
        )
    info = matches[0]
    if info.status == "broken":
        raise PluginError(f"{kind} plugin {name!r} is broken: {info.error}")
    if info.status == "conflict":
        dists = sorted({i.distribution for i in matches})
        raise PluginError(
            f"{info.conflict}; refusing to guess which one to use",
            hint=f"uninstall one of {', '.join(dists)} (pip uninstall NAME); see `segtk plugins`",
        )
    if info.missing:
        how = info.install or f"pip install {' '.join(info.missing)}"
        raise PluginError(
            f"{kind} plugin {name!r} needs {', '.join(info.missing)}, which is not installed",
            hint=how,
        )
    return info


def claim_group(group: object) -> bool:
    """True the first time since the last reset that plugin commands go to the CLI `group`: a
    second pass would take the plugins' commands for segtk's own."""
    _current_manager()
    if id(group) in _command_groups:
        return False
    _command_groups.add(id(group))
    return True


def note(info: PluginInfo) -> None:
    """List a row the kind hooks do not produce (a plugin's CLI command, see
    segtk.commands.plugin_commands) in `plugins()` until the next reset."""
    _commands.append(info)


def manager() -> PluginManager:
    """The plugin manager in use (a new one is read afresh)."""
    return _current_manager()


# --- typed lookups: a registration of the wrong type is the plugin's bug, named here ------------

def _wrong(info: PluginInfo, expected: str) -> PluginError:
    return PluginError(
        f"{info.kind} plugin {info.name!r} from {owner(info)} registered {info.obj!r}, "
        f"which is not {expected}",
        hint=f"fix that plugin's {info.hook} hook, or uninstall it; see `segtk plugins`",
    )


def get(row: Kind, name: str) -> Any:
    """The usable registration `name` of kind `row`, checked against the kind's base: a subclass
    of it (class kinds) or an instance of it (loaders)."""
    info = _usable(row.name, name)
    if row.is_class and not (isinstance(info.obj, type) and issubclass(info.obj, row.base)):
        raise _wrong(info, f"a subclass of {row.base.__name__}")
    if not row.is_class and not isinstance(info.obj, row.base):
        raise _wrong(info, f"an instance of {row.base.__name__}")
    return info.obj


def plugin_class(kind_name: str, name: str) -> type:
    """The registered class `name` of a class kind (attack, editor, filter, ...), checked."""
    row = kind_row(kind_name)
    if not row.is_class:
        raise PluginError(f"{kind_name} plugins are not classes",
                          hint=f"class kinds: {', '.join(k.name for k in KINDS if k.is_class)}")
    return cast(type, get(row, name))


# One typed lookup per kind, for callers' types; the check is `get`'s, from the table.


def attack(name: str) -> type[Attack]:
    return cast("type[Attack]", get(kind_row("attack"), name))


def segmenter_plugin(name: str) -> SegmenterPlugin:
    return cast(SegmenterPlugin, get(kind_row("segmenter"), name))


def editor(name: str) -> type[Editor]:
    return cast("type[Editor]", get(kind_row("editor"), name))


def filter_(name: str) -> type[Filter]:
    return cast("type[Filter]", get(kind_row("filter"), name))


def dataset_plugin(name: str) -> DatasetPlugin:
    return cast(DatasetPlugin, get(kind_row("dataset"), name))


def augmenter(name: str) -> type[Augmenter]:
    """The registered Augmenter class `name` (`segtk train --augment NAME`)."""
    return cast("type[Augmenter]", get(kind_row("augmenter"), name))


def edit_backend(name: str) -> type[EditBackend]:
    """The registered EditBackend class `name` (`segtk edit --backend NAME`)."""
    return cast("type[EditBackend]", get(kind_row("edit-backend"), name))


def prompt_writer(name: str) -> type[PromptWriter]:
    """The registered PromptWriter class `name` (`segtk edit --prompt-writer NAME`)."""
    return cast("type[PromptWriter]", get(kind_row("prompt-writer"), name))


def metric(name: str) -> type[Metric]:
    """The registered Metric class `name` (`segtk bench edits --quality NAME`)."""
    return cast("type[Metric]", get(kind_row("metric"), name))


def captioner(name: str) -> type[Captioner]:
    """The registered Captioner class `name` (`segtk edit --captioner NAME`)."""
    return cast("type[Captioner]", get(kind_row("captioner"), name))
