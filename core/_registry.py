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
from segtk.core._captioner import Captioner
from segtk.core._data import DatasetPlugin
from segtk.core._editing import EditBackend, Editor, PromptWriter
from segtk.core._errors import PluginError, UnknownPlugin
from segtk.core._filtering import Filter
from segtk.core._kinds import BY_NAME, KINDS, Kind
from segtk.core._kinds import kind as kind_row
from segtk.core._plugins import BUILTIN, PluginManager, contained, failure, get_plugin_manager
from segtk.core._quality_metric import Metric
from segtk.core._segmenter import SegmenterPlugin
from segtk.core._training import Augmenter

__all__ = ["KINDS", "BY_NAME", "Kind", "PluginInfo", "plugins", "lookup", "origin", "reset",
           "plugin_class", "attack", "segmenter_plugin", "editor", "filter_", "dataset_plugin",
           "augmenter", "edit_backend", "prompt_writer", "metric", "captioner", "missing_modules",
           "claim_group", "note", "manager", "owner", "loaded", "misnamed", "contained", "failure", "REGISTERED"]

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


_read: dict[str, list[PluginInfo]] = {}  # plugin (pluggy name) -> what its hooks registered
_broken_read = 0  # how many of the manager's broken entry points are in _read
_infos_of: PluginManager | None = None  # the manager _read was read from
_commands: list[PluginInfo] = []  # plugins' CLI commands (`note`), added by segtk.commands
_command_groups: set[int] = set()  # groups filled with them since the last reset (`claim_group`)


def reset() -> None:
    global _broken_read
    _read.clear()
    _broken_read = 0
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
    """Everything installed (every plugin imported), plus broken entry points, in a stable
    order: the listing of `segtk plugins`."""
    _current_manager().load_entry_points()
    return loaded()


def loaded() -> list[PluginInfo]:
    """What the plugins imported so far registered (each plugin's hooks called once per plugin
    manager), plus broken entry points, in a stable order."""
    pm = _current_manager()
    for hook in (h for row in KINDS for h in row.hooks):
        for impl in getattr(pm.hook, hook).get_hookimpls():
            if impl.plugin_name not in _read:
                _read_plugin(pm, impl.plugin_name)
    _read_broken(pm)
    infos = [i for rows in _read.values() for i in rows]
    mark_conflicts(infos)
    return sorted(infos + _commands, key=lambda i: (i.kind, i.name))


def _read_plugin(pm: PluginManager, plugin: str) -> None:
    """Call each kind hook of one plugin; a registration under a name its entry points do not
    declare is refused (an unused plugin is never imported, so a name must be knowable from
    metadata)."""
    infos = _read.setdefault(plugin, [])
    dist, version = pm.distributions.get(plugin, (REGISTERED, ""))
    declared = pm.names.get(plugin)
    for kind, hook in ((row.name, h) for row in KINDS for h in row.hooks):
        for impl in getattr(pm.hook, hook).get_hookimpls():
            if impl.plugin_name != plugin:
                continue

            def register(obj: Any, _kind=kind, _hook=hook) -> None:
                name = obj.name
                requires = tuple(getattr(obj, "requires", ()))
                infos.append(PluginInfo(
                    name, _kind, plugin, dist, version, _hook, obj,
                    error=misnamed(_kind, name, plugin, declared, dist),
                    missing=missing_modules(requires), install=getattr(obj, "install", ""),
                ))

            try:
                impl.function(register)
            except BaseException as exc:  # SystemExit too: `segtk plugins` must still list it
                if not contained(exc):
                    raise
                infos.append(PluginInfo(plugin, kind, plugin, dist, version, hook,
                                        error=failure(exc)))


def misnamed(kind: str, name: str, plugin: str, declared: tuple[str, ...] | None,
             dist: str) -> str:
    """Why a registration is refused for its name ("" when its entry points declare it):
    segtk imports a plugin only when its entry-point name is used."""
    if declared is None or name in declared or dist == BUILTIN:
        return ""
    return (f"{kind} {name!r} is registered under entry point {plugin!r}, whose distribution "
            f"{dist} declares only {', '.join(map(repr, declared))}: add `{name} = \"MODULE\"` "
            "under [project.entry-points.segtk] in its pyproject.toml (one entry point per name "
            "a plugin registers) and reinstall it")


def _read_broken(pm: PluginManager) -> None:
    global _broken_read
    for b in pm.broken[_broken_read:]:
        if b.missing:  # its import needs a module that is not installed: say what to install
            info = PluginInfo(b.name, "?", b.name, b.distribution, b.version, "",
                              missing=[b.missing], install=install_hint(b.distribution, b.missing))
        else:
            info = PluginInfo(b.name, "?", b.name, b.distribution, b.version, "", error=b.error)
        _read.setdefault(b.name, []).append(info)
    _broken_read = len(pm.broken)


def owner(info: PluginInfo) -> str:
    """"segtk-attack-dla 0.1.0 (plugin segtk_dla)": who registered a row, for messages."""
    return f"{info.distribution} {info.version}".strip() + f" (plugin {info.plugin})"


def origin(kind: str, obj: Any) -> str:
    """The distribution that registered `obj` as a `kind` ("segtk-attack-dla 0.1.0"), or "" for
    an object no plugin registered (made in Python): how an error names the failing plugin."""
    for info in loaded():
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
        for info in same:
            info.conflict = ""
        if len(same) > 1:
            owners = " and ".join(owner(i) for i in same)
            for info in same:
                info.conflict = f"{kind} {name!r} is registered by {owners}"


def lookup(kind: str, name: str) -> Any:
    """The registered object, or a PluginError naming what is installed and what is missing."""
    return _usable(kind, name).obj


def _usable(kind: str, name: str) -> PluginInfo:
    """The one usable registration of `kind` `name`, or a PluginError saying why there is none.
    Imports only the plugins whose entry point is called `name`; all of them when none
    registers it (to say what is installed, or that a plugin registers it under another
    name). An entry point of that name that fails to import is named, with why."""
    _current_manager().load(name)
    matches = _matches(loaded(), kind, name)
    if not matches:
        matches = _matches(plugins(), kind, name)
    if not matches:
        known = sorted(i.name for i in plugins() if i.kind == kind and i.status == "ok")
        raise UnknownPlugin(
            f"no {kind} plugin named {name!r}",
            hint=f"installed: {', '.join(known) or 'none'}; see `segtk plugins`", name=name,
        )
    info = min(matches, key=lambda i: bool(i.error))  # a refused name yields to a usable one
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


def _matches(infos: list[PluginInfo], kind: str, name: str) -> list[PluginInfo]:
    """The registrations of `kind` `name`, or else the plugin with an entry point `name` that
    failed to import (its kind unknown: "?")."""
    found = [i for i in infos if i.kind == kind and i.name == name]
    names = {b.name: b.names for b in _current_manager().broken}
    return found or [i for i in infos
                     if i.kind == "?" and (i.name == name or name in names.get(i.plugin, ()))]


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
    return cast(SegmenterPlugin, get(kind_row("model"), name))


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
