"""`segtk models` and `segtk datasets`: the --model and --data syntax of what is installed;
`segtk models NAME` shows one adapter in full, `segtk datasets SPEC` a dataset's classes."""

from __future__ import annotations

import json

import click

from segtk.commands.console import console, shell_safe, status_text, table
from segtk.commands.plugins import details, did_you_mean, print_details
from segtk.core import SegtkError, load_dataset, registry
from segtk.core._errors import UnknownPlugin


class ModelsGroup(click.Group):
    """`segtk models NAME`: a name that is not a subcommand (convert) names an adapter."""

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return super().get_command(ctx, cmd_name) or _adapter_command(cmd_name)


@click.group(cls=ModelsGroup, invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_context
def models(ctx: click.Context, as_json: bool) -> None:
    """List model adapters and their --model syntax; `segtk models NAME` shows one in full.

    \b
    Examples:
      segtk models
      segtk models espnet                  # full syntax, example, classes= (also --json)
      segtk models convert espnet espnet_camvid.pth espnet_camvid.safetensors
    """
    if ctx.invoked_subcommand is not None:
        return
    if _listing("model", "--model PLUGIN:ARG", "plugin", as_json):
        return
    console.print("Every adapter also takes classes=a;b;c (its outputs' names, in order; quote "
                  "the spec in a shell: --model 'torchscript:model.pt,classes=a;b;c'). "
                  "`segtk models NAME` shows one adapter in full.", soft_wrap=True, markup=False)


def _adapter_command(name: str) -> click.Command:
    """`segtk models NAME [--json]` for the adapter `name` (refused if there is none)."""

    @click.command(name)
    @click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
    def show(as_json: bool) -> None:
        infos = [i for i in registry.plugins() if i.kind == "model" and i.name == name]
        if not infos:
            known = [i.name for i in registry.plugins() if i.kind == "model"]
            raise UnknownPlugin(f"no model adapter named {name!r}{did_you_mean(name, known)}",
                                hint=f"installed: {', '.join(sorted(known)) or 'none'}; "
                                     "see `segtk models`", name=name)
        shown = details(infos[0])
        if as_json:
            click.echo(json.dumps(shown, indent=2, default=str))
        else:
            print_details(shown)

    return show


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
@click.argument("spec", required=False)
@click.option("--split", default=None, help="Dataset split (default: the reader's).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def datasets(spec: str | None, split: str | None, as_json: bool) -> None:
    """List dataset readers and their --data syntax; `segtk datasets SPEC` lists one dataset's
    classes (index and name), what a model's classes are checked against.

    \b
    Examples:
      segtk datasets
      segtk datasets demo
      segtk datasets camvid:../shared/data/camvid --json
    """
    if spec is not None:
        _classes(spec, split, as_json)
        return
    if _listing("dataset", "--data FORMAT:PATH", "format", as_json):
        return
    console.print("`segtk datasets SPEC` lists a dataset's classes.", soft_wrap=True)


def _classes(spec: str, split: str | None, as_json: bool) -> None:
    """A dataset's classes, in label-id order, and its ignore index."""
    data = load_dataset(spec, split)
    if as_json:
        click.echo(json.dumps({"dataset": data.name, "spec": spec, "split": split,
                               "images": len(data), "ignore_index": data.ignore_index,
                               "classes": list(data.classes)}, indent=2))
        return
    console.print(table(f"{data.name}: {len(data.classes)} classes, {len(data)} images, "
                        f"label {data.ignore_index} = ignore", ["index", "name"],
                        list(enumerate(data.classes)), fold=True))


def _listing(kind: str, title: str, first: str, as_json: bool) -> bool:
    """`segtk models` / `segtk datasets`: every plugin of a kind as JSON, or a folded table
    (long syntax wraps, nothing is cut). True when the JSON was all there is to print."""
    infos = [i for i in registry.plugins() if i.kind == kind]
    if as_json:
        click.echo(json.dumps([details(i) for i in infos], indent=2, default=str))
        return True
    console.print(table(title, [first, "syntax", "example", "status"],
                        [[i.name, i.obj.syntax if i.obj else "", shell_safe(i.obj.example) if i.obj else "",
                          status_text(i.status)] for i in infos], fold=True))
    return False
