"""`segtk models` and `segtk datasets`: the --model and --data syntax of what is installed."""

from __future__ import annotations

import click

from segtk.commands.console import console, status_text, table
from segtk.core import registry
from segtk.core.errors import SegtkError


@click.group(invoke_without_command=True)
@click.pass_context
def models(ctx: click.Context) -> None:
    """List model adapters and their --model syntax.

    \b
    Examples:
      segtk models
      segtk models convert espnet espnet_camvid.pth espnet_camvid.safetensors
    """
    if ctx.invoked_subcommand is None:
        infos = [i for i in registry.plugins() if i.kind == "segmenter"]
        console.print(table("--model PLUGIN:ARG", ["plugin", "syntax", "example", "status"],
                            [[i.name, i.obj.syntax if i.obj else "", i.obj.example if i.obj else "",
                              status_text(i.status)] for i in infos]))


@models.command("convert")
@click.argument("plugin")
@click.argument("source", type=click.Path(dir_okay=False))
@click.argument("target", type=click.Path(dir_okay=False))
def models_convert(plugin: str, source: str, target: str) -> None:
    """Convert a published checkpoint (.pth, loaded weights-only) to safetensors.

    \b
    Example:
      segtk models convert espnet espnet_camvid.pth espnet_camvid.safetensors
    """
    entry = registry.segmenter_plugin(plugin)
    if entry.convert is None:
        raise SegtkError(f"model plugin {plugin!r} has no converter")
    entry.convert(source, target)
    console.print(f"wrote {target}")


@click.command()
def datasets() -> None:
    """List dataset readers and their --data syntax.

    \b
    Example:
      segtk datasets
    """
    infos = [i for i in registry.plugins() if i.kind == "dataset"]
    console.print(table("--data FORMAT:PATH", ["format", "syntax", "example", "status"],
                        [[i.name, i.obj.syntax if i.obj else "", i.obj.example if i.obj else "",
                          status_text(i.status)] for i in infos]))
