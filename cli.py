"""The `segtk` command line: parse options, call the core, print."""

from __future__ import annotations

import sys

import click

from segtk.commands.attack import attack
from segtk.commands.bench import bench
from segtk.commands.console import err_console
from segtk.commands.edit import edit
from segtk.commands.extras import with_install_hint
from segtk.commands.models import datasets, models
from segtk.commands.plugin_commands import add_commands
from segtk.commands.plugins import plugins
from segtk.commands.predict import predict
from segtk.commands.report import report
from segtk.commands.train import train_command
from segtk.core import SegtkError
from segtk.storage.os_errors import os_error


class SegtkGroup(click.Group):
    """Turns SegtkError, and OS errors (disk full, permission denied, ...), into one clear line
    plus a hint and exit code 1 (traceback with --debug)."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except (SegtkError, OSError) as caught:
            if ctx.obj and ctx.obj.get("debug"):
                raise
            exc = os_error(caught) if isinstance(caught, OSError) else with_install_hint(caught)
            err_console.print(f"[bold red]Error:[/] {exc.message}", soft_wrap=True)
            if exc.hint:
                err_console.print(f"[yellow]hint:[/] {exc.hint}", soft_wrap=True)
            sys.exit(1)


@click.group(cls=SegtkGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="Show full tracebacks.")
@click.version_option(package_name="segtk")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """segtk: stress-test semantic segmentation models before they ship.

    \b
    Examples:
      segtk attack --plugin dla                     # DLA on the bundled demo model
      segtk predict --model espnet:camvid=W.safetensors --data camvid:DATA --out runs/p
      segtk plugins
    """
    ctx.ensure_object(dict)["debug"] = debug


for command in (plugins, models, datasets, predict, attack, bench, edit, report, train_command):
    cli.add_command(command)


def main() -> None:
    pm_commands()
    cli(prog_name="segtk")


def pm_commands() -> None:
    """Let plugins add commands (hook register_commands), each guarded (see add_commands)."""
    add_commands(cli)


if __name__ == "__main__":
    main()
