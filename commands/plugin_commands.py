"""Commands plugins add to the CLI (hook `register_commands`), each plugin guarded."""

from __future__ import annotations

from typing import Any

import click

from segtk.core import PluginError, registry


def add_commands(group: click.Group) -> None:
    """Let each plugin add commands to `group`, one plugin at a time. A plugin that raises adds
    nothing and is listed as broken. A name segtk already has stays segtk's; a name two plugins
    add runs neither: a command saying so stands in for it, and both are listed as conflicts
    (`segtk plugins`). Imports every plugin: a command hook may add any name."""
    if not registry.claim_group(group):
        return
    pm = registry.manager()
    pm.load_entry_points()
    builtin = {**dict.fromkeys(getattr(group, "lazy", ())), **group.commands}  # segtk's own
    added: dict[str, list[registry.PluginInfo]] = {}
    for impl in pm.hook.register_commands.get_hookimpls():
        dist, version = pm.distributions.get(impl.plugin_name, (registry.REGISTERED, ""))
        before = dict(group.commands)
        try:
            impl.function(cli=group)
        except BaseException as exc:  # a plugin must never take the CLI (or `segtk --help`) down
            if not registry.contained(exc):
                raise
            registry.note(registry.PluginInfo(impl.plugin_name, "command", impl.plugin_name, dist,
                                              version, "register_commands",
                                              error=registry.failure(exc)))
            continue
        finally:
            after = dict(group.commands)
            group.commands.clear()
            group.commands.update(before)
        for name, command in after.items():
            if before.get(name) is not command:
                info = registry.PluginInfo(name, "command", impl.plugin_name, dist, version,
                                           "register_commands", command)
                registry.note(info)
                added.setdefault(name, []).append(info)
    _settle(group, builtin, added)


def _settle(group: click.Group, builtin: dict[str, Any],
            added: dict[str, list[registry.PluginInfo]]) -> None:
    """Install each added command whose name is free and taken by one plugin only."""
    for name, infos in added.items():
        if name in builtin:
            for info in infos:
                info.conflict = f"command {name!r} of {registry.owner(info)} would replace segtk's own"
        elif len(infos) > 1:
            message = f"command {name!r} is registered by {' and '.join(registry.owner(i) for i in infos)}"
            for info in infos:
                info.conflict = message
            group.commands[name] = refusing_command(name, message)
        else:
            group.commands[name] = infos[0].obj


def refusing_command(name: str, message: str) -> click.Command:
    """Stands in for a command two plugins claim: running it says so instead of picking one."""
    def refuse() -> None:
        raise PluginError(f"{message}; refusing to guess which one to run",
                          hint="uninstall one of them (pip uninstall NAME); see `segtk plugins`")

    return click.Command(name, callback=refuse, help=f"Refused: {message}.", add_help_option=False,
                         context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
