"""The `segtk` command line: parse options, call the core, print.

Each command is imported when it runs or shows its help (the table below), so `segtk --help`
imports neither torch nor any plugin, and a command imports only the plugins it uses.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import sys
from typing import Any

import click

# segtk's own commands: name -> ("module:attribute", the short help `segtk --help` shows, which
# tests/test_cli_lazy.py keeps equal to the command's own). Add a command with one line here.
COMMANDS: dict[str, tuple[str, str]] = {
    "attack": ("segtk.commands.attack:attack", "Run an attack (decision-based, or a white-box "
               "reference) over a dataset; report the mIoU drop."),
    "bench": ("segtk.commands.bench:bench", "Benchmarks: the papers' tables on any model."),
    "datasets": ("segtk.commands.models:datasets", "List dataset readers and their --data syntax; "
                 "`segtk datasets SPEC` lists one dataset's classes (index and name), what a "
                 "model's classes are checked against."),
    "evaluate": ("segtk.commands.evaluate:evaluate", "Run the robustness protocol on one model; "
                 "write a robustness card (card.json, card.html)."),
    "leaderboard": ("segtk.commands.evaluate:leaderboard", "Rank robustness cards of one protocol "
                    "version and dataset (HTML, CSV, JSON)."),
    "edit": ("segtk.commands.edit:edit", "Edit an attribute of labelled images into a new dataset "
             "whose labels stay valid."),
    "models": ("segtk.commands.models:models", "List model adapters and their --model syntax; "
               "`segtk models NAME` shows one in full."),
    "plugins": ("segtk.commands.plugins:plugins", "List installed plugins with their status."),
    "predict": ("segtk.commands.predict:predict", "Predict a dataset; print dataset mIoU and pixel "
                "accuracy (a table, or JSON)."),
    "report": ("segtk.commands.report:report", "Write RUN_DIR/report.html for a run of segtk "
               "attack, bench attacks, edit, bench edits, train or bench augment (run.json says "
               "which)."),
    "train": ("segtk.commands.train:train_command", "Fine-tune a model with one augmentation; "
              "print the model spec it wrote."),
}

# Plugins name the commands they add (hook register_commands) in this entry-point group, so
# `segtk --help` lists them without importing them.
COMMAND_GROUP = "segtk.commands"


def plugin_commands() -> dict[str, str]:
    """Command name -> the distribution declaring it (metadata only, nothing imported)."""
    return {ep.name: ep.dist.name if ep.dist else "?"
            for ep in importlib.metadata.entry_points(group=COMMAND_GROUP)}


def load_command(name: str) -> click.Command:
    """Import segtk's own command `name` (a key of COMMANDS)."""
    module, _, attribute = COMMANDS[name][0].partition(":")
    command = getattr(importlib.import_module(module), attribute)
    assert isinstance(command, click.Command)
    return command


class SegtkGroup(click.Group):
    """Imports a command when it is used. Turns SegtkError, and OS errors (disk full, permission
    denied, ...), into one clear line plus a hint and exit code 1 (traceback with --debug)."""

    lazy = COMMANDS  # segtk's own names: a plugin's command never replaces one

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *COMMANDS, *plugin_commands()})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            self.commands[cmd_name] = load_command(cmd_name)
        if cmd_name not in self.commands:  # perhaps a plugin's: import the plugins' commands
            from segtk.commands.plugin_commands import add_commands

            add_commands(self)
        return self.commands.get(cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """click's listing, with the short help of commands not imported yet read from the
        table (segtk's) or the metadata (a plugin's)."""
        names = self.list_commands(ctx)
        if not names:
            return
        limit = formatter.width - 6 - max(len(name) for name in names)
        declared = plugin_commands()
        rows = []
        for name in names:
            command = self.commands.get(name)
            if command is not None:
                if command.hidden:
                    continue
                text = command.get_short_help_str(limit)
            else:
                help = COMMANDS[name][1] if name in COMMANDS else f"From the plugin {declared[name]}."
                text = click.Command(name, help=help).get_short_help_str(limit)
            rows.append((name, text))
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except Exception as caught:
            from segtk.commands.console import err_console
            from segtk.commands.extras import with_install_hint
            from segtk.core import SegtkError
            from segtk.storage.os_errors import os_error

            if not isinstance(caught, (SegtkError, OSError)) or (ctx.obj and ctx.obj.get("debug")):
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


def main() -> None:
    cli(prog_name="segtk")


def pm_commands() -> None:
    """Let every plugin add its commands now (hook register_commands), each guarded (see
    add_commands); `segtk` does this itself when a name is not one of its own."""
    from segtk.commands.plugin_commands import add_commands

    add_commands(cli)


if __name__ == "__main__":
    main()
