"""`segtk plugins`: what is installed, broken, missing a dependency or in conflict."""

from __future__ import annotations

import json

import click

from segtk.commands.console import console, status_text, table
from segtk.commands.scaffold import new
from segtk.core import registry


@click.group(invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_context
def plugins(ctx: click.Context, as_json: bool) -> None:
    """List installed plugins with their status.

    \b
    Examples:
      segtk plugins
      segtk plugins --json
      segtk plugins new attack my-noise    # scaffold a plugin (docs/write-a-plugin.md)
    """
    if ctx.invoked_subcommand is not None:
        return
    infos = registry.plugins()
    rows = [
        {"name": i.name, "kind": i.kind, "distribution": i.distribution, "version": i.version,
         "status": i.status, "missing": ", ".join(i.missing), "install": i.install,
         "error": i.error or i.conflict,
         "hook": i.hook}
        for i in infos
    ]
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    console.print(table(
        "segtk plugins", ["name", "kind", "distribution", "version", "status", "missing / error"],
        [[r["name"], r["kind"], r["distribution"], r["version"], status_text(r["status"]),
          r["error"] or (f"{r['missing']} ({r['install']})" if r["missing"] else "")] for r in rows],
    ))


plugins.add_command(new)  # segtk plugins new KIND NAME
